package loops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// fakeLive is the live bitmaps of notices; reads change between rounds.
type fakeLive struct {
	mu   sync.Mutex
	rec  map[string]*roaring.Bitmap
	read map[string]*roaring.Bitmap
}

func (f *fakeLive) RecipientBitmap(_ context.Context, _, msgID string) (*roaring.Bitmap, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, ok := f.rec[msgID]
	if !ok {
		return nil, false, nil
	}
	return b.Clone(), true, nil
}

func (f *fakeLive) ReadBitmap(_ context.Context, _, msgID string) (*roaring.Bitmap, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.read[msgID]; ok {
		return b.Clone(), true, nil
	}
	return roaring.New(), false, nil // as bitmap.Store: no read key yet
}

func (f *fakeLive) markRead(msgID string, uids ...uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read[msgID] == nil {
		f.read[msgID] = roaring.New()
	}
	f.read[msgID].AddMany(uids)
}

// fakePeople: every uid is active "u<uid>" but those who left.
type fakePeople struct{ left *roaring.Bitmap }

func (p fakePeople) Active(_ context.Context, _ string, uids []uint32) (map[uint32]Member, error) {
	out := make(map[uint32]Member, len(uids))
	for _, u := range uids {
		if !p.left.Contains(u) {
			out[u] = Member{UserID: fmt.Sprintf("u%d", u), Name: fmt.Sprintf("用户%d", u)}
		}
	}
	return out, nil
}

type fixedOrg struct{ org *yidu.Org }

func (o fixedOrg) Org(context.Context, string) (*yidu.Org, error) { return o.org, nil }

// sqlSeats counts the users table the test writes (idmap.Mapper.CountActive
// in production).
type sqlSeats struct{ db *sql.DB }

func (s sqlSeats) CountActive(ctx context.Context, corpID string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE corp_id = ? AND status = 1`, corpID).Scan(&n)
	return n, err
}

// sqlJoiners reads the standing_enrolments rows the test writes
// (tracker.Registry.Enrolled in production).
type sqlJoiners struct{ db *sql.DB }

func (j sqlJoiners) Enrolled(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, error) {
	out := roaring.New()
	rows, err := j.db.QueryContext(ctx, `SELECT uid FROM standing_enrolments WHERE corp_id = ? AND msgid = ?`, corpID, msgID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var u uint32
		if err := rows.Scan(&u); err != nil {
			return nil, err
		}
		out.Add(u)
	}
	return out, rows.Err()
}

// fakeSender records every call; failAt makes one task id fail once.
type fakeSender struct {
	mu      sync.Mutex
	batches map[string][]string // task id → users, last call
	calls   map[string]int
	digests map[string][]string // userid → headlines
	texts   map[string][]string // userid → whole texts
	failAt  string
	panicOn string // a task id prefix whose sends panic, until cleared
}

func newSender() *fakeSender {
	return &fakeSender{batches: map[string][]string{}, calls: map[string]int{}, digests: map[string][]string{}, texts: map[string][]string{}}
}

func (s *fakeSender) RemindBatch(_ context.Context, _ yidu.Message, taskID string, _ int, users []string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[taskID]++
	if s.panicOn != "" && strings.HasPrefix(taskID, s.panicOn) {
		panic("poisoned round " + taskID) // as a bug in one round would
	}
	if taskID == s.failAt {
		s.failAt = ""
		return nil, errors.New("connection reset")
	}
	s.batches[taskID] = slices.Sorted(slices.Values(users))
	return nil, nil
}

func (s *fakeSender) Digest(_ context.Context, _ yidu.Message, _, userID, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	headline, _, _ := strings.Cut(text, "\n")
	s.digests[userID] = append(s.digests[userID], headline)
	s.texts[userID] = append(s.texts[userID], text)
	return nil
}

type roundClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *roundClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *roundClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

type fixture struct {
	t      *testing.T
	rounds *Rounds
	live   *fakeLive
	send   *fakeSender
	clock  *roundClock
	t0     time.Time
}

func newFixture(t *testing.T, left ...uint32) *fixture {
	f := newBenchFixture(t, left...)
	f.t = t
	return f
}

// newBenchFixture is newFixture for any testing.TB.
func newBenchFixture(t testing.TB, left ...uint32) *fixture {
	db := testenv.MySQL(t)
	t0 := time.Date(2026, 12, 3, 1, 0, 0, 0, time.UTC) // 09:00 in Shanghai
	f := &fixture{live: &fakeLive{rec: map[string]*roaring.Bitmap{}, read: map[string]*roaring.Bitmap{}}, send: newSender(),
		clock: &roundClock{t: t0}, t0: t0}
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	f.rounds = &Rounds{DB: db, Reads: f.live, People: fakePeople{roaring.BitmapOf(left...)},
		Org: fixedOrg{orgOf(map[int64]int64{1: 0}, map[int64][]uint32{1: {10}},
			map[uint32][]int64{1: {1}, 2: {1}, 3: {1}, 4: {1}, 5: {1}, 10: {1}})},
		Seats: sqlSeats{db}, Joiners: sqlJoiners{db},
		Sender: f.send, Log: slog.New(slog.DiscardHandler), Now: f.clock.Now, Owner: "a", TTL: time.Minute,
		MinGap: time.Second, Zone: func(string) *time.Location { return sh }, Fallback: func(string) []string { return []string{"hr-lead"} }}
	return f
}

func (f *fixture) notice(msgID string, uids []uint32, p yidu.Policy) {
	f.t.Helper()
	f.noticeB(f.t, msgID, uids, p)
}

func (f *fixture) noticeB(t testing.TB, msgID string, uids []uint32, p yidu.Policy) {
	t.Helper()
	_, err := f.rounds.DB.Exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES ('c', ?, 'hr', 1, '新考勤制度', ?, ?, '', 1)`, msgID, f.t0, len(uids))
	testenv.Check(t, "message", err)
	f.live.rec[msgID] = roaring.BitmapOf(uids...)
	testenv.Check(t, "policy", f.rounds.SetPolicy(context.Background(), "c", msgID, p, "test"))
}

