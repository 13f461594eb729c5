package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

var (
	hashV1 = strings.Repeat("a", 64)
	hashV2 = strings.Repeat("b", 64)
)

func step(name, hash, actor string, at time.Time) store.ApprovalStep {
	return store.ApprovalStep{Hash: hash, Step: name, Actor: actor, At: at}
}

// TestAskApprovalOnce: asking approval of the version pending already
// writes nothing (one requested step, one audit row); a new version is a
// new request.
func TestAskApprovalOnce(t *testing.T) {
	db, s, c := newStore(t)
	ctx := context.Background()
	n := createNotice(t, s, c, "m-ask")
	ask := func(hash string) int64 {
		t.Helper()
		at := c.now()
		asks, err := s.AskApproval(ctx, n, false, step(store.StepRequested, hash, "author", at),
			store.StepEvent(nil, n, yidu.ActionApprovalRequest, at, "version="+hash))
		testenv.Check(t, "AskApproval", err)
		return asks
	}
	tests := []struct {
		name      string
		hash      string
		wantAsks  int64
		wantSteps int
	}{
		{"first request", hashV1, 1, 1},
		{"same version again", hashV1, 0, 1},
		{"a new version", hashV2, 2, 2},
		{"the new version again", hashV2, 0, 2},
	}
	for _, tt := range tests {
		c.add(time.Second)
		if got := ask(tt.hash); got != tt.wantAsks {
			t.Errorf("%s: AskApproval = %d; want %d", tt.name, got, tt.wantAsks)
		}
		if got := count(t, db, "notice_approvals", "msgid = 'm-ask' AND step = 'requested'"); got != tt.wantSteps {
			t.Errorf("%s: %d requested steps; want %d", tt.name, got, tt.wantSteps)
		}
		if got := count(t, db, "audit_events", "msgid = 'm-ask' AND action = 'approval_request'"); got != tt.wantSteps {
			t.Errorf("%s: %d audit rows; want %d", tt.name, got, tt.wantSteps)
		}
	}
	got, err := s.Get(ctx, nil, "m-ask")
	testenv.Check(t, "Get", err)
	if got.Approval != "pending" || got.ApprovalHash != hashV2 {
		t.Errorf("notice approval = %s %s; want pending %s", got.Approval, got.ApprovalHash, hashV2)
	}
	actor, at, found, err := s.RequestedBy(ctx, n, hashV1)
	if err != nil || !found || actor != "author" || !at.Equal(t0.Add(time.Second)) {
		t.Errorf("RequestedBy(v1) = %q %v %v %v; want author at the first request", actor, at, found, err)
	}
	if _, _, found, _ := s.RequestedBy(ctx, n, strings.Repeat("c", 64)); found {
		t.Error("RequestedBy found a version nobody asked for")
	}
}

// TestDecideOnce: two approvers decide the pending version at once
// (approve and reject, on two replicas): MySQL decides, so one decision
// is stored with its step and audit row and the other is told it came
// again; a decision of a version no longer pending writes nothing.
func TestDecideOnce(t *testing.T) {
	db, s, c := newStore(t)
	ctx := context.Background()
	for round := range 5 {
		msg := "m-decide-" + string(rune('a'+round))
		n := createNotice(t, s, c, msg)
		at := c.now()
		_, err := s.AskApproval(ctx, n, false, step(store.StepRequested, hashV1, "author", at),
			store.StepEvent(nil, n, yidu.ActionApprovalRequest, at, ""))
		testenv.Check(t, "AskApproval", err)
		n, err = s.Get(ctx, nil, msg)
		testenv.Check(t, "Get", err)
		deciders := []struct {
			to   yidu.ApprovalState
			step string
			act  yidu.Action
		}{
			{"approved", store.StepApproved, yidu.ActionApprove},
			{"rejected", store.StepRejected, yidu.ActionReject},
		}
		agains := make([]bool, len(deciders))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, d := range deciders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				again, err := s.Decide(ctx, n, d.to, false, step(d.step, hashV1, "approver", at), store.StepEvent(nil, n, d.act, at, ""))
				if err != nil {
					t.Errorf("Decide %s: %v", d.to, err)
				}
				agains[i] = again
			}()
		}
		close(start)
		wg.Wait()
		if agains[0] == agains[1] {
			t.Fatalf("%s: Decide again = %v; want exactly one decision", msg, agains)
		}
		won := 0
		if agains[0] {
			won = 1
		}
		got, err := s.Get(ctx, nil, msg)
		testenv.Check(t, "Get", err)
		if got.Approval != deciders[won].to {
			t.Errorf("%s: approval = %s; want the winner's %s", msg, got.Approval, deciders[won].to)
		}
		steps := testenv.Column[string](t, db, "SELECT step FROM notice_approvals WHERE msgid = ? AND step <> 'requested'", msg)
		if len(steps) != 1 || steps[0] != deciders[won].step {
			t.Errorf("%s: decision steps = %v; want [%s]", msg, steps, deciders[won].step)
		}
		if n := count(t, db, "audit_events", "msgid = ? AND action IN ('approve', 'reject')", msg); n != 1 {
			t.Errorf("%s: %d decision audit rows; want 1", msg, n)
		}
	}

	// A version that is not the pending one is not decided.
	n := createNotice(t, s, c, "m-stale")
	at := c.now()
	_, err := s.AskApproval(ctx, n, false, step(store.StepRequested, hashV2, "author", at), store.StepEvent(nil, n, yidu.ActionApprovalRequest, at, ""))
	testenv.Check(t, "AskApproval", err)
	again, err := s.Decide(ctx, n, "approved", false, step(store.StepApproved, hashV1, "approver", at), store.StepEvent(nil, n, yidu.ActionApprove, at, ""))
	if err != nil || !again {
		t.Errorf("Decide of a stale version = %v, %v; want again", again, err)
	}
	if got, _ := s.Get(ctx, nil, "m-stale"); got.Approval != "pending" {
		t.Errorf("a stale decision changed approval to %s", got.Approval)
	}
}

