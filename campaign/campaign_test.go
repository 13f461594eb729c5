package campaign

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/testenv"
)

// clock is a settable clock shared by the store and the runners.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// registrar records every RegisterAndSend per msgid; fail makes the next
// calls answer that error, block makes them wait for ctx.
type registrar struct {
	mu    sync.Mutex
	calls map[string][]yidu.Registration
	fail  error
	block bool
	out   yidu.SendStatus
}

func (r *registrar) RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error) {
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string][]yidu.Registration{}
	}
	r.calls[reg.MsgID] = append(r.calls[reg.MsgID], reg)
	fail, block, out := r.fail, r.block, r.out
	r.mu.Unlock()
	if block {
		<-ctx.Done()
		return yidu.Registered{}, ctx.Err()
	}
	if fail != nil {
		return yidu.Registered{}, fail
	}
	return yidu.Registered{Send: yidu.SendReport{Outcomes: []yidu.BatchOutcome{{Status: cmpStatus(out)}}}}, nil
}

func cmpStatus(s yidu.SendStatus) yidu.SendStatus {
	if s == "" {
		return yidu.SendSent
	}
	return s
}

func (r *registrar) count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls[id])
}

// directory is a fixed directory for Store.check: zhangsan (1) and lisi
// (2) are active, department 2 holds both, tag 7 lisi, tag 9 nobody.
type directory struct{}

func (directory) Expand(_ context.Context, _ string, a yidu.Audience) (yidu.Expansion, error) {
	users := map[string]uint32{"zhangsan": 1, "lisi": 2}
	groups := map[int64][]uint32{2: {1, 2}, 3: {2}, 4: {1}}
	tags := map[int64][]uint32{7: {2}, 9: nil}
	x := yidu.Expansion{Recipients: roaring.New()}
	if a.All {
		x.Recipients.AddMany([]uint32{1, 2})
	}
	for _, d := range a.Departments {
		x.Recipients.AddMany(groups[d])
	}
	for _, t := range a.Tags {
		x.Recipients.AddMany(tags[t])
	}
	for _, u := range a.UserIDs {
		if uid, ok := users[u]; ok {
			x.Recipients.Add(uid)
		} else {
			x.Unknown = append(x.Unknown, u)
		}
	}
	return x, nil
}

var testApp = yidu.App{Name: "hr", CorpID: "ww1", AgentID: 1000002}

func setup(t *testing.T) (*sql.DB, *store.Store, *clock) {
	t.Helper()
	db := testenv.MySQL(t)
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	s, err := store.New(db, store.Options{Directory: directory{}, Apps: []yidu.App{testApp}, Now: c.now})
	testenv.Check(t, "store.New", err)
	return db, s, c
}

func draft(c *clock, ahead time.Duration) yidu.Draft {
	return yidu.Draft{App: testApp, Title: "新考勤制度", Body: "请阅读", Audience: yidu.Audience{UserIDs: []string{"zhangsan", "lisi"}},
		Schedule: yidu.Schedule{SendAt: c.now().Add(ahead)}, By: "hr-admin"}
}

func runner(t *testing.T, s *store.Store, reg Registrar, owner string, c *clock) *loops.Runner {
	t.Helper()
	r, err := loops.NewRunner(s, reg, loops.RunnerOptions{Owner: owner, LeaseTTL: 30 * time.Second, MaxLateness: 2 * time.Hour, RetryBackoff: time.Minute})
	testenv.Check(t, "NewRunner", err)
	return r
}

