package campaign

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// orgDir is the directory access reads in these tests: department 2 holds
// uids 1-3 and is led by "lead2" (uid 20), department 3 holds 4-5 and is
// led by "lead3" (uid 21); uids 6 and 7 are in no led department.
type orgDir struct{}

var orgMembers = map[int64][]uint32{2: {1, 2, 3}, 3: {4, 5}}

func (orgDir) DepartmentMembers(_ context.Context, _ string, ds []int64, _ bool) (*roaring.Bitmap, error) {
	b := roaring.New()
	for _, d := range ds {
		b.AddMany(orgMembers[d])
	}
	return b, nil
}

func (orgDir) Lookup(_ context.Context, _, userID string) (uint32, bool, error) {
	switch userID {
	case "lead2":
		return 20, true, nil
	case "lead3":
		return 21, true, nil
	}
	return 0, false, nil
}

func (orgDir) Users(_ context.Context, _ string, uids []uint32) (map[uint32]yidu.User, error) {
	out := map[uint32]yidu.User{}
	for _, u := range uids {
		out[u] = yidu.User{UID: u, UserID: fmt.Sprint("u", u), Status: yidu.StatusActive}
	}
	return out, nil
}

func (orgDir) LedDepartments(_ context.Context, _, userID string) ([]int64, error) {
	switch userID {
	case "lead2":
		return []int64{2}, nil
	case "lead3":
		return []int64{3}, nil
	}
	return nil, nil
}

// messenger records the reminders and recalls it is asked for; hold
// makes each last that long, so concurrent requests overlap.
type messenger struct {
	mu       sync.Mutex
	reminded [][]string
	recalls  int
	hold     time.Duration
	fail     error
	inside   atomic.Int32
	overlap  atomic.Bool
}

func (m *messenger) enter() func() {
	if m.inside.Add(1) > 1 {
		m.overlap.Store(true)
	}
	time.Sleep(m.hold)
	return func() { m.inside.Add(-1) }
}

func (m *messenger) Remind(_ context.Context, _ yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	defer m.enter()()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return yidu.RemindReport{}, m.fail
	}
	ids := slices.Sorted(slices.Values(userIDs))
	m.reminded = append(m.reminded, ids)
	var rep yidu.RemindReport
	rep.Reminded, rep.Sent, rep.Batches = len(ids), len(ids), (len(ids)+loops.RoundBatch-1)/loops.RoundBatch
	return rep, nil
}

func (m *messenger) Recall(context.Context, yidu.Message, int64) (yidu.RecallReport, error) {
	defer m.enter()()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recalls++
	return yidu.RecallReport{Recalled: 1}, nil
}

func (m *messenger) reminders() [][]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reminded)
}

type serviceFixture struct {
	db    *sql.DB
	c     *clock
	acc   *access.Access
	msg   *messenger
	store *store.Store
	// unread are the notice's unread recipients.
	unread *roaring.Bitmap
	m      yidu.Message
}

func newServiceFixture(t *testing.T) *serviceFixture {
	t.Helper()
	db, st, c := setup(t)
	acc, err := access.New(access.Config{LeadersSee: true}, orgDir{}, c.now)
	testenv.Check(t, "access.New", err)
	return &serviceFixture{db: db, c: c, acc: acc, msg: &messenger{}, store: st,
		unread: roaring.BitmapOf(1, 2, 3, 4, 5, 6, 7),
		m:      yidu.Message{CorpID: testApp.CorpID, MsgID: "notice-1", App: testApp.Name, SentAt: c.now()}}
}

// service is one replica's Service: its own ledger (owner) on the shared
// database.
func (f *serviceFixture) service(t *testing.T, owner string) *Service {
	t.Helper()
	l, err := store.NewReminderLog(f.db, owner, 0, f.c.now, slog.New(slog.DiscardHandler))
	testenv.Check(t, "store.NewReminderLog", err)
	rounds := &loops.Rounds{DB: f.db, Now: f.c.now, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler)}
	return newService(t, f.store, Options{Rounds: rounds, Messenger: f.msg, Scope: f.acc, Reminders: l,
		Readers: readers{f: f, read: 1}, RemindInterval: time.Hour, Now: f.c.now})
}

func (f *serviceFixture) remind(s *Service, p *access.Principal) (RemindReport, error) {
	return s.Remind(context.Background(), Remind{Caller: p, Message: f.m})
}

// readers is Readers over the fixture's unread set: u<uid> is each
// one's UserID, and the read count is read.
type readers struct {
	f    *serviceFixture
	read int64
}