func (f *fixture) tick(at time.Duration) {
	f.t.Helper()
	f.clock.set(f.t0.Add(at))
	testenv.Check(f.t, "tick", f.rounds.Tick(context.Background()))
}

func (f *fixture) stopped(msgID string) string {
	var r *string
	testenv.Check(f.t, "stopped", f.rounds.DB.QueryRow(`SELECT stopped_reason FROM follow_ups WHERE msgid = ?`, msgID).Scan(&r))
	if r == nil {
		return ""
	}
	return *r
}

func TestRoundsGoToTheNonReadersOfTheMoment(t *testing.T) {
	f := newFixture(t, 5) // uid 5 left after the send
	f.notice("n", []uint32{1, 2, 3, 4, 5, 10}, yidu.Policy{Reminders: []string{"1h", "2h"}, EscalateAfter: 1})
	f.live.markRead("n", 10)
	f.tick(30 * time.Minute)
	if len(f.send.calls) != 0 {
		t.Fatalf("a round before its time: %v", f.send.calls)
	}
	f.live.markRead("n", 1)
	f.rounds.PageURL = func(id string) string { return "https://yidu.example.com/m/" + id + "?a=1&b=<2>" }
	// yidu was down from 00:30 to 03:00: round 1 (due 01:00) fires at
	// start, to who is unread then; round 2 (due 02:00) at the next tick.
	f.tick(3 * time.Hour)
	if got := f.send.batches["n@f1-0"]; !slices.Equal(got, []string{"u2", "u3", "u4"}) {
		t.Errorf("round 1 went to %v; want u2, u3, u4 (u1 read, u5 left, u10 read)", got)
	}
	if got := f.send.digests["u10"]; !slices.Equal(got, []string{"您负责的 4 人中有 3 人未读《新考勤制度》"}) {
		t.Errorf("leader's digests %q; want one: 3 of 4", got)
	}
	if len(f.send.digests) != 1 {
		t.Errorf("digests to %v; want the leader only (10 read: nobody to the fallback)", f.send.digests)
	}
	// The digest opens the leader's own view of the notice (escaped).
	if got := f.send.texts["u10"]; len(got) != 1 || !strings.HasSuffix(got[0], "\n"+`<a href="https://yidu.example.com/m/n?a=1&amp;b=&lt;2&gt;">查看我负责的人员</a>`) {
		t.Errorf("leader's digest %q; want it to end with a link to the notice's page", got)
	}
	f.live.markRead("n", 2)
	f.tick(3*time.Hour + time.Second)
	if got := f.send.batches["n@f2-0"]; !slices.Equal(got, []string{"u3", "u4"}) {
		t.Errorf("round 2 went to %v; want u3, u4", got)
	}
	for _, u := range []int{1, 2, 3, 4, 5, 10} {
		_, err := f.rounds.DB.Exec(`INSERT INTO message_read_record (corp_id, msgid, uid) VALUES ('c', 'n', ?)`, u)
		testenv.Check(t, "recipient row", err)
	}
	_, err := f.rounds.DB.Exec(`UPDATE message_read_record SET is_read = 1, read_time = ? WHERE msgid = 'n' AND uid = 2`, f.t0.Add(3*time.Hour+time.Second/2))
	testenv.Check(t, "read", err)
	fu, ok, err := f.rounds.FollowUpOf(context.Background(), "c", "n")
	testenv.Check(t, "follow-up", err)
	// Reads the bitmap saw are flushed to MySQL by flushd; here by hand:
	// uid 2 read 1 s after round 1.
	if !ok || len(fu.Rounds) != 2 || fu.Rounds[0].SentTo != 3 || fu.Rounds[1].SentTo != 2 || !fu.Rounds[0].Escalated || fu.NextAt != nil ||
		fu.Rounds[0].ReadWithin1h != 1 || fu.Rounds[0].ReadWithin24h != 1 || fu.Rounds[1].ReadWithin1h != 0 {
		t.Errorf("FollowUpOf = %+v, %v", fu, ok)
	}
	f.tick(4 * time.Hour)
	if r := f.stopped("n"); r != "done" {
		t.Errorf("stopped_reason %q; want done", r)
	}
	for task, n := range f.send.calls {
		if n != 1 {
			t.Errorf("%s sent %d times", task, n)
		}
	}
	var sentTo []int
	rows, err := f.rounds.DB.Query(`SELECT sent_to FROM follow_up_rounds WHERE msgid = 'n' ORDER BY round`)
	testenv.Check(t, "rounds", err)
	for rows.Next() {
		var n int
		testenv.Check(t, "scan", rows.Scan(&n))
		sentTo = append(sentTo, n)
	}
	if !slices.Equal(sentTo, []int{3, 2}) {
		t.Errorf("sent_to %v; want [3 2]", sentTo)
	}
}