func TestCreateRefusesBadInput(t *testing.T) {
	db, s, c := setup(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		edit  func(d *yidu.Draft)
		field string
	}{
		{"title over the card", func(d *yidu.Draft) { d.Title = strings.Repeat("长", yidu.MaxCardTitle+1) }, "title"},
		{"empty audience", func(d *yidu.Draft) { d.Audience = yidu.Audience{} }, "audience"},
		{"only unknown userids", func(d *yidu.Draft) { d.Audience = yidu.Audience{UserIDs: []string{"nobody1", "nobody2"}} }, "audience.userids"},
		{"send_at in the past", func(d *yidu.Draft) { d.Schedule.SendAt = c.now().Add(-time.Minute) }, "send_at"},
		{"send_at over a year ahead", func(d *yidu.Draft) { d.Schedule.SendAt = c.now().Add(367 * 24 * time.Hour) }, "send_at"},
		{"no send_at", func(d *yidu.Draft) { d.Schedule.SendAt = time.Time{} }, "send_at"},
		{"bad time zone", func(d *yidu.Draft) { d.Schedule.Timezone = "Mars/Base" }, "timezone"},
		{"an empty tag", func(d *yidu.Draft) { d.Audience = yidu.Audience{Tags: []int64{9}} }, "audience"},
		{"an unknown tag and unknown userids", func(d *yidu.Draft) { d.Audience = yidu.Audience{Tags: []int64{404}, UserIDs: []string{"nobody"}} }, "audience"},
		{"an unknown department", func(d *yidu.Draft) { d.Audience = yidu.Audience{Departments: []int64{404}} }, "audience"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := draft(c, time.Hour)
			tc.edit(&d)
			_, err := s.Create(ctx, d)
			if !errors.Is(err, yidu.ErrInvalid) {
				t.Fatalf("Create: %v, want ErrInvalid", err)
			}
			if msg := strings.TrimPrefix(err.Error(), "invalid: "); !strings.HasPrefix(msg, tc.field) {
				t.Errorf("error %q does not start with %q", msg, tc.field)
			}
		})
	}
	if n := testenv.Column[int](t, db, "SELECT COUNT(*) FROM campaigns"); n[0] != 0 {
		t.Errorf("%d rows written by refused input", n[0])
	}
}

// TestTagAudiences: an audience that reaches someone through a tag is
// stored, unknown UserIDs beside it included, and its tags round-trip
// through the stored audience into the registration that fires.
func TestTagAudiences(t *testing.T) {
	_, s, c := setup(t)
	ctx := context.Background()
	reg := &registrar{}
	r := runner(t, s, reg, "a", c)
	cases := []struct {
		name string
		au   yidu.Audience
	}{
		{"a tag", yidu.Audience{Tags: []int64{7}}},
		{"a tag and unknown userids", yidu.Audience{Tags: []int64{7}, UserIDs: []string{"nobody"}}},
		{"an empty tag and a department", yidu.Audience{Tags: []int64{9}, Departments: []int64{2}}},
	}
	for i, tc := range cases {
		d := draft(c, time.Minute)
		d.MsgID = fmt.Sprintf("tag-%d", i)
		d.Audience = tc.au
		n, err := s.Create(ctx, d)
		if err != nil {
			t.Errorf("%s: Create: %v", tc.name, err)
			continue
		}
		if got, err := s.Get(ctx, nil, n.MsgID); err != nil || !slices.Equal(got.Audience.Tags, tc.au.Tags) {
			t.Errorf("%s: stored tags %v (%v); want %v", tc.name, got.Audience.Tags, err, tc.au.Tags)
		}
	}
	// A patch replaces the audience, tags included.
	if _, err := s.Edit(ctx, nil, "tag-0", yidu.Patch{Audience: &yidu.Audience{Tags: []int64{7, 9}}}); err != nil {
		t.Fatalf("Edit: %v", err)
	}
	if _, err := s.Edit(ctx, nil, "tag-1", yidu.Patch{Audience: &yidu.Audience{Tags: []int64{9}}}); !errors.Is(err, yidu.ErrInvalid) {
		t.Errorf("Edit to an empty tag: %v; want ErrInvalid", err)
	}
	c.add(time.Minute)
	if n, err := r.Tick(ctx); err != nil || n != len(cases) {
		t.Fatalf("Tick: %d, %v; want %d", n, err, len(cases))
	}
	want := map[string][]int64{"tag-0": {7, 9}, "tag-1": {7}, "tag-2": {9}}
	for id, tags := range want {
		calls := reg.calls[id]
		if len(calls) != 1 || !slices.Equal(calls[0].Audience.Tags, tags) {
			t.Errorf("%s: registrations %+v; want one with tags %v", id, calls, tags)
		}
	}
}