func (r readers) Unread(_ context.Context, _ yidu.Message, v access.View) (*roaring.Bitmap, error) {
	return v.Restrict(r.f.unread.Clone()), nil
}

func (readers) UserIDs(_ context.Context, _ string, uids *roaring.Bitmap) (map[uint32]string, int, error) {
	out := map[uint32]string{}
	for _, u := range uids.ToArray() {
		out[u] = fmt.Sprint("u", u)
	}
	return out, 0, nil
}

func (r readers) ReadNow(context.Context, yidu.Message) (int64, error) { return r.read, nil }

func principal(t *testing.T, name string, role yidu.Role, apps []string, depts []int64) *access.Principal {
	t.Helper()
	gs, _, err := access.ConfigGrants(nil, role, testApp.CorpID, apps, depts)
	testenv.Check(t, "ConfigGrants", err)
	return access.NewPrincipal(name, access.KindToken, false, gs)
}

func (f *serviceFixture) leader(t *testing.T, userID string) *access.Principal {
	t.Helper()
	p, err := f.acc.WeCom(context.Background(), testApp.CorpID, userID)
	testenv.Check(t, "access.WeCom", err)
	return p
}

func ids(uids ...uint32) []string {
	out := make([]string, len(uids))
	for i, u := range uids {
		out[i] = fmt.Sprint("u", u)
	}
	sort.Strings(out)
	return out
}

// TestServiceRemindPerScope is issue 38 item 3 as rows of an attacker's
// table, in order on one notice: a leader's reminder of their own people
// does not lock the app's senders out, and nobody is reminded twice
// within the interval, whoever asks.
func TestServiceRemindPerScope(t *testing.T) {
	f := newServiceFixture(t)
	s := f.service(t, "replica-a")
	admin := access.NewPrincipal("admin", access.KindToken, true, nil)
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)
	other := principal(t, "it-sender", yidu.RoleSender, []string{"it"}, nil)
	viewer := principal(t, "viewer", yidu.RoleViewer, nil, []int64{2})
	lead2, lead3 := f.leader(t, "lead2"), f.leader(t, "lead3")
	t0 := f.c.now()
	for _, row := range []struct {
		name    string
		caller  *access.Principal
		advance time.Duration
		// want are the people reminded; wantErr the refusal instead.
		want    []string
		wantErr error
		next    time.Time
		scope   string
	}{
		{name: "a viewer of the configuration reads only", caller: viewer, wantErr: ErrForbidden},
		{name: "a sender of another app may not", caller: other, wantErr: ErrForbidden},
		{name: "a leader reminds their own 3 people", caller: lead2, want: ids(1, 2, 3), scope: "led"},
		{name: "the same leader again within the interval", caller: lead2, advance: time.Minute, wantErr: &TooSoonError{}, next: t0.Add(time.Hour)},
		{name: "the app's sender still reminds the rest", caller: sender, want: ids(4, 5, 6, 7), scope: "all"},
		{name: "the admin then finds nobody due", caller: admin, wantErr: &TooSoonError{}, next: t0.Add(time.Hour)},
		{name: "another leader's people were reminded by the sender", caller: lead3, wantErr: &TooSoonError{}, next: t0.Add(time.Minute + time.Hour)},
		{name: "after the interval the leader reminds their people again", caller: lead2, advance: time.Hour, want: ids(1, 2, 3), scope: "led"},
	} {
		f.c.add(row.advance)
		before := len(f.msg.reminders())
		rep, err := f.remind(s, row.caller)
		got := f.msg.reminders()
		switch {
		case row.wantErr != nil:
			var ts *TooSoonError
			if errors.As(row.wantErr, &ts) {
				if !errors.As(err, &ts) || !ts.Next.Equal(row.next) {
					t.Errorf("%s: err = %v (%+v); want too soon until %v", row.name, err, ts, row.next)
				}
			} else if !errors.Is(err, row.wantErr) {
				t.Errorf("%s: err = %v; want %v", row.name, err, row.wantErr)
			}
			if len(got) != before {
				t.Errorf("%s: a reminder was sent: %v", row.name, got[before:])
			}
		case err != nil:
			t.Errorf("%s: %v", row.name, err)
		case len(got) != before+1 || !slices.Equal(got[before], row.want):
			t.Errorf("%s: reminded %v; want %v", row.name, got[before:], row.want)
		case rep.Reminded != len(row.want) || rep.Scope != row.scope || !rep.NextAllowedAt.Equal(f.c.now().Add(time.Hour)):
			t.Errorf("%s: report %+v; want %d reminded, scope %s", row.name, rep, len(row.want), row.scope)
		}
	}
	// Each manual reminder is recorded per person with whose it was.
	rows := testenv.Column[string](t, f.db, `SELECT CONCAT(uid, ':', reminded_by, ':', scope) FROM manual_reminders
		WHERE corp_id = ? AND msgid = ? ORDER BY reminded_at, uid`, f.m.CorpID, f.m.MsgID)
	want := []string{"1:lead2:led", "2:lead2:led", "3:lead2:led", "4:hr-sender:all", "5:hr-sender:all", "6:hr-sender:all", "7:hr-sender:all",
		"1:lead2:led", "2:lead2:led", "3:lead2:led"}
	if !slices.Equal(rows, want) {
		t.Errorf("manual_reminders = %v; want %v", rows, want)
	}
}