// TestDecideSendNow: approving with send now makes the notice due now
// in the same UPDATE, not later than its own time.
func TestDecideSendNow(t *testing.T) {
	_, s, c := newStore(t)
	ctx := context.Background()
	n := createNotice(t, s, c, "m-now")
	at := c.now()
	_, err := s.AskApproval(ctx, n, true, step(store.StepRequested, hashV1, "author", at), store.StepEvent(nil, n, yidu.ActionApprovalRequest, at, ""))
	testenv.Check(t, "AskApproval", err)
	c.add(time.Minute)
	again, err := s.Decide(ctx, n, "approved", true, step(store.StepApproved, hashV1, "approver", c.now()), store.StepEvent(nil, n, yidu.ActionApprove, c.now(), ""))
	if err != nil || again {
		t.Fatalf("Decide = %v, %v", again, err)
	}
	got, err := s.Get(ctx, nil, "m-now")
	testenv.Check(t, "Get", err)
	if got.State != yidu.StateScheduled || !got.SendAt.Equal(c.now()) || !got.ApprovalNow || got.Approval != "approved" {
		t.Errorf("after Decide with send now: %s at %v, approval %s, send once approved %v; want scheduled at %v, approved, true",
			got.State, got.SendAt, got.Approval, got.ApprovalNow, c.now())
	}
}

// TestNudgeAndWithdraw: a nudge is refused while tooSoon says so (and
// writes nothing); withdrawing makes the notice a draft with no approval,
// once.
func TestNudgeAndWithdraw(t *testing.T) {
	db, s, c := newStore(t)
	ctx := context.Background()
	n := createNotice(t, s, c, "m-nudge")
	at := c.now()
	_, err := s.AskApproval(ctx, n, false, step(store.StepRequested, hashV1, "author", at), store.StepEvent(nil, n, yidu.ActionApprovalRequest, at, ""))
	testenv.Check(t, "AskApproval", err)
	n, err = s.Get(ctx, nil, "m-nudge")
	testenv.Check(t, "Get", err)
	errSoon := errors.New("too soon")
	var lasts []time.Time
	tooSoon := func(last time.Time) error {
		lasts = append(lasts, last)
		if c.now().Sub(last) < time.Hour {
			return errSoon
		}
		return nil
	}
	nudge := func() (int64, error) {
		return s.Nudge(ctx, n, step(store.StepNudged, hashV1, "author", c.now()), store.StepEvent(nil, n, yidu.ActionApprovalRequest, c.now(), ""), tooSoon)
	}
	c.add(time.Minute)
	if _, err := nudge(); !errors.Is(err, errSoon) {
		t.Fatalf("Nudge a minute after the request = %v; want tooSoon's error", err)
	}
	c.add(time.Hour)
	if nudges, err := nudge(); err != nil || nudges != 1 {
		t.Fatalf("Nudge an hour later = %d, %v; want 1", nudges, err)
	}
	c.add(time.Minute)
	if _, err := nudge(); !errors.Is(err, errSoon) {
		t.Fatalf("Nudge a minute after a nudge = %v; want tooSoon's error", err)
	}
	if want := []time.Time{at, at, at.Add(time.Hour + time.Minute)}; len(lasts) != 3 || !lasts[0].Equal(want[0]) || !lasts[2].Equal(want[2]) {
		t.Errorf("tooSoon saw %v; want %v (the last request or nudge)", lasts, want)
	}
	if got := count(t, db, "notice_approvals", "msgid = 'm-nudge' AND step = 'nudged'"); got != 1 {
		t.Errorf("%d nudge steps; want 1", got)
	}

	w := func() bool {
		changed, err := s.Withdraw(ctx, n, step(store.StepWithdrawn, hashV1, "author", c.now()), store.StepEvent(nil, n, yidu.ActionEdit, c.now(), ""))
		testenv.Check(t, "Withdraw", err)
		return changed
	}
	if !w() {
		t.Fatal("Withdraw of a pending notice changed nothing")
	}
	if w() {
		t.Error("a second Withdraw changed it again")
	}
	got, err := s.Get(ctx, nil, "m-nudge")
	testenv.Check(t, "Get", err)
	if got.State != yidu.StateDraft || got.Approval != "" || got.ApprovalHash != "" {
		t.Errorf("after Withdraw: %s, approval %q %q; want a draft, none", got.State, got.Approval, got.ApprovalHash)
	}
	trail, err := s.ApprovalTrail(ctx, n)
	testenv.Check(t, "ApprovalTrail", err)
	var steps []string
	for _, st := range trail {
		steps = append(steps, st.Step)
	}
	if strings.Join(steps, ",") != "requested,nudged,withdrawn" {
		t.Errorf("trail = %v; want requested, nudged, withdrawn", steps)
	}
}