func TestStateMachine(t *testing.T) {
	_, s, c := setup(t)
	ctx := context.Background()
	reg := &registrar{}
	r := runner(t, s, reg, "a", c)

	sched, err := s.Create(ctx, draft(c, 10*time.Minute))
	testenv.Check(t, "Create", err)
	if sched.State != yidu.StateScheduled {
		t.Fatalf("state %s, want scheduled", sched.State)
	}
	d := draft(c, 0)
	d.Schedule = yidu.Schedule{Draft: true}
	dr, err := s.Create(ctx, d)
	testenv.Check(t, "Create draft", err)
	if dr.State != yidu.StateDraft || !dr.SendAt.IsZero() {
		t.Fatalf("draft: %s at %v", dr.State, dr.SendAt)
	}
	// Not due: nothing claimed; the draft is never sent by the clock.
	if n, err := r.Tick(ctx); err != nil || n != 0 {
		t.Fatalf("Tick before due: %d, %v", n, err)
	}
	// Editable while scheduled.
	title := "新考勤制度（修订）"
	ed, err := s.Edit(ctx, nil, sched.MsgID, yidu.Patch{Title: &title})
	testenv.Check(t, "Edit", err)
	if ed.Title != title || ed.State != yidu.StateScheduled {
		t.Fatalf("edited: %q %s", ed.Title, ed.State)
	}
	c.add(10 * time.Minute)
	if n, err := r.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("Tick when due: %d, %v", n, err)
	}
	got, err := s.Get(ctx, nil, sched.MsgID)
	testenv.Check(t, "Get", err)
	if got.State != yidu.StateSent || got.SentLateBy != 0 || got.StartedAt.IsZero() {
		t.Fatalf("after send: %s late %v started %v", got.State, got.SentLateBy, got.StartedAt)
	}
	calls := reg.calls[sched.MsgID]
	if len(calls) != 1 || calls[0].Title != title || !calls[0].Send || !calls[0].SentAt.Equal(got.StartedAt) {
		t.Fatalf("registrations: %+v", calls)
	}
	// Sent: no edit, no cancel, no send.
	if _, err := s.Edit(ctx, nil, sched.MsgID, yidu.Patch{Title: &title}); !errors.Is(err, yidu.ErrNotEditable) {
		t.Errorf("Edit after sent: %v", err)
	}
	if _, err := s.Cancel(ctx, nil, sched.MsgID, "x"); !errors.Is(err, yidu.ErrNotEditable) {
		t.Errorf("Cancel after sent: %v", err)
	}
	// A draft is sent by a person: SendNow, then the runner.
	if _, err := s.SendNow(ctx, nil, dr.MsgID, "x"); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Tick(ctx); err != nil || n != 1 {
		t.Fatalf("Tick after SendNow: %d, %v", n, err)
	}
	if got, _ := s.Get(ctx, nil, dr.MsgID); got.State != yidu.StateSent {
		t.Errorf("draft after send now: %s", got.State)
	}
	// Cancel a scheduled one; it is never sent.
	x, err := s.Create(ctx, draft(c, time.Minute))
	testenv.Check(t, "Create", err)
	if x, err = s.Cancel(ctx, nil, x.MsgID, "x"); err != nil || x.State != yidu.StateCancelled {
		t.Fatalf("Cancel: %s %v", x.State, err)
	}
	c.add(time.Hour)
	if n, _ := r.Tick(ctx); n != 0 || reg.count(x.MsgID) != 0 {
		t.Errorf("cancelled notice claimed %d, sent %d", n, reg.count(x.MsgID))
	}
	// Another corp does not see it.
	if _, err := s.Get(ctx, []string{"ww2"}, x.MsgID); !errors.Is(err, yidu.ErrNotFound) {
		t.Errorf("Get from another corp: %v", err)
	}
}

