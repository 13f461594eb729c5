package campaign

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// bigDir expands department 10 to 2,400 people, department 2 to two and
// 全员 to 3,000.
type bigDir struct{}

func (bigDir) Expand(_ context.Context, _ string, a yidu.Audience) (yidu.Expansion, error) {
	x := yidu.Expansion{Recipients: roaring.New()}
	if a.All {
		x.Recipients.AddRange(1, 3001)
	}
	for _, d := range a.Departments {
		switch d {
		case 10:
			x.Recipients.AddRange(1, 2401)
		case 2:
			x.Recipients.AddMany([]uint32{1, 2})
		}
	}
	return x, nil
}

// notifier records whom approval was asked of, and the decisions.
type notifier struct {
	mu      sync.Mutex
	asked   []string // version hashes
	counts  []uint64
	decided []store.ApprovalStep
	held    []string
}

func (n *notifier) AskApproval(_ context.Context, _ yidu.Notice, hash, _ string, count uint64, approvers []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.asked = append(n.asked, hash)
	n.counts = append(n.counts, count)
	return nil
}

func (n *notifier) Decided(_ context.Context, _ yidu.Notice, st store.ApprovalStep) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.decided = append(n.decided, st)
	return nil
}

var approvalApp = yidu.App{Name: "hr", CorpID: "ww1", AgentID: 1000002,
	Approval: &yidu.Approval{Over: 1000, Approvers: []string{"wangwu", "lisi"}}}

// replica is one dashboard-and-runner process on the shared database.
type replica struct {
	svc *Service
	run *loops.Runner
}

func newReplica(t *testing.T, db *sql.DB, c *clock, reg *registrar, note *notifier, owner string) replica {
	t.Helper()
	st, err := store.New(db, store.Options{Directory: bigDir{}, Apps: []yidu.App{approvalApp}, Now: c.now})
	testenv.Check(t, "store.New", err)
	rounds := &loops.Rounds{DB: db, Now: c.now, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler)}
	svc := newService(t, st, Options{Rounds: rounds, Notify: note, Now: c.now})
	r, err := loops.NewRunner(st, reg, loops.RunnerOptions{Owner: owner, LeaseTTL: 30 * time.Second, MaxLateness: 2 * time.Hour,
		RetryBackoff: time.Minute, Check: svc.AtItsTime, OnHeld: func(_ context.Context, n yidu.Notice) error {
			note.mu.Lock()
			defer note.mu.Unlock()
			note.held = append(note.held, n.MsgID)
			return nil
		}})
	testenv.Check(t, "NewRunner", err)
	return replica{svc: svc, run: r}
}

func sender(name string) *access.Principal {
	return access.NewPrincipal(name, access.KindWeCom, false, []access.Grant{{Role: yidu.RoleSender,
		Scope: yidu.Scope{Corp: approvalApp.CorpID, Apps: []string{approvalApp.Name}}}})
}