// TestServiceRemindCountsRounds: a person a follow-up round reminded
// within the interval is not reminded again by hand.
func TestServiceRemindCountsRounds(t *testing.T) {
	f := newServiceFixture(t)
	s := f.service(t, "replica-a")
	if _, err := f.db.Exec(`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
		VALUES (?, ?, 1, 'reminder', 6, 'u6', 0, ?, 'sent'), (?, ?, 1, 'reminder', 7, 'u7', 0, ?, 'sent')`,
		f.m.CorpID, f.m.MsgID, f.c.now().Add(-10*time.Minute), f.m.CorpID, f.m.MsgID, f.c.now().Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.remind(s, access.NewPrincipal("admin", access.KindToken, true, nil)); err != nil {
		t.Fatal(err)
	}
	if got := f.msg.reminders(); len(got) != 1 || !slices.Equal(got[0], ids(1, 2, 3, 4, 5, 7)) {
		t.Errorf("reminded %v; want everyone but 6 (a round reminded 6 ten minutes ago)", got)
	}
}

// TestServiceRemindNothingSent: a reminder WeCom never got (no batch left)
// does not hold its people for the interval.
func TestServiceRemindNothingSent(t *testing.T) {
	f := newServiceFixture(t)
	s := f.service(t, "replica-a")
	admin := access.NewPrincipal("admin", access.KindToken, true, nil)
	f.msg.fail = yidu.ErrRateLimited
	if _, err := f.remind(s, admin); !errors.Is(err, yidu.ErrRateLimited) {
		t.Fatalf("remind = %v; want rate limited", err)
	}
	f.msg.fail = nil
	if _, err := f.remind(s, admin); err != nil {
		t.Fatalf("remind after a reminder that sent nothing = %v; want it sent", err)
	}
	f.m.RecalledAt = f.c.now()
	if _, err := f.remind(s, admin); !errors.Is(err, yidu.ErrRecalled) {
		t.Errorf("remind of a recalled notice = %v; want ErrRecalled", err)
	}
}

// TestServiceActsOnceAcrossReplicas: 16 concurrent reminders on two
// replicas (two ledgers, one MySQL) send one reminder; 16 recalls never
// run two at once.
func TestServiceActsOnceAcrossReplicas(t *testing.T) {
	f := newServiceFixture(t)
	f.msg.hold = 100 * time.Millisecond
	reps := []*Service{f.service(t, "replica-a"), f.service(t, "replica-b")}
	admin := access.NewPrincipal("admin", access.KindToken, true, nil)
	var ok, busy, soon atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.remind(reps[i%2], admin)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, ErrBusy):
				busy.Add(1)
			case errors.As(err, new(*TooSoonError)):
				soon.Add(1)
			default:
				t.Errorf("remind: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || busy.Load()+soon.Load() != 15 || len(f.msg.reminders()) != 1 {
		t.Errorf("16 reminders: %d sent, %d busy, %d too soon, %d reminders; want 1 sent, 15 refused", ok.Load(), busy.Load(), soon.Load(), len(f.msg.reminders()))
	}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := reps[i%2].Recall(context.Background(), Recall{Caller: admin, Message: f.m})
			if err != nil && !errors.Is(err, ErrBusy) {
				t.Errorf("recall: %v", err)
			}
		}()
	}
	wg.Wait()
	if f.msg.overlap.Load() {
		t.Error("two acts on the notice ran at once")
	}
	// The claim is free again once released.
	var state string
	if err := f.db.QueryRow(`SELECT state FROM notice_acts WHERE corp_id = ? AND msgid = ?`, f.m.CorpID, f.m.MsgID).Scan(&state); err != nil || state != "idle" {
		t.Errorf("notice_acts state = %q, %v; want idle", state, err)
	}
}