func TestLatenessAndHeld(t *testing.T) {
	db, s, c := setup(t)
	ctx := context.Background()
	reg := &registrar{}
	late, err := s.Create(ctx, draft(c, time.Minute))
	testenv.Check(t, "Create", err)
	held, err := s.Create(ctx, draft(c, 2*time.Minute))
	testenv.Check(t, "Create", err)
	gone, err := s.Create(ctx, draft(c, 3*time.Hour))
	testenv.Check(t, "Create", err)
	_ = gone
	// Down for 2 h 1.5 min: late is 2 h 0.5 min late (held), held's 1 h
	// 59.5 min (sent late), gone is not due.
	c.add(2*time.Hour + 90*time.Second)
	var told []yidu.Notice
	r, err := loops.NewRunner(s, reg, loops.RunnerOptions{Owner: "a", LeaseTTL: 30 * time.Second, MaxLateness: 2 * time.Hour, RetryBackoff: time.Minute,
		OnHeld: func(_ context.Context, n yidu.Notice) error { told = append(told, n); return nil }})
	testenv.Check(t, "NewRunner", err)
	if _, err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	// The hold is an audit row (who: yidu, why) and its author is told,
	// once however often the Runner polls.
	if _, err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	holds := testenv.Column[string](t, db, `SELECT CONCAT(actor, '|', detail) FROM audit_events WHERE action = 'hold' AND msgid = ?`, late.MsgID)
	if len(holds) != 1 || !strings.HasPrefix(holds[0], System+"|") || !strings.Contains(holds[0], "max_lateness") {
		t.Errorf("audit rows of the late hold = %q; want one by %s with its reason", holds, System)
	}
	if len(told) != 1 || told[0].MsgID != late.MsgID || told[0].State != yidu.StateHeld || told[0].Reason != loops.HeldReason(120, 2*time.Hour) {
		t.Errorf("authors told = %+v; want the late notice's, once", told)
	}
	a, _ := s.Get(ctx, nil, late.MsgID)
	b, _ := s.Get(ctx, nil, held.MsgID)
	if a.State != yidu.StateHeld || a.Reason != loops.HeldReason(120, 2*time.Hour) || reg.count(late.MsgID) != 0 {
		t.Errorf("over max lateness: %s %q, sent %d", a.State, a.Reason, reg.count(late.MsgID))
	}
	if b.State != yidu.StateSent || b.SentLateBy != 2*time.Hour+90*time.Second-2*time.Minute {
		t.Errorf("within max lateness: %s late %v", b.State, b.SentLateBy)
	}
	// A held notice is not sent by the clock, only by a person, and then
	// not held again; its lateness is reported.
	c.add(time.Minute)
	if _, err := r.Tick(ctx); err != nil || reg.count(late.MsgID) != 0 {
		t.Fatalf("held notice sent by the clock: %v", err)
	}
	if _, err := s.Edit(ctx, nil, late.MsgID, yidu.Patch{}); !errors.Is(err, yidu.ErrInvalid) {
		t.Errorf("Edit held without send_at: %v", err)
	}
	if _, err := s.SendNow(ctx, nil, late.MsgID, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	a, _ = s.Get(ctx, nil, late.MsgID)
	if a.State != yidu.StateSent || reg.count(late.MsgID) != 1 || a.SentLateBy < 2*time.Hour {
		t.Errorf("held then sent: %s, %d sends, late %v", a.State, reg.count(late.MsgID), a.SentLateBy)
	}
}

// TestClaimExactlyOnce: many replicas poll the same due notices at once;
// each notice is registered once.
func TestClaimExactlyOnce(t *testing.T) {
	_, s, c := setup(t)
	ctx := context.Background()
	reg := &registrar{}
	var ids []string
	for range 20 {
		n, err := s.Create(ctx, draft(c, 2*time.Second))
		testenv.Check(t, "Create", err)
		ids = append(ids, n.MsgID)
	}
	c.add(2 * time.Second)
	var wg sync.WaitGroup
	claimed := make([]int, 6)
	for i := range claimed {
		r := runner(t, s, reg, fmt.Sprintf("replica-%d", i), c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				n, err := r.Tick(ctx)
				if err != nil {
					t.Error(err)
				}
				claimed[i] += n
			}
		}()
	}
	wg.Wait()
	total := 0
	for _, n := range claimed {
		total += n
	}
	if total != len(ids) {
		t.Errorf("%d claims for %d notices", total, len(ids))
	}
	for _, id := range ids {
		if n := reg.count(id); n != 1 {
			t.Errorf("%s registered %d times", id, n)
		}
	}
}