// TestApprovalBeforeSending is issue 41 item 2's flow on MariaDB with two
// replicas: a sender's notice to 2,400 people is held for approval and
// the approver asked; its author cannot approve it; a rejection blocks
// it; after an edit an approval pressed twice on each of two replicas
// sends it exactly once; every step is a row of its trail.
func TestApprovalBeforeSending(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	reg, note := &registrar{}, &notifier{}
	a, b := newReplica(t, db, c, reg, note, "replica-a"), newReplica(t, db, c, reg, note, "replica-b")
	lisi, wangwu, zhaoliu := sender("lisi"), sender("wangwu"), sender("zhaoliu")
	tick := func() {
		t.Helper()
		for _, r := range []replica{a, b} {
			_, err := r.run.Tick(ctx)
			testenv.Check(t, "Tick", err)
		}
	}

	n, err := a.svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "年终奖发放通知", Body: "请阅读",
		Audience: yidu.Audience{Departments: []int64{10}}, Schedule: yidu.Schedule{Draft: true}}})
	testenv.Check(t, "Compose", err)
	n, _, err = a.svc.SendNow(ctx, lisi, n)
	testenv.Check(t, "SendNow", err)
	if n.Approval != yidu.ApprovalPending || n.State != yidu.StateDraft {
		t.Fatalf("after send now: approval %q state %s, want pending and still a draft", n.Approval, n.State)
	}
	if len(note.asked) != 1 || note.counts[0] != 2400 || note.asked[0] != n.ApprovalHash {
		t.Fatalf("approvers asked %v with counts %v, want once for %s with 2400", note.asked, note.counts, n.ApprovalHash)
	}
	tick()
	if got := reg.count(n.MsgID); got != 0 {
		t.Fatalf("sent %d times before approval", got)
	}
	first := n.ApprovalHash

	t.Run("the author cannot approve their own", func(t *testing.T) {
		_, _, _, err := a.svc.Decide(ctx, lisi, n, Decision{Hash: first, Approve: true})
		if !errors.Is(err, ErrOwnNotice) || !errors.Is(err, ErrForbidden) {
			t.Fatalf("Decide(author) = %v, want ErrOwnNotice", err)
		}
	})
	t.Run("nor can a sender who is no approver", func(t *testing.T) {
		_, _, _, err := a.svc.Decide(ctx, zhaoliu, n, Decision{Hash: first, Approve: true})
		if !errors.Is(err, ErrForbidden) {
			t.Fatalf("Decide(zhaoliu) = %v, want ErrForbidden", err)
		}
	})
	t.Run("a rejection needs a reason", func(t *testing.T) {
		_, _, _, err := a.svc.Decide(ctx, wangwu, n, Decision{Hash: first})
		if !errors.Is(err, yidu.ErrInvalid) {
			t.Fatalf("Decide(reject, no reason) = %v, want ErrInvalid", err)
		}
	})

	// 驳回 blocks it.
	n, again, _, err := b.svc.Decide(ctx, wangwu, n, Decision{Hash: first, Reason: "截止日期写错了"})
	testenv.Check(t, "Decide(reject)", err)
	if again || n.Approval != yidu.ApprovalRejected {
		t.Fatalf("rejected: again %v approval %q", again, n.Approval)
	}
	tick()
	if got := reg.count(n.MsgID); got != 0 {
		t.Fatalf("a rejected notice was sent %d times", got)
	}
	if _, _, _, err := a.svc.Decide(ctx, wangwu, n, Decision{Hash: first, Approve: true}); !errors.Is(err, ErrApproval) {
		t.Fatalf("approving a rejected version = %v, want ErrApproval", err)
	}

	// The author fixes it and asks again: a new version.
	title := "年终奖发放通知（更正）"
	n, _, err = a.svc.Edit(ctx, lisi, n, yidu.Patch{Title: &title}, nil)
	testenv.Check(t, "Edit", err)
	n, _, err = a.svc.SendNow(ctx, lisi, n)
	testenv.Check(t, "SendNow again", err)
	if n.Approval != yidu.ApprovalPending || n.ApprovalHash == first {
		t.Fatalf("after the edit: approval %q hash %s, want pending on a new version", n.Approval, n.ApprovalHash)
	}
	if _, _, _, err := a.svc.Decide(ctx, wangwu, n, Decision{Hash: first, Approve: true}); !errors.Is(err, ErrApproval) {
		t.Fatalf("approving the old version = %v, want ErrApproval", err)
	}

	// 批准 pressed twice on each of two replicas at once: sent once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	decided := 0
	for i := range 4 {
		r := []replica{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, again, _, err := r.svc.Decide(ctx, wangwu, n, Decision{Hash: n.ApprovalHash, Approve: true})
			if err != nil {
				t.Errorf("Decide(approve) = %v", err)
				return
			}
			if !again {
				mu.Lock()
				decided++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if decided != 1 {
		t.Errorf("%d presses decided, want 1", decided)
	}
	tick()
	tick()
	if got := reg.count(n.MsgID); got != 1 {
		t.Errorf("sent %d times, want exactly once", got)
	}
	trail, err := a.svc.ApprovalTrail(ctx, n)
	testenv.Check(t, "ApprovalTrail", err)
	var steps []string
	for _, st := range trail {
		steps = append(steps, st.Step+":"+st.Actor)
	}
	want := []string{"requested:lisi", "rejected:wangwu", "requested:lisi", "approved:wangwu"}
	if len(steps) != len(want) {
		t.Fatalf("trail %v, want %v", steps, want)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("trail %v, want %v", steps, want)
		}
	}
	if trail[1].Hash != first || trail[3].Hash != n.ApprovalHash || trail[1].Reason != "截止日期写错了" {
		t.Errorf("trail versions %s %s reason %q, want %s %s", trail[1].Hash, trail[3].Hash, trail[1].Reason, first, n.ApprovalHash)
	}

	t.Run("a small notice needs none", func(t *testing.T) {
		m, err := a.svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "小范围", Audience: yidu.Audience{Departments: []int64{2}},
			Schedule: yidu.Schedule{Draft: true}}})
		testenv.Check(t, "Compose", err)
		m, _, err = a.svc.SendNow(ctx, lisi, m)
		testenv.Check(t, "SendNow", err)
		tick()
		if m.Approval != yidu.ApprovalNone || reg.count(m.MsgID) != 1 {
			t.Fatalf("approval %q, sent %d; want none and once", m.Approval, reg.count(m.MsgID))
		}
	})
}