// TestRoundOfANoticeNobodyRead runs a round and its escalation on the
// real bitmap.Store of a notice whose read key does not exist yet: a nil
// read set there took yidu serve down (issue 46).
func TestRoundOfANoticeNobodyRead(t *testing.T) {
	f := newFixture(t)
	rdb, prefix := testenv.Redis(t)
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix, Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "bitmap store", err)
	t.Cleanup(store.Close)
	f.rounds.Reads = store
	f.notice("n", []uint32{1, 2, 10}, yidu.Policy{Reminders: []string{"1h"}, EscalateAfter: 1})
	testenv.Check(t, "put message", store.PutMessage(context.Background(),
		yidu.Message{CorpID: "c", MsgID: "n", App: "hr", AgentID: 1, Title: "新考勤制度", SentAt: f.t0, Recipients: 3}, roaring.BitmapOf(1, 2, 10)))
	f.tick(time.Hour)
	if got := f.send.batches["n@f1-0"]; !slices.Equal(got, []string{"u1", "u10", "u2"}) {
		t.Errorf("round 1 went to %v; want every recipient (nobody read)", got)
	}
	if got := f.send.digests["u10"]; len(got) != 1 {
		t.Errorf("leader's digests %q; want one", got)
	}
}

// TestPoisonedRoundOthersRun: a round that panics is recovered and
// backed off while another notice's round is sent at the same tick; once
// the poison is gone it is sent, exactly once (issue 46).
func TestPoisonedRoundOthersRun(t *testing.T) {
	f := newFixture(t)
	f.notice("bad", []uint32{1, 2}, yidu.Policy{Reminders: []string{"1h"}})
	f.notice("good", []uint32{3, 4}, yidu.Policy{Reminders: []string{"1h"}})
	f.send.mu.Lock()
	f.send.panicOn = "bad@"
	f.send.mu.Unlock()
	f.tick(time.Hour) // no panic escapes Tick
	if got := f.send.batches["good@f1-0"]; !slices.Equal(got, []string{"u3", "u4"}) {
		t.Errorf("the other notice's round went to %v; want u3, u4", got)
	}
	if !f.rounds.Guard.BackedOff(roundItem("c", "bad", 1)) {
		t.Errorf("the poisoned round is not backed off")
	}
	f.send.mu.Lock()
	f.send.panicOn = ""
	f.send.mu.Unlock()
	// Backed off (and its lease held): not retried at once.
	f.tick(time.Hour + time.Second)
	if _, ok := f.send.batches["bad@f1-0"]; ok {
		t.Errorf("the poisoned round was retried within its backoff")
	}
	// After its backoff and its lease: sent, once.
	f.tick(time.Hour + 2*time.Minute)
	if got := f.send.batches["bad@f1-0"]; !slices.Equal(got, []string{"u1", "u2"}) {
		t.Errorf("the healed round went to %v; want u1, u2", got)
	}
	f.tick(time.Hour + 3*time.Minute)
	var state string
	testenv.Check(t, "state", f.rounds.DB.QueryRow(`SELECT state FROM follow_up_rounds WHERE msgid = 'bad' AND round = 1`).Scan(&state))
	if state != "sent" || f.send.calls["good@f1-0"] != 1 || f.send.calls["bad@f1-0"] != 2 {
		t.Errorf("state %q, calls %v; want sent, good once, bad twice (the panicking call and the send)", state, f.send.calls)
	}
}

