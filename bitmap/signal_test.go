package bitmap

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestSignalsKeptApart follows one member through every signal under the
// default read signals: opening the app is recorded but leaves read alone;
// the button press after it is the read, with its own time; each signal
// counts once; a non-recipient counts nowhere.
func TestSignalsKeptApart(t *testing.T) {
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	T := time.Now().Truncate(time.Second)
	const msg = "notice-s"
	e.register(t, testMessage(msg, 7, T.Add(-time.Minute)), uids(1, 2, 3))
	counts := func() (int64, yidu.SignalCounts) {
		t.Helper()
		_, rd, by, found, err := e.s.CountsBySignal(ctx, testCorp, msg)
		if err != nil || !found {
			t.Fatalf("CountsBySignal = found %v, %v", found, err)
		}
		return rd, by
	}
	steps := []struct {
		name     string
		do       func() (int, error)
		want     int
		wantRead int64
		wantBy   yidu.SignalCounts
	}{
		{"enter_agent: recorded, not read", func() (int, error) { return e.rec.EnterAgent(ctx, testCorp, 7, "u1", T) },
			0, 0, yidu.SignalCounts{EnterAgent: 1}},
		{"button after it: read", func() (int, error) { return e.rec.CardRead(ctx, testCorp, 7, "u1", msg+"@0", T.Add(10*time.Second)) },
			1, 1, yidu.SignalCounts{Button: 1, EnterAgent: 1}},
		{"button again", func() (int, error) { return e.rec.CardRead(ctx, testCorp, 7, "u1", msg+"@0", T.Add(20*time.Second)) },
			0, 1, yidu.SignalCounts{Button: 1, EnterAgent: 1}},
		{"enter_agent again", func() (int, error) { return e.rec.EnterAgent(ctx, testCorp, 7, "u1", T.Add(30*time.Second)) },
			0, 1, yidu.SignalCounts{Button: 1, EnterAgent: 1}},
		{"link of a read member: counted signal, read once", func() (int, error) {
			return e.rec.LinkRead(ctx, testCorp, 7, "u1", msg, T.Add(40*time.Second))
		}, 1, 1, yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 1}},
		{"enter_agent of another member", func() (int, error) { return e.rec.EnterAgent(ctx, testCorp, 7, "u2", T.Add(50*time.Second)) },
			0, 1, yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 2}},
		{"non-recipient", func() (int, error) { return e.rec.EnterAgent(ctx, testCorp, 7, "u9", T.Add(50*time.Second)) },
			0, 1, yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 2}},
		{"non-recipient's button", func() (int, error) { return e.rec.CardRead(ctx, testCorp, 7, "u9", msg+"@0", T.Add(50*time.Second)) },
			0, 1, yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 2}},
	}
	for _, st := range steps {
		n, err := st.do()
		if err != nil || n != st.want {
			t.Errorf("%s: = %d, %v; want %d, nil", st.name, n, err, st.want)
		}
		if rd, by := counts(); rd != st.wantRead || by != st.wantBy {
			t.Errorf("%s: read %d, by_signal %+v; want %d, %+v", st.name, rd, by, st.wantRead, st.wantBy)
		}
	}
	// Acks are not waited for (Store.AckAsync): the leases go soon after.
	testenv.WaitFor(t, 5*time.Second, "no pending leases", func() bool {
		p, _ := e.s.PendingUIDs(ctx, testCorp, msg)
		return len(p) == 0
	})
	got := testenv.Deltas(t, e.brokers, e.topic)
	testenv.SortDeltas(got)
	want := []delta.Delta{
		{CorpID: testCorp, MsgID: msg, UID: 1, ReadTime: T.Unix(), Source: delta.SourceEnterAgent},
		{CorpID: testCorp, MsgID: msg, UID: 1, ReadTime: T.Add(10 * time.Second).Unix(), Source: delta.SourceCard, Counted: true},
		{CorpID: testCorp, MsgID: msg, UID: 1, ReadTime: T.Add(40 * time.Second).Unix(), Source: delta.SourceLink, Counted: true},
		{CorpID: testCorp, MsgID: msg, UID: 2, ReadTime: T.Add(50 * time.Second).Unix(), Source: delta.SourceEnterAgent},
	}
	testenv.SortDeltas(want)
	if !slices.Equal(got, want) {
		t.Errorf("deltas = %+v\nwant %+v", got, want)
	}
}