// TestLedgerTakesOverADeadClaim: a claim whose owner died (its lease ran
// out) is taken over; one still held is not.
func TestLedgerTakesOverADeadClaim(t *testing.T) {
	f := newServiceFixture(t)
	l, err := store.NewReminderLog(f.db, "replica-b", 0, f.c.now, nil)
	testenv.Check(t, "store.NewReminderLog", err)
	ctx := context.Background()
	if _, err := f.db.Exec(`INSERT INTO notice_acts (corp_id, msgid, state, act, owner, lease_until) VALUES (?, ?, 'sending', 'remind', 'dead', ?)`,
		f.m.CorpID, f.m.MsgID, f.c.now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.Claim(ctx, f.m.CorpID, f.m.MsgID, "recall"); ok || err != nil {
		t.Fatalf("claim of a live claim = %v, %v; want refused", ok, err)
	}
	f.c.add(2 * time.Second)
	releaseA, ok, err := l.Claim(ctx, f.m.CorpID, f.m.MsgID, "recall")
	if !ok || err != nil {
		t.Fatalf("claim of a dead claim = %v, %v; want taken over", ok, err)
	}
	// A request of the same replica takes over after the first one's
	// lease ran out; the first one's release must not end the second's.
	f.c.add(time.Hour)
	releaseB, ok, err := l.Claim(ctx, f.m.CorpID, f.m.MsgID, "remind")
	if !ok || err != nil {
		t.Fatalf("claim after the lease ran out = %v, %v; want taken over", ok, err)
	}
	releaseA()
	var state, act string
	if err := f.db.QueryRow(`SELECT state, act FROM notice_acts WHERE corp_id = ? AND msgid = ?`, f.m.CorpID, f.m.MsgID).Scan(&state, &act); err != nil ||
		state != "sending" || act != "remind" {
		t.Errorf("after the old holder's release: %s %s, %v; want the new claim (sending, remind) kept", state, act, err)
	}
	releaseB()
}

// TestServiceSendNowOnce: 16 concurrent "send now" of a scheduled notice
// on two replicas make it due once; the others are refused (409).
func TestServiceSendNowOnce(t *testing.T) {
	f := newServiceFixture(t)
	reps := []*Service{f.service(t, "replica-a"), f.service(t, "replica-b")}
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)
	n, err := reps[0].Compose(context.Background(), sender, Compose{Draft: draft(f.c, time.Hour), FollowUpSet: true})
	testenv.Check(t, "Compose", err)
	if _, _, err := reps[0].SendNow(context.Background(), principal(t, "it", yidu.RoleSender, []string{"it"}, nil), n); !errors.Is(err, ErrForbidden) {
		t.Errorf("send now by another app's sender = %v; want ErrForbidden", err)
	}
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := reps[i%2].SendNow(context.Background(), sender, n)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, yidu.ErrNotEditable):
				refused.Add(1)
			default:
				t.Errorf("send now: %v", err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != 15 {
		t.Errorf("16 send now: %d made it due, %d refused; want 1 and 15", ok.Load(), refused.Load())
	}
}