// TestUnreadablePolicyOthersPlan: a follow-up whose stored policy does
// not decode fails as its own plan (backed off, no round written); the
// other notices' rounds are planned and sent.
func TestUnreadablePolicyOthersPlan(t *testing.T) {
	f := newFixture(t)
	f.notice("bad", []uint32{1, 2}, yidu.Policy{Reminders: []string{"1h"}})
	f.notice("good", []uint32{3, 4}, yidu.Policy{Reminders: []string{"1h"}})
	_, err := f.rounds.DB.Exec(`UPDATE follow_ups SET policy = '{"reminders": 7}' WHERE msgid = 'bad'`)
	testenv.Check(t, "policy", err)
	f.tick(time.Hour)
	if got := f.send.batches["good@f1-0"]; !slices.Equal(got, []string{"u3", "u4"}) {
		t.Errorf("the other notice's round went to %v; want u3, u4", got)
	}
	if !f.rounds.Guard.BackedOff("plan c/bad") {
		t.Errorf("the unreadable follow-up's plan is not backed off")
	}
	var n int
	testenv.Check(t, "rounds", f.rounds.DB.QueryRow(`SELECT COUNT(*) FROM follow_up_rounds WHERE msgid = 'bad'`).Scan(&n))
	if n != 0 || f.stopped("bad") != "" {
		t.Errorf("the unreadable follow-up has %d rounds, stopped %q; want none, running", n, f.stopped("bad"))
	}
}

func TestEveryoneReadEndsThePolicy(t *testing.T) {
	f := newFixture(t)
	f.notice("n", []uint32{1, 2}, yidu.Policy{Reminders: []string{"1h", "2h"}})
	f.live.markRead("n", 1, 2)
	f.tick(time.Hour)
	f.tick(3 * time.Hour)
	if len(f.send.calls) != 0 {
		t.Errorf("sent %v to a notice everyone read", f.send.calls)
	}
	if r := f.stopped("n"); r != "everyone_read" {
		t.Errorf("stopped_reason %q; want everyone_read", r)
	}
}