// TestReadSignalsPerApp: each app's read signals decide, found by corp and
// agent id (or agent id 0); another app's signal counts by the defaults.
func TestReadSignalsPerApp(t *testing.T) {
	all := []yidu.Signal{yidu.SignalButton, yidu.SignalLink, yidu.SignalEnterAgent}
	e := newRecEnv(t, Options{},
		yidu.App{Name: "news", CorpID: testCorp, AgentID: 7, ReadSignals: all},
		yidu.App{Name: "hr", CorpID: testCorp, AgentID: 8, ReadSignals: []yidu.Signal{yidu.SignalButton}},
		yidu.App{Name: "any", CorpID: "wwother", ReadSignals: all})
	tests := []struct {
		corpID string
		agent  int64
		sig    yidu.Signal
		want   bool
	}{
		{testCorp, 7, yidu.SignalEnterAgent, true},
		{testCorp, 8, yidu.SignalEnterAgent, false},
		{testCorp, 8, yidu.SignalLink, false},
		{testCorp, 8, yidu.SignalButton, true},
		{testCorp, 9, yidu.SignalEnterAgent, false}, // not configured: defaults
		{testCorp, 9, yidu.SignalLink, true},
		{"wwother", 1000002, yidu.SignalEnterAgent, true}, // configured without agent id
	}
	for _, tt := range tests {
		if got := e.rec.counted(tt.corpID, tt.agent, tt.sig); got != tt.want {
			t.Errorf("counted(%s, %d, %v) = %v; want %v", tt.corpID, tt.agent, tt.sig, got, tt.want)
		}
	}
	if _, err := NewRecorder(e.s, fakeIDs{}, e.pub, e.loader, RecorderOptions{
		Apps: []yidu.App{{Name: "bad", CorpID: testCorp, ReadSignals: []yidu.Signal{9}}}}); err == nil {
		t.Errorf("NewRecorder with read signal 9 = nil error")
	}
}

// TestMarkLeasePerSignal: new-ness and the lease belong to (signal, uid).
// A button press while another attempt holds the member's enter_agent
// lease is new at once; each lease is acked, released and re-emitted on
// its own, a re-emission keeping whether the first attempt counted it.
func TestMarkLeasePerSignal(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2)))
	tg := func(sig yidu.Signal, counted bool, us ...uint32) []Target {
		return []Target{{CorpID: testCorp, MsgID: "m", Signal: sig, Counted: counted, UIDs: us}}
	}
	mark := func(sig yidu.Signal, counted bool, us ...uint32) []Outcome {
		t.Helper()
		out, err := s.Mark(ctx, tg(sig, counted, us...))
		testenv.Check(t, "Mark", err)
		return out[0]
	}
	enter, button, link := yidu.SignalEnterAgent, yidu.SignalButton, yidu.SignalLink
	steps := []struct {
		name string
		do   func() []Outcome
		want []Outcome
	}{
		{"enter_agent, not counted", func() []Outcome { return mark(enter, false, 1) }, []Outcome{OutcomeNewUncounted}},
		{"button during the enter_agent lease", func() []Outcome { return mark(button, true, 1) }, []Outcome{OutcomeNew}},
		{"enter_agent again: in flight", func() []Outcome { return mark(enter, false, 1) }, []Outcome{OutcomeInFlight}},
		{"button again: in flight", func() []Outcome { return mark(button, true, 1) }, []Outcome{OutcomeInFlight}},
		{"enter_agent acked: duplicate, button still in flight", func() []Outcome {
			testenv.Check(t, "Ack", s.Ack(ctx, tg(enter, false, 1)))
			return append(mark(enter, false, 1), mark(button, true, 1)...)
		}, []Outcome{OutcomeDuplicate, OutcomeInFlight}},
		{"button released: re-emitted, still counted", func() []Outcome {
			testenv.Check(t, "Release", s.Release(ctx, tg(button, true, 1)))
			return mark(button, false, 1)
		}, []Outcome{OutcomeNew}},
		{"link not counted, released, re-emitted not counted", func() []Outcome {
			mark(link, false, 2)
			testenv.Check(t, "Release", s.Release(ctx, tg(link, false, 2)))
			return mark(link, true, 2)
		}, []Outcome{OutcomeNewUncounted}},
		{"non-recipient", func() []Outcome { return mark(enter, true, 5) }, []Outcome{OutcomeNotRecipient}},
	}
	for _, st := range steps {
		if got := st.do(); !slices.Equal(got, st.want) {
			t.Errorf("%s: Mark = %v; want %v", st.name, got, st.want)
		}
	}
	read, _, err := s.ReadBitmap(ctx, testCorp, "m")
	testenv.Check(t, "ReadBitmap", err)
	if !read.Equals(uids(1)) {
		t.Errorf("read = %v; want [1]: uid 2 gave only a signal that does not count", read.ToArray())
	}
	for sig, want := range map[yidu.Signal][]uint32{button: {1}, enter: {1}, link: {2}} {
		b, _, err := s.SignalBitmap(ctx, testCorp, "m", sig)
		testenv.Check(t, "SignalBitmap", err)
		if !slices.Equal(b.ToArray(), want) {
			t.Errorf("%s bitmap = %v; want %v", sig, b.ToArray(), want)
		}
	}
	if p, _ := s.PendingUIDs(ctx, testCorp, "m"); !slices.Equal(p, []uint32{1, 2}) {
		t.Errorf("PendingUIDs = %v; want [1 2] (uid 1's button, uid 2's link, each once)", p)
	}
	if _, err := s.Mark(ctx, tg(0, true, 1)); err == nil {
		t.Errorf("Mark without a signal = nil error")
	}
}