// TestServiceComposeOneTransaction: a compose killed between the notice's
// row and its follow-up policy leaves neither; the app's default policy
// is applied when the request names none; a caller who may not send
// through the app writes nothing.
func TestServiceComposeOneTransaction(t *testing.T) {
	f := newServiceFixture(t)
	s := f.service(t, "replica-a")
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)
	pol := &yidu.Policy{Reminders: []string{"2h"}}
	count := func(table, msgID string) int {
		t.Helper()
		var n int
		if err := f.db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE msgid = ?", msgID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	killed := errors.New("killed between the writes")
	rounds := s.o.Rounds
	s.o.Rounds = killedRounds{Rounds: rounds.(*loops.Rounds), err: killed}
	d := draft(f.c, time.Hour)
	d.MsgID = "compose-killed"
	if _, err := s.Compose(ctx, sender, Compose{Draft: d, FollowUp: pol, FollowUpSet: true}); !errors.Is(err, killed) {
		t.Fatalf("compose = %v; want the injected failure", err)
	}
	if c, p := count("campaigns", d.MsgID), count("follow_ups", d.MsgID); c != 0 || p != 0 {
		t.Errorf("after a compose killed between its writes: %d campaigns rows, %d follow_ups rows; want none", c, p)
	}
	s.o.Rounds = rounds

	// A policy the rounds refuse writes nothing either.
	d.MsgID = "compose-bad-policy"
	if _, err := s.Compose(ctx, sender, Compose{Draft: d, FollowUp: &yidu.Policy{Reminders: []string{"1s"}}, FollowUpSet: true}); !errors.Is(err, yidu.ErrInvalid) {
		t.Errorf("compose with a bad policy = %v; want ErrInvalid", err)
	}
	if c := count("campaigns", d.MsgID); c != 0 {
		t.Errorf("a bad policy left %d campaigns rows", c)
	}

	d.MsgID = "compose-ok"
	if _, err := s.Compose(ctx, sender, Compose{Draft: d, FollowUp: pol, FollowUpSet: true}); err != nil {
		t.Fatal(err)
	}
	if c, p := count("campaigns", d.MsgID), count("follow_ups", d.MsgID); c != 1 || p != 1 {
		t.Errorf("compose: %d campaigns rows, %d follow_ups rows; want one each", c, p)
	}

	// The app's default follow-up, when the request names none.
	app := testApp
	app.FollowUp = &yidu.Policy{Reminders: []string{"1d"}}
	d.App, d.MsgID = app, "compose-default"
	if _, err := s.Compose(ctx, sender, Compose{Draft: d}); err != nil {
		t.Fatal(err)
	}
	got := testenv.Column[string](t, f.db, "SELECT policy FROM follow_ups WHERE msgid = ?", d.MsgID)
	if len(got) != 1 || got[0] != `{"reminders":["1d"]}` {
		t.Errorf("default policy = %v; want the app's", got)
	}

	d.MsgID = "compose-forbidden"
	if _, err := s.Compose(ctx, principal(t, "it", yidu.RoleSender, []string{"it"}, nil), Compose{Draft: d}); !errors.Is(err, ErrForbidden) {
		t.Errorf("compose through another app = %v; want ErrForbidden", err)
	}
	if c := count("campaigns", d.MsgID); c != 0 {
		t.Errorf("a refused compose left %d rows", c)
	}
}

// TestServiceWhoMay: every act refuses a caller who may not send through
// the notice's app (a viewer, a leader, a sender of another app) before
// it writes anything, and lets the app's sender through.
func TestServiceWhoMay(t *testing.T) {
	f := newServiceFixture(t)
	s := f.service(t, "replica-a")
	ctx := context.Background()
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)
	n, err := s.Compose(ctx, sender, Compose{Draft: draft(f.c, time.Hour), FollowUpSet: true})
	testenv.Check(t, "Compose", err)
	title := "改"
	pol := yidu.Policy{Reminders: []string{"2h"}}
	acts := map[string]func(p *access.Principal) error{
		"edit": func(p *access.Principal) error {
			_, _, err := s.Edit(ctx, p, n, yidu.Patch{Title: &title}, nil)
			return err
		},
		"edit policy":  func(p *access.Principal) error { _, _, err := s.Edit(ctx, p, n, yidu.Patch{}, &pol); return err },
		"cancel":       func(p *access.Principal) error { _, _, err := s.Cancel(ctx, p, n); return err },
		"send now":     func(p *access.Principal) error { _, _, err := s.SendNow(ctx, p, n); return err },
		"set policy":   func(p *access.Principal) error { _, err := s.SetFollowUp(ctx, p, f.m, pol); return err },
		"cancel round": func(p *access.Principal) error { _, _, err := s.CancelRound(ctx, p, f.m); return err },
		"read policy":  func(p *access.Principal) error { _, _, err := s.FollowUp(ctx, p, f.m, true); return err },
		"recall": func(p *access.Principal) error {
			_, err := s.Recall(ctx, Recall{Caller: p, Message: f.m})
			return err
		},
	}
	for who, p := range map[string]*access.Principal{
		"viewer":                principal(t, "viewer", yidu.RoleViewer, nil, []int64{2}),
		"leader":                f.leader(t, "lead2"),
		"sender of another app": principal(t, "it", yidu.RoleSender, []string{"it"}, nil),
		"admin of another corp": access.NewPrincipal("x", access.KindToken, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "ww2"}}}),
		"nobody (no principal)": nil,
	} {
		for act, do := range acts {
			if err := do(p); !errors.Is(err, ErrForbidden) {
				t.Errorf("%s by a %s = %v; want ErrForbidden", act, who, err)
			}
		}
	}
	if f.msg.recalls != 0 {
		t.Errorf("a refused recall reached WeCom %d times", f.msg.recalls)
	}
	got, err := f.store.Get(ctx, nil, n.MsgID)
	testenv.Check(t, "Get", err)
	if got.Title != n.Title || got.State != yidu.StateScheduled {
		t.Errorf("after refused acts the notice is %q %s; want it untouched", got.Title, got.State)
	}

	// The sender: a bad policy with an edit writes neither; a good one both.
	bad := yidu.Policy{Reminders: []string{"1s"}}
	if _, _, err := s.Edit(ctx, sender, n, yidu.Patch{Title: &title}, &bad); !errors.Is(err, yidu.ErrInvalid) || !strings.Contains(err.Error(), "follow_up.") {
		t.Errorf("edit with a bad policy = %v; want ErrInvalid naming follow_up", err)
	}
	if got, _ := f.store.Get(ctx, nil, n.MsgID); got.Title != n.Title {
		t.Errorf("an edit with a bad policy changed the title to %q", got.Title)
	}
	if _, _, err := s.Edit(ctx, sender, n, yidu.Patch{Title: &title}, &pol); err != nil {
		t.Fatalf("edit with a policy: %v", err)
	}
	if got, _ := f.store.Get(ctx, nil, n.MsgID); got.Title != title {
		t.Errorf("title = %q; want %q", got.Title, title)
	}
	if p := testenv.Column[string](t, f.db, "SELECT policy FROM follow_ups WHERE msgid = ?", n.MsgID); len(p) != 1 || p[0] != `{"reminders":["2h"]}` {
		t.Errorf("policy = %v; want the edit's", p)
	}
	if _, _, err := s.Cancel(ctx, sender, n); err != nil {
		t.Errorf("cancel by the sender: %v", err)
	}
}