func TestDeadlineEndsThePolicy(t *testing.T) {
	f := newFixture(t)
	deadline := f.t0.Add(3 * time.Hour)
	f.notice("n", []uint32{1, 2}, yidu.Policy{Reminders: []string{"1h", "5h"}, Deadline: &deadline})
	f.tick(6 * time.Hour)
	f.tick(6*time.Hour + time.Second)
	f.tick(7 * time.Hour)
	if _, ok := f.send.calls["n@f2-0"]; ok || f.send.calls["n@f1-0"] != 1 {
		t.Errorf("calls %v; want round 1 once and no round after the deadline", f.send.calls)
	}
	if r := f.stopped("n"); r != "deadline" {
		t.Errorf("stopped_reason %q; want deadline", r)
	}
}

// TestRoundResumes: a replica dies (here: its send fails with an unknown
// outcome) in batch 1 of 3; after its lease another replica resumes at
// batch 1: batch 0 is never sent again, nobody is missed, and batch 1 is
// resent with its task id (WeCom's duplicate check drops a copy).
func TestRoundResumes(t *testing.T) {
	f := newFixture(t)
	var uids []uint32
	for u := uint32(1); u <= 2500; u++ {
		uids = append(uids, u)
	}
	f.notice("n", uids, yidu.Policy{Reminders: []string{"1h"}})
	f.send.failAt = "n@f1-1"
	f.tick(time.Hour)
	if f.send.calls["n@f1-2"] != 0 {
		t.Fatal("batch 2 sent after batch 1 failed")
	}
	// Replica b before a's lease ends: nothing.
	f.rounds.Owner = "b"
	f.tick(time.Hour + 30*time.Second)
	if f.send.calls["n@f1-1"] != 1 {
		t.Fatalf("batch 1 taken over while a's lease held: %v", f.send.calls)
	}
	f.tick(time.Hour + 2*time.Minute)
	want := map[string]int{"n@f1-0": 1, "n@f1-1": 2, "n@f1-2": 1}
	for task, n := range want {
		if f.send.calls[task] != n {
			t.Errorf("%s sent %d times; want %d", task, f.send.calls[task], n)
		}
	}
	seen := map[string]int{}
	for _, users := range f.send.batches {
		for _, u := range users {
			seen[u]++
		}
	}
	if len(seen) != 2500 {
		t.Errorf("%d people reminded; want 2500", len(seen))
	}
	var sent, pending int
	testenv.Check(t, "log", f.rounds.DB.QueryRow(`SELECT SUM(outcome = 'sent'), SUM(outcome = 'pending') FROM reminder_log WHERE msgid = 'n'`).Scan(&sent, &pending))
	if sent != 2500 || pending != 0 {
		t.Errorf("reminder_log: %d sent, %d pending; want 2500, 0", sent, pending)
	}
}

func TestCancelRoundAndRecall(t *testing.T) {
	f := newFixture(t)
	f.notice("n", []uint32{1, 2}, yidu.Policy{Reminders: []string{"1h", "2h"}})
	f.tick(59 * time.Minute)
	f.clock.set(f.t0.Add(time.Hour))
	testenv.Check(t, "plan", f.rounds.plan(context.Background()))
	if ok, err := f.rounds.CancelRound(context.Background(), "c", "n"); err != nil || !ok {
		t.Fatalf("CancelRound = %v, %v", ok, err)
	}
	f.tick(time.Hour)
	if len(f.send.calls) != 0 {
		t.Errorf("a cancelled round sent %v", f.send.calls)
	}
	_, err := f.rounds.DB.Exec(`UPDATE messages SET recalled_at = ? WHERE msgid = 'n'`, f.t0.Add(time.Hour))
	testenv.Check(t, "recall", err)
	f.tick(3 * time.Hour)
	if len(f.send.calls) != 0 || f.stopped("n") != "recalled" {
		t.Errorf("after a recall: calls %v, stopped %q; want none, recalled", f.send.calls, f.stopped("n"))
	}
	err = f.rounds.SetPolicy(context.Background(), "c", "n", yidu.Policy{Reminders: []string{"5h"}}, "test")
	if !errors.Is(err, yidu.ErrInvalid) {
		t.Errorf("a policy on a recalled notice: %v; want ErrInvalid", err)
	}
}