// TestRestoreReadsSignals: a restore ORs each signal's members in, never
// clears one, and keeps every bitmap within the recipients.
func TestRestoreReadsSignals(t *testing.T) {
	s, rdb := mustStore(t, Options{})
	ctx := context.Background()
	m := testMessage("m", 7, time.Now())
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, m, uids(1, 2, 3)))
	_, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalEnterAgent, UIDs: []uint32{1}}})
	testenv.Check(t, "Mark", err)
	// MySQL knows uid 2's button press and uid 3's link; a stray uid 9
	// (not a recipient) must not get in.
	testenv.Check(t, "RestoreReads", s.RestoreReads(ctx, m, uids(1, 2, 3), uids(2, 3, 9), map[yidu.Signal]*roaring.Bitmap{
		yidu.SignalButton: uids(2, 9), yidu.SignalLink: uids(3),
	}))
	rc, rd, by, found, err := s.CountsBySignal(ctx, testCorp, "m")
	if err != nil || !found || rc != 3 || rd != 2 || by != (yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 1}) {
		t.Errorf("CountsBySignal = %d, %d, %+v, %v, %v; want 3, 2, {1 1 1}", rc, rd, by, found, err)
	}
	for _, sig := range []yidu.Signal{yidu.SignalButton, yidu.SignalLink, yidu.SignalEnterAgent} { // the signals given
		ttl, err := rdb.PTTL(ctx, s.signalKey(testCorp, "m", sig)).Result()
		if err != nil || ttl < 29*24*time.Hour {
			t.Errorf("PTTL %s = %v, %v; want about 30 days", sig, ttl, err)
		}
	}
	// The wiped message comes back whole from MySQL.
	wipe(t, rdb, s)
	testenv.Check(t, "RestoreReads", s.RestoreReads(ctx, m, uids(1, 2, 3), uids(2), map[yidu.Signal]*roaring.Bitmap{
		yidu.SignalButton: uids(2), yidu.SignalEnterAgent: uids(1, 2),
	}))
	if _, rd, by, _, _ := s.CountsBySignal(ctx, testCorp, "m"); rd != 1 || by != (yidu.SignalCounts{Button: 1, EnterAgent: 2}) {
		t.Errorf("after a wipe: read %d, by_signal %+v; want 1, {button 1, enter_agent 2}", rd, by)
	}
}