// TestUnapprovedAtItsTimeIsHeld: a scheduled notice to 全员 not approved
// by its time is held (待审批), its author told, and never sent — also
// not when approved after; one approved and then edited is held too.
func TestUnapprovedAtItsTimeIsHeld(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	reg, note := &registrar{}, &notifier{}
	a := newReplica(t, db, c, reg, note, "replica-a")
	lisi, wangwu := sender("lisi"), sender("wangwu")
	compose := func(title string) yidu.Notice {
		t.Helper()
		n, err := a.svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: title, Audience: yidu.Audience{All: true},
			Schedule: yidu.Schedule{SendAt: c.now().Add(time.Hour)}}})
		testenv.Check(t, "Compose", err)
		if n.Approval != yidu.ApprovalPending || n.State != yidu.StateScheduled {
			t.Fatalf("composed: approval %q state %s, want pending scheduled", n.Approval, n.State)
		}
		return n
	}
	never := compose("全员通知")
	edited := compose("全员通知二")
	edited, _, _, err := a.svc.Decide(ctx, wangwu, edited, Decision{Hash: edited.ApprovalHash, Approve: true})
	testenv.Check(t, "Decide", err)
	body := "改了正文"
	edited, _, err = a.svc.Edit(ctx, lisi, edited, yidu.Patch{Body: &body}, nil)
	testenv.Check(t, "Edit", err)
	if edited.Approval != yidu.ApprovalPending {
		t.Fatalf("edited after approval: %q, want pending", edited.Approval)
	}

	c.add(61 * time.Minute)
	_, err = a.run.Tick(ctx)
	testenv.Check(t, "Tick", err)
	for _, n := range []yidu.Notice{never, edited} {
		got, err := a.svc.st.Get(ctx, nil, n.MsgID)
		testenv.Check(t, "Get", err)
		if got.State != yidu.StateHeld || got.Reason != loops.ReasonAwaitingApproval || reg.count(n.MsgID) != 0 {
			t.Errorf("%s at its time: state %s reason %q sent %d; want held, never sent", n.Title, got.State, got.Reason, reg.count(n.MsgID))
		}
	}
	if len(note.held) != 2 {
		t.Errorf("authors told of %v, want both", note.held)
	}
	// Approved late, it stays held: a person sends it.
	late, _, _, err := a.svc.Decide(ctx, wangwu, never, Decision{Hash: never.ApprovalHash, Approve: true})
	testenv.Check(t, "Decide(late)", err)
	c.add(time.Minute)
	_, err = a.run.Tick(ctx)
	testenv.Check(t, "Tick", err)
	if late.State != yidu.StateHeld || reg.count(never.MsgID) != 0 {
		t.Errorf("approved late: state %s, sent %d; want held, unsent", late.State, reg.count(never.MsgID))
	}
}