// TestResumeAfterCrash: a replica that claimed a notice and died leaves
// it sending; once its lease ran out another replica resumes it (the
// same msgid, so the tracker sends only the undelivered batches) and the
// dead one can no longer finish it.
func TestResumeAfterCrash(t *testing.T) {
	db, s, c := setup(t)
	ctx := context.Background()
	n, err := s.Create(ctx, draft(c, time.Second))
	testenv.Check(t, "Create", err)
	c.add(time.Second)
	dead := store.Lease{Table: "campaigns", Owner: "dead", TTL: 30 * time.Second}
	ok, err := dead.Claim(ctx, db, c.now(), []yidu.NoticeState{yidu.StateScheduled}, "started_at = ?", "msgid = ?", c.now(), n.MsgID)
	if err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	if _, err := s.Edit(ctx, nil, n.MsgID, yidu.Patch{}); !errors.Is(err, yidu.ErrNotEditable) {
		t.Errorf("Edit while sending: %v", err)
	}
	reg := &registrar{}
	r := runner(t, s, reg, "b", c)
	if k, _ := r.Tick(ctx); k != 0 {
		t.Fatalf("a live lease was taken over")
	}
	c.add(31 * time.Second)
	if k, err := r.Tick(ctx); err != nil || k != 1 {
		t.Fatalf("resume: %d %v", k, err)
	}
	got, _ := s.Get(ctx, nil, n.MsgID)
	if got.State != yidu.StateSent || got.Attempts != 2 || reg.count(n.MsgID) != 1 {
		t.Errorf("resumed: %s attempts %d sends %d", got.State, got.Attempts, reg.count(n.MsgID))
	}
	if ok, _ := dead.Finish(ctx, db, yidu.StateFailed, "", "msgid = ?", n.MsgID); ok {
		t.Error("the dead owner finished a notice it no longer owns")
	}
}

// TestRetryAndFail: refused batches are retried after the backoff, a
// hopeless notice fails with a reason, an invalid one fails at once.
func TestRetryAndFail(t *testing.T) {
	_, s, c := setup(t)
	ctx := context.Background()
	reg := &registrar{out: yidu.SendRefused}
	r, err := loops.NewRunner(s, reg, loops.RunnerOptions{Owner: "a", MaxAttempts: 2, RetryBackoff: time.Minute})
	testenv.Check(t, "NewRunner", err)
	n, err := s.Create(ctx, draft(c, time.Second))
	testenv.Check(t, "Create", err)
	c.add(time.Second)
	if k, _ := r.Tick(ctx); k != 1 {
		t.Fatal("not claimed")
	}
	if got, _ := s.Get(ctx, nil, n.MsgID); got.State != yidu.StateSending {
		t.Fatalf("after a refused batch: %s", got.State)
	}
	if k, _ := r.Tick(ctx); k != 0 {
		t.Fatal("retried before the backoff")
	}
	c.add(time.Minute + time.Second)
	if k, _ := r.Tick(ctx); k != 1 {
		t.Fatal("not retried after the backoff")
	}
	got, _ := s.Get(ctx, nil, n.MsgID)
	if got.State != yidu.StateFailed || !strings.Contains(got.Reason, "2 attempts") {
		t.Errorf("after max attempts: %s %q", got.State, got.Reason)
	}

	reg.fail = fmt.Errorf("%w: audience has no active member", yidu.ErrInvalid)
	m, err := s.Create(ctx, draft(c, time.Second))
	testenv.Check(t, "Create", err)
	c.add(time.Second)
	r.Tick(ctx)
	if got, _ := s.Get(ctx, nil, m.MsgID); got.State != yidu.StateFailed || !strings.Contains(got.Reason, "no active member") {
		t.Errorf("invalid at send time: %s %q", got.State, got.Reason)
	}
}