// TestRoundSpreadOverDays: a round larger than what is left of the app's
// daily quota sends what fits (the first send already used 5 of 8), says
// until when the rest will take, and on the next working day reminds the
// others still unread then, each person once.
func TestRoundSpreadOverDays(t *testing.T) {
	f := newFixture(t)
	f.rounds.DailyQuota = func(string) int { return 8 }
	f.notice("n", []uint32{1, 2, 3, 4, 5}, yidu.Policy{Reminders: []string{"1h"}, WorkingHours: "09:00-18:00"})
	_, err := f.rounds.DB.Exec(`INSERT INTO message_sends (corp_id, msgid, kind, batch, status, sent_at, users) VALUES ('c', 'n', 'send', 0, 'sent', ?, 5)`, f.t0)
	testenv.Check(t, "first send", err)
	f.tick(time.Hour)
	if got := f.send.batches["n@f1-0"]; !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Fatalf("day 1 reminded %v; want u1, u2, u3 (3 left of 8)", got)
	}
	sh := f.rounds.Zone("hr")
	wantUntil := time.Date(2026, 12, 4, 18, 0, 0, 0, sh) // the end of the next working day
	fu, _, err := f.rounds.FollowUpOf(context.Background(), "c", "n")
	testenv.Check(t, "follow-up", err)
	if len(fu.Rounds) != 1 || fu.Rounds[0].SpreadUntil == nil || !fu.Rounds[0].SpreadUntil.Equal(wantUntil) ||
		fu.Rounds[0].SentTo != 3 || fu.Rounds[0].State != "pending" {
		t.Fatalf("after day 1: %+v; want round 1 pending, sent to 3, spread until %s", fu.Rounds, wantUntil)
	}
	if next := time.Date(2026, 12, 4, 9, 0, 0, 0, sh); fu.NextRound != 1 || fu.NextAt == nil || !fu.NextAt.Equal(next) {
		t.Errorf("after day 1 next is round %d at %v; want round 1's rest at %s", fu.NextRound, fu.NextAt, next)
	}
	f.tick(8 * time.Hour) // 17:00, same day: the quota is spent
	f.live.markRead("n", 4)
	f.tick(23*time.Hour + 59*time.Minute) // 08:59 the next day: before the working hours
	if len(f.send.calls) != 1 {
		t.Fatalf("sent before the next working day: %v", f.send.calls)
	}
	f.tick(24 * time.Hour) // 09:00 the next day
	if got := f.send.batches["n@f1-1"]; !slices.Equal(got, []string{"u5"}) {
		t.Errorf("day 2 reminded %v; want u5 (u4 read meanwhile, u1-u3 reminded on day 1)", got)
	}
	f.tick(25 * time.Hour)
	for task, n := range f.send.calls {
		if n != 1 {
			t.Errorf("%s sent %d times", task, n)
		}
	}
	fu, _, err = f.rounds.FollowUpOf(context.Background(), "c", "n")
	testenv.Check(t, "follow-up", err)
	if len(fu.Rounds) != 1 || fu.Rounds[0].State != "sent" || fu.Rounds[0].SentTo != 4 || fu.Rounds[0].SpreadUntil == nil {
		t.Errorf("after day 2: %+v; want round 1 sent to 4, still showing it was spread", fu.Rounds)
	}
	if r := f.stopped("n"); r != "done" {
		t.Errorf("stopped_reason %q; want done", r)
	}
	var logged int
	testenv.Check(t, "log", f.rounds.DB.QueryRow(`SELECT COUNT(*) FROM reminder_log WHERE msgid = 'n' AND outcome = 'sent'`).Scan(&logged))
	if logged != 4 {
		t.Errorf("reminder_log: %d sent; want 4", logged)
	}
}