// TestServiceFollowUpRead: the follow-up of a sent notice is read by
// whom may manage it and sees the whole notice; a scoped sender is
// refused (the rounds count people outside its View), and a server
// without rounds answers ErrNoFollowUps to a sender, none to the
// notice's own answer.
func TestServiceFollowUpRead(t *testing.T) {
	f := newServiceFixture(t)
	s := f.service(t, "replica-a")
	ctx := context.Background()
	sender := principal(t, "hr-sender", yidu.RoleSender, []string{testApp.Name}, nil)
	if _, ok, err := s.FollowUp(ctx, sender, f.m, true); err != nil || ok {
		t.Fatalf("loops.FollowUp of a notice without a policy = %v, %v; want none", ok, err)
	}
	_, err := f.db.Exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES (?, ?, ?, 1, 't', ?, 7, '', 1)`, f.m.CorpID, f.m.MsgID, f.m.App, f.m.SentAt)
	testenv.Check(t, "message", err)
	_, err = s.SetFollowUp(ctx, sender, f.m, yidu.Policy{Reminders: []string{"2h"}})
	testenv.Check(t, "SetFollowUp", err)
	fu, ok, err := s.FollowUp(ctx, sender, f.m, true)
	if err != nil || !ok || len(fu.Policy.Reminders) != 1 {
		t.Errorf("loops.FollowUp by the sender = %+v, %v, %v; want the policy set", fu, ok, err)
	}
	if _, _, err := s.FollowUp(ctx, sender, f.m, false); !errors.Is(err, ErrForbidden) {
		t.Errorf("loops.FollowUp by a scoped sender = %v; want ErrForbidden", err)
	}
	if _, ok, err := s.FollowUpOf(ctx, f.m); err != nil || !ok {
		t.Errorf("FollowUpOf = %v, %v; want the policy", ok, err)
	}
	none := newService(t, f.store, Options{Now: f.c.now})
	if _, _, err := none.FollowUp(ctx, sender, f.m, true); !errors.Is(err, ErrNoFollowUps) {
		t.Errorf("loops.FollowUp without rounds = %v; want ErrNoFollowUps", err)
	}
	if _, ok, err := none.FollowUpOf(ctx, f.m); err != nil || ok {
		t.Errorf("FollowUpOf without rounds = %v, %v; want none", ok, err)
	}
}

// newService is New over st (nil: a server that keeps no notices).
func newService(tb testing.TB, st *store.Store, o Options) *Service {
	tb.Helper()
	return New(st, o)
}

// killedRounds stands for a crash between a compose's two writes: the
// notice's row is written, its policy's fails.
type killedRounds struct {
	*loops.Rounds
	err error
}

func (k killedRounds) StorePolicyIn(context.Context, *sql.Tx, string, string, yidu.Policy, time.Time, string) error {
	return k.err
}