// TestShutdownReleases: a send interrupted by shutdown releases its lease
// at once, so another replica resumes it without waiting for the TTL.
func TestShutdownReleases(t *testing.T) {
	_, s, c := setup(t)
	n, err := s.Create(context.Background(), draft(c, time.Second))
	testenv.Check(t, "Create", err)
	c.add(time.Second)
	reg := &registrar{block: true}
	r := runner(t, s, reg, "a", c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	testenv.WaitFor(t, 5*time.Second, "the send to start", func() bool { return reg.count(n.MsgID) == 1 })
	cancel()
	<-done
	reg.mu.Lock()
	reg.block = false
	reg.mu.Unlock()
	b := runner(t, s, reg, "b", c)
	if k, err := b.Tick(context.Background()); err != nil || k != 1 {
		t.Fatalf("resume after shutdown: %d %v", k, err)
	}
	if got, _ := s.Get(context.Background(), nil, n.MsgID); got.State != yidu.StateSent {
		t.Errorf("state %s", got.State)
	}
}

// panicking panics in RegisterAndSend for the msgids in poison, as a bug
// in one notice's send would.
type panicking struct {
	registrar
	mu     sync.Mutex
	poison map[string]bool
}

func (p *panicking) RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error) {
	p.mu.Lock()
	bad := p.poison[reg.MsgID]
	p.mu.Unlock()
	if bad {
		panic("poisoned send of " + reg.MsgID) // as a bug in one notice's send would
	}
	return p.registrar.RegisterAndSend(ctx, reg)
}

// TestPoisonedSendOthersGo: a notice whose send panics is recovered,
// counted and backed off; the other notices due with it are sent, and
// once healed it is resumed and sent once (issue 46).
func TestPoisonedSendOthersGo(t *testing.T) {
	_, s, c := setup(t)
	ctx := context.Background()
	bad, err := s.Create(ctx, draft(c, time.Second))
	testenv.Check(t, "Create", err)
	good, err := s.Create(ctx, draft(c, time.Second))
	testenv.Check(t, "Create", err)
	reg := &panicking{poison: map[string]bool{bad.MsgID: true}}
	g, err := loop.New("runner", loop.Options{Now: c.now})
	testenv.Check(t, "loop.New", err)
	r, err := loops.NewRunner(s, reg, loops.RunnerOptions{Owner: "a", LeaseTTL: 30 * time.Second, MaxLateness: 2 * time.Hour, RetryBackoff: time.Minute, Guard: g})
	testenv.Check(t, "NewRunner", err)
	c.add(time.Second)
	if _, err := r.Tick(ctx); err != nil { // no panic escapes
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, nil, good.MsgID); got.State != yidu.StateSent {
		t.Errorf("the other notice is %s; want sent", got.State)
	}
	if !g.BackedOff("notice " + bad.MsgID) {
		t.Error("the poisoned notice is not backed off")
	}
	reg.mu.Lock()
	reg.poison = nil
	reg.mu.Unlock()
	c.add(31 * time.Second) // past its backoff and its lease
	if _, err := r.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, nil, bad.MsgID); got.State != yidu.StateSent || reg.count(bad.MsgID) != 1 || reg.count(good.MsgID) != 1 {
		t.Errorf("healed notice %s, sends %d and %d; want sent, once each", got.State, reg.count(bad.MsgID), reg.count(good.MsgID))
	}
}