// TestDailyQuotaDefault: without apps[].daily_quota the allowance is the
// synced directory's active members × 200; a corp with no directory is
// not limited.
func TestDailyQuotaDefault(t *testing.T) {
	f := newFixture(t)
	f.rounds.DailyQuota = func(string) int { return 0 }
	n := notice{corpID: "c", msgID: "n", app: "hr"}
	q, err := f.rounds.dailyQuota(context.Background(), n, f.t0)
	testenv.Check(t, "quota", err)
	if q.limit != -1 {
		t.Errorf("no directory: limit %d; want unlimited", q.limit)
	}
	for uid, status := range []int{1, 1, 2} {
		_, err := f.rounds.DB.Exec(`INSERT INTO users (corp_id, uid, userid, status) VALUES ('c', ?, ?, ?)`, uid+1, fmt.Sprintf("u%d", uid+1), status)
		testenv.Check(t, "user", err)
	}
	q, err = f.rounds.dailyQuota(context.Background(), n, f.t0)
	testenv.Check(t, "quota", err)
	if q.limit != 2*SendsPerSeat || q.used != 0 {
		t.Errorf("2 active members: %+v; want limit 400, used 0", q)
	}
}

// TestSpreadRoundResumes: the replica sending a spread round's first
// part dies (its send fails, outcome unknown); another resumes the batch
// after the lease, still waits for the next day for the rest, and no one
// is reminded twice.
func TestSpreadRoundResumes(t *testing.T) {
	f := newFixture(t)
	f.rounds.DailyQuota = func(string) int { return 3 }
	f.notice("n", []uint32{1, 2, 3, 4, 5}, yidu.Policy{Reminders: []string{"1h"}})
	f.send.failAt = "n@f1-0"
	f.tick(time.Hour)
	f.rounds.Owner = "b"
	f.tick(time.Hour + 2*time.Minute) // a's lease is over
	if got := f.send.batches["n@f1-0"]; !slices.Equal(got, []string{"u1", "u2", "u3"}) || f.send.calls["n@f1-0"] != 2 {
		t.Fatalf("batch 0 = %v after %d calls; want u1-u3 resent once by b", got, f.send.calls["n@f1-0"])
	}
	if f.send.calls["n@f1-1"] != 0 {
		t.Fatalf("the rest sent the same day: %v", f.send.calls)
	}
	f.tick(24 * time.Hour)
	if got := f.send.batches["n@f1-1"]; !slices.Equal(got, []string{"u4", "u5"}) {
		t.Errorf("day 2 reminded %v; want u4, u5", got)
	}
	var people, rows int
	testenv.Check(t, "log", f.rounds.DB.QueryRow(`SELECT COUNT(DISTINCT uid), COUNT(*) FROM reminder_log WHERE msgid = 'n' AND outcome = 'sent'`).Scan(&people, &rows))
	if people != 5 || rows != 5 {
		t.Errorf("reminder_log: %d people in %d rows; want 5 in 5", people, rows)
	}
}

// TestRoundWaitsForTheGate (issue 46): a round of a notice the gate
// refuses as not approved sends nothing, no digest either, and stays
// due, unclaimed; once the gate lets it through, it is sent at the next
// tick, once.
func TestRoundWaitsForTheGate(t *testing.T) {
	f := newFixture(t)
	f.notice("n", []uint32{1, 2, 3, 10}, yidu.Policy{Reminders: []string{"1h"}, EscalateAfter: 1})
	f.live.markRead("n", 10)
	approved := false
	f.rounds.Gate = func(_ context.Context, corp, msgID string) (bool, error) {
		if corp != "c" || msgID != "n" {
			t.Errorf("Gate(%s, %s); want c, n", corp, msgID)
		}
		return !approved, nil
	}
	f.tick(2 * time.Hour)
	f.tick(3 * time.Hour)
	if len(f.send.calls) != 0 || len(f.send.digests) != 0 {
		t.Fatalf("sent %v, digests %v while not approved; want nothing", f.send.calls, f.send.digests)
	}
	var state string
	testenv.Check(t, "round", f.rounds.DB.QueryRow(`SELECT state FROM follow_up_rounds WHERE msgid = 'n' AND round = 1`).Scan(&state))
	if state != "pending" {
		t.Errorf("round 1 is %s while not approved; want pending", state)
	}
	approved = true
	f.tick(4 * time.Hour)
	if got := f.send.batches["n@f1-0"]; !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Errorf("round 1 once approved went to %v; want u1, u2, u3", got)
	}
	if len(f.send.digests) == 0 {
		t.Errorf("no digest once approved; want the escalation")
	}
}