// TestCrashedAttemptPerSignal: an attempt that set uid 3's enter_agent bit
// died before publishing. The member's button press is not held up by that
// lease; the next app entry waits for it, then re-emits the enter_agent
// delta, still not counted.
func TestCrashedAttemptPerSignal(t *testing.T) {
	e := newRecEnv(t, Options{Lease: 3 * time.Second}) // margins as in TestCardReadAfterCrashedAttempt
	ctx := context.Background()
	at := time.Now().Truncate(time.Second)
	e.register(t, testMessage("task-1", 7, at.Add(-time.Minute)), uids(3))
	_, err := e.s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "task-1", Signal: yidu.SignalEnterAgent, UIDs: []uint32{3}}})
	testenv.Check(t, "Mark", err)

	if n, err := e.rec.CardRead(ctx, testCorp, 7, "u3", "task-1@0", at); n != 1 || err != nil {
		t.Errorf("CardRead during the enter_agent lease = %d, %v; want 1, nil", n, err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	n, err := e.rec.EnterAgent(short, testCorp, 7, "u3", at)
	cancel()
	if n != 0 || !errors.Is(err, ErrInFlight) {
		t.Errorf("EnterAgent with a deadline inside the lease = %d, %v; want 0, ErrInFlight", n, err)
	}
	long, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := e.rec.EnterAgent(long, testCorp, 7, "u3", at); n != 0 || err != nil {
		t.Errorf("EnterAgent past the lease = %d, %v; want 0 (taken over, not counted), nil", n, err)
	}
	got := testenv.Deltas(t, e.brokers, e.topic)
	testenv.SortDeltas(got)
	want := []delta.Delta{
		{CorpID: testCorp, MsgID: "task-1", UID: 3, ReadTime: at.Unix(), Source: delta.SourceCard, Counted: true},
		{CorpID: testCorp, MsgID: "task-1", UID: 3, ReadTime: at.Unix(), Source: delta.SourceEnterAgent},
	}
	testenv.SortDeltas(want)
	if !slices.Equal(got, want) {
		t.Errorf("deltas = %+v; want %+v", got, want)
	}
}

// TestMarkKeepsKeysExpiring: a mark that sets something gives every key it
// created the TTL, and refreshes every key of the message once the last
// refresh is older than TTL/100 (at most a minute).
func TestMarkKeepsKeysExpiring(t *testing.T) {
	// Long enough that no key expires on a loaded CI machine; TTL/100 is
	// then 200 ms.
	const ttl = 20 * time.Second
	s, rdb := mustStore(t, Options{TTL: ttl})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2, 3)))
	pttl := func(kind string) time.Duration {
		t.Helper()
		d, err := rdb.PTTL(ctx, s.msgKey(testCorp, "m", kind)).Result()
		testenv.Check(t, "PTTL", err)
		return d
	}
	mark := func(sig yidu.Signal, counted bool, u uint32) {
		t.Helper()
		_, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: sig, Counted: counted, UIDs: []uint32{u}}})
		testenv.Check(t, "Mark", err)
	}
	mark(yidu.SignalEnterAgent, false, 1) // within the refresh interval: only new keys
	for _, kind := range []string{"enter_agent", "pend"} {
		if d := pttl(kind); d <= 0 || d > ttl {
			t.Errorf("PTTL %s after its first mark = %v; want a TTL of at most %v", kind, d, ttl)
		}
	}
	if n, _ := rdb.Exists(ctx, s.msgKey(testCorp, "m", "read")).Result(); n != 0 {
		t.Errorf("read key exists after a signal that does not count")
	}
	mark(yidu.SignalButton, true, 2)
	for _, kind := range []string{"button", "read"} {
		if d := pttl(kind); d <= 0 || d > ttl {
			t.Errorf("PTTL %s after its first mark = %v; want a TTL of at most %v", kind, d, ttl)
		}
	}
	time.Sleep(300 * time.Millisecond) // let Redis TIME pass TTL/100; nothing is awaited here
	before := pttl("rcpt")
	mark(yidu.SignalLink, true, 3)
	for _, kind := range []string{"rcpt", "meta", "read", "button", "enter_agent", "link"} {
		if d := pttl(kind); d <= before || d > ttl {
			t.Errorf("PTTL %s after a mark past the refresh interval = %v; want refreshed above %v", kind, d, before)
		}
	}
}
