package bitmap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

const testTopic = "yidu.reads"

type recEnv struct {
	s       *Store
	rdb     *redis.Client
	rec     *Recorder
	loader  *fakeLoader
	pub     *flakyPublisher
	brokers []string
	topic   string
}

// newRecEnv returns a Recorder on a fresh store and topic; apps, when
// given, say which signals count as read (else the defaults).
func newRecEnv(tb testing.TB, opts Options, apps ...yidu.App) *recEnv {
	tb.Helper()
	s, rdb := mustStore(tb, opts)
	p, brokers, topic := testenv.Producer(tb, testTopic)
	e := &recEnv{s: s, rdb: rdb, loader: newFakeLoader(), pub: &flakyPublisher{pub: p}, brokers: brokers, topic: topic}
	rec, err := NewRecorder(s, fakeIDs{}, e.pub, e.loader, RecorderOptions{Apps: apps, Registerer: prometheus.NewRegistry()})
	testenv.Check(tb, "NewRecorder", err)
	e.rec = rec
	return e
}

// signal returns the members who gave signal sig on msgID.
func (e *recEnv) signal(tb testing.TB, msgID string, sig yidu.Signal) []uint32 {
	tb.Helper()
	b, _, err := e.s.SignalBitmap(context.Background(), testCorp, msgID, sig)
	testenv.Check(tb, "SignalBitmap", err)
	if b == nil {
		return nil
	}
	return b.ToArray()
}

// register stores a message in "MySQL" and Redis, as tracker does.
func (e *recEnv) register(tb testing.TB, m yidu.Message, rcpt *roaring.Bitmap) {
	tb.Helper()
	e.loader.add(m, rcpt, roaring.New())
	testenv.Check(tb, "PutMessage", e.s.PutMessage(context.Background(), m, rcpt))
}

func (e *recEnv) reads(tb testing.TB, src delta.Source, outcome string) float64 {
	tb.Helper()
	return testutil.ToFloat64(e.rec.m.reads.WithLabelValues(src.String(), outcome))
}

// TestCardAndLinkRead sends the same reads of a message through CardRead
// (its task id) and LinkRead (its msgid): each answer and the reads_total
// outcome it counts; at the end exactly the new reads are set, none is left
// pending, and each was published once.
func TestCardAndLinkRead(t *testing.T) {
	const msg = "notice-1"
	paths := []struct {
		src  delta.Source
		read func(r *Recorder, ctx context.Context, corpID string, agentID int64, userID, id string, at time.Time) (int, error)
	}{
		{delta.SourceCard, (*Recorder).CardRead},
		{delta.SourceLink, (*Recorder).LinkRead},
	}
	steps := []struct {
		name      string
		agent     int64
		user      string
		id        string // the card's task id, the link's msgid
		linkOnly  bool
		want      int
		wantErr   error
		outcome   string // reads_total{source,outcome} label that must grow by one
		failKafka bool
	}{
		{name: "recipient", agent: 7, user: "u1", id: msg, want: 1, outcome: outcomeLabelNew},
		{name: "read again", agent: 7, user: "u1", id: msg, want: 0, outcome: outcomeLabelDuplicate},
		{name: "non-recipient", agent: 7, user: "u9", id: msg, want: 0, outcome: outcomeLabelNotRecipient},
		{name: "unknown user", agent: 7, user: "bob", id: msg, want: 0, outcome: outcomeLabelUnknownUser},
		{name: "unknown msgid", agent: 7, user: "u1", id: "no-such", want: 0, outcome: outcomeLabelUnknownMsgID},
		// A card's task id names a send batch; a link names the message.
		{name: "send batch, not a message", agent: 7, user: "u3", id: msg + "@0", linkOnly: true, want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "malformed id", agent: 7, user: "u3", id: msg + "}{x", want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "other app's message", agent: 8, user: "u3", id: msg, want: 0, outcome: outcomeLabelUnknownMsgID},
		{name: "kafka fails", agent: 7, user: "u2", id: msg, wantErr: errKafkaDown, failKafka: true},
		{name: "retry re-emits", agent: 7, user: "u2", id: msg, want: 1, outcome: outcomeLabelNew},
		{name: "retry after success", agent: 7, user: "u2", id: msg, want: 0, outcome: outcomeLabelDuplicate},
	}
	for _, path := range paths {
		t.Run(path.src.String(), func(t *testing.T) {
			e := newRecEnv(t, Options{})
			ctx := context.Background()
			at := time.Unix(1_700_000_100, 0)
			e.register(t, testMessage(msg, 7, at.Add(-time.Hour)), uids(1, 2, 3))
			for _, st := range steps {
				if st.linkOnly && path.src != delta.SourceLink {
					continue
				}
				var before float64
				if st.outcome != "" {
					before = e.reads(t, path.src, st.outcome)
				}
				if st.failKafka {
					e.pub.fails = 1
				}
				n, err := path.read(e.rec, ctx, testCorp, st.agent, st.user, st.id, at)
				if !errors.Is(err, st.wantErr) || n != st.want {
					t.Errorf("%s: read = %d, %v; want %d, %v", st.name, n, err, st.want, st.wantErr)
				}
				if st.outcome != "" {
					if got := e.reads(t, path.src, st.outcome) - before; got != 1 {
						t.Errorf("%s: reads_total{outcome=%s} grew by %v; want 1", st.name, st.outcome, got)
					}
				}
				if st.failKafka {
					// The bit is set, and its pending entry keeps it from hiding.
					rd, _, _ := e.s.ReadBitmap(ctx, testCorp, msg)
					pending, _ := e.s.PendingUIDs(ctx, testCorp, msg)
					if !rd.Contains(2) || !slices.Equal(pending, []uint32{2}) {
						t.Errorf("%s: read=%v pending=%v; want uid 2 in both", st.name, rd.ToArray(), pending)
					}
				}
			}
			// Acks are not waited for (Store.AckAsync): the leases go soon after.
			testenv.WaitFor(t, 5*time.Second, "no pending leases at the end", func() bool {
				p, _ := e.s.PendingUIDs(ctx, testCorp, msg)
				return len(p) == 0
			})
			rd, _, err := e.s.ReadBitmap(ctx, testCorp, msg)
			testenv.Check(t, "ReadBitmap", err)
			if got := rd.ToArray(); !slices.Equal(got, []uint32{1, 2}) {
				t.Errorf("read bitmap = %v; want [1 2]", got)
			}
			if _, n, _, _ := e.s.Counts(ctx, testCorp, msg); n != 2 {
				t.Errorf("read count = %d; want 2", n)
			}
			sig, _ := path.src.Signal()
			if got := e.signal(t, msg, sig); !slices.Equal(got, []uint32{1, 2}) {
				t.Errorf("%s bitmap = %v; want [1 2]", sig, got)
			}
			got := testenv.Deltas(t, e.brokers, e.topic)
			testenv.SortDeltas(got)
			want := []delta.Delta{
				{CorpID: testCorp, MsgID: msg, UID: 1, ReadTime: at.Unix(), Source: path.src, Counted: true},
				{CorpID: testCorp, MsgID: msg, UID: 2, ReadTime: at.Unix(), Source: path.src, Counted: true},
			}
			if !slices.Equal(got, want) {
				t.Errorf("deltas on the topic = %+v; want exactly the new reads %+v", got, want)
			}
		})
	}
}

func TestCardReadAfterCrashedAttempt(t *testing.T) {
	// An attempt set the bit and died before publishing (no Release). A
	// retry must never answer 200 while only that dead attempt could
	// publish the delta: within its deadline it waits for the lease; if
	// the lease outlives the deadline it fails (503, WeCom retries later);
	// once the lease expires it takes the read over and re-emits it.
	// Margins for a loaded CI machine: the short deadline fits several
	// round trips and still ends well inside the lease.
	e := newRecEnv(t, Options{Lease: 3 * time.Second})
	ctx := context.Background()
	at := time.Unix(1_700_000_100, 0)
	e.register(t, testMessage("task-1", 7, at), uids(3))
	_, err := e.s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "task-1", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{3}}})
	testenv.Check(t, "Mark", err)

	short, cancel := context.WithTimeout(ctx, time.Second)
	n, err := e.rec.CardRead(short, testCorp, 7, "u3", "task-1", at)
	cancel()
	if n != 0 || !errors.Is(err, ErrInFlight) {
		t.Errorf("CardRead with a deadline inside the lease = %d, %v; want 0, ErrInFlight", n, err)
	}
	long, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := e.rec.CardRead(long, testCorp, 7, "u3", "task-1", at); n != 1 || err != nil {
		t.Errorf("CardRead with a deadline past the lease = %d, %v; want 1, nil (taken over)", n, err)
	}
	if n, err := e.rec.CardRead(ctx, testCorp, 7, "u3", "task-1", at); n != 0 || err != nil {
		t.Errorf("CardRead after the re-emit = %d, %v; want 0, nil (duplicate)", n, err)
	}
	if got := testenv.Deltas(t, e.brokers, e.topic); len(got) != 1 || got[0].UID != 3 {
		t.Errorf("deltas = %+v; want one for uid 3", got)
	}
}

// TestEnterAgent: an app entry is the enter_agent signal on every message
// sent to the member up to then (cursor, index rebuilt once, late index
// entries); it makes them read only where the app lists enter_agent.
func TestEnterAgent(t *testing.T) {
	apps := []struct {
		name    string
		app     []yidu.App
		counted bool
	}{
		{"default read signals", nil, false},
		{"enter_agent counts", []yidu.App{{Name: "hr", CorpID: testCorp, AgentID: 7,
			ReadSignals: []yidu.Signal{yidu.SignalButton, yidu.SignalLink, yidu.SignalEnterAgent}}}, true},
	}
	for _, app := range apps {
		t.Run(app.name, func(t *testing.T) { testEnterAgent(t, app.app, app.counted) })
	}
}

func testEnterAgent(t *testing.T, apps []yidu.App, counted bool) {
	e := newRecEnv(t, Options{}, apps...)
	ctx := context.Background()
	T := time.Now().Truncate(time.Second)
	e.register(t, testMessage("old", 7, T.Add(-100*time.Second)), uids(1, 2))
	e.register(t, testMessage("mid", 7, T.Add(-10*time.Second)), uids(1))
	e.register(t, testMessage("at-T", 7, T), uids(1))
	e.register(t, testMessage("sub-second-late", 7, T.Add(300*time.Millisecond)), uids(1))
	e.register(t, testMessage("later", 7, T.Add(50*time.Second)), uids(1))
	e.register(t, testMessage("not-for-u1", 7, T.Add(-20*time.Second)), uids(2))
	e.register(t, testMessage("other-app", 8, T.Add(-5*time.Second)), uids(1))

	cursor := func() int64 {
		t.Helper()
		c, err := e.s.Cursor(ctx, testCorp, 7, 1)
		testenv.Check(t, "Cursor", err)
		if c.IsZero() {
			return 0
		}
		return c.Unix()
	}
	steps := []struct {
		name       string
		at         time.Time
		failKafka  bool
		register   *yidu.Message
		signals    int // new enter_agent signals
		wantErr    bool
		wantCursor int64
	}{
		{name: "kafka fails: no cursor move", at: T, failKafka: true, wantErr: true, wantCursor: 0},
		{name: "sent at or before T", at: T, signals: 3, wantCursor: T.Unix()},
		{name: "older event: cursor stays", at: T.Add(-30 * time.Second), signals: 0, wantCursor: T.Unix()},
		{name: "message indexed late", at: T.Add(5 * time.Second), signals: 2, wantCursor: T.Add(5 * time.Second).Unix(),
			register: new(testMessage("indexed-late", 7, T.Add(-30*time.Second)))},
		{name: "later message", at: T.Add(60 * time.Second), signals: 1, wantCursor: T.Add(60 * time.Second).Unix()},
		{name: "again", at: T.Add(61 * time.Second), signals: 0, wantCursor: T.Add(61 * time.Second).Unix()},
	}
	for _, st := range steps {
		if st.register != nil {
			e.register(t, *st.register, uids(1))
		}
		if st.failKafka {
			e.pub.fails = 1
		}
		before := e.reads(t, delta.SourceEnterAgent, outcomeLabelNew) + e.reads(t, delta.SourceEnterAgent, outcomeLabelUncounted)
		n, err := e.rec.EnterAgent(ctx, testCorp, 7, "u1", st.at)
		want := 0
		if counted {
			want = st.signals
		}
		if (err != nil) != st.wantErr || n != want {
			t.Errorf("%s: EnterAgent = %d, %v; want %d, err %v", st.name, n, err, want, st.wantErr)
		}
		after := e.reads(t, delta.SourceEnterAgent, outcomeLabelNew) + e.reads(t, delta.SourceEnterAgent, outcomeLabelUncounted)
		if got := int(after - before); got != st.signals {
			t.Errorf("%s: %d new enter_agent signals counted in reads_total; want %d", st.name, got, st.signals)
		}
		if c := cursor(); c != st.wantCursor {
			t.Errorf("%s: cursor = %d; want %d", st.name, c, st.wantCursor)
		}
	}
	if e.loader.actives != 1 {
		t.Errorf("ActiveMessages called %d times; want once (index rebuilt, then complete)", e.loader.actives)
	}
	got := testenv.Deltas(t, e.brokers, e.topic)
	var ids []string
	for _, d := range got {
		if d.UID != 1 || d.Source != delta.SourceEnterAgent || d.Counted != counted {
			t.Errorf("delta %+v; want uid 1 from enter_agent, counted %v", d, counted)
		}
		ids = append(ids, d.MsgID)
	}
	slices.Sort(ids)
	// "sub-second-late" was sent 0.3 s after T's whole second began: it is
	// counted by the enter at T+5, not by the one at T.
	want := []string{"at-T", "indexed-late", "later", "mid", "old", "sub-second-late"}
	if !slices.Equal(ids, want) {
		t.Errorf("enter_agent deltas for %v; want %v", ids, want)
	}
	for _, id := range want {
		rc, rd, by, found, err := e.s.CountsBySignal(ctx, testCorp, id)
		wantRead := int64(0)
		if counted {
			wantRead = 1
		}
		if err != nil || !found || rd != wantRead || by != (yidu.SignalCounts{EnterAgent: 1}) || rc < 1 {
			t.Errorf("%s: CountsBySignal = %d, %d, %+v, %v, %v; want read %d, by_signal enter_agent 1", id, rc, rd, by, found, err, wantRead)
		}
	}
}

func TestRedisDataLoss(t *testing.T) {
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	T := time.Now().Truncate(time.Second)
	m := testMessage("task-1", 7, T.Add(-time.Minute))
	e.register(t, m, uids(1, 2, 3))
	if n, err := e.rec.CardRead(ctx, testCorp, 7, "u1", "task-1", T); n != 1 || err != nil {
		t.Fatalf("CardRead = %d, %v", n, err)
	}
	// flushd wrote u1's read to MySQL; then Redis restarts empty.
	e.loader.add(m, uids(1, 2, 3), uids(1), map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: uids(1)})
	wipe(t, e.rdb, e.s)

	t.Run("card read restores from MySQL", func(t *testing.T) {
		if n, err := e.rec.CardRead(ctx, testCorp, 7, "u1", "task-1", T); n != 0 || err != nil {
			t.Errorf("CardRead(u1, read in MySQL) = %d, %v; want 0, nil", n, err)
		}
		if n, err := e.rec.CardRead(ctx, testCorp, 7, "u2", "task-1", T); n != 1 || err != nil {
			t.Errorf("CardRead(u2) = %d, %v; want 1, nil", n, err)
		}
		if rc, rd, by, found, _ := e.s.CountsBySignal(ctx, testCorp, "task-1"); !found || rc != 3 || rd != 2 || by.Button != 2 {
			t.Errorf("CountsBySignal after restore = %d, %d, %+v, %v; want 3, 2, button 2, true", rc, rd, by, found)
		}
	})
	t.Run("enter_agent rebuilds the app index", func(t *testing.T) {
		wipe(t, e.rdb, e.s) // MySQL still knows only u1's read: u2's delta is in Kafka
		if n, err := e.rec.EnterAgent(ctx, testCorp, 7, "u3", T); n != 0 || err != nil {
			t.Errorf("EnterAgent(u3) = %d, %v; want 0 (recorded, not counted), nil", n, err)
		}
		if got := e.signal(t, "task-1", yidu.SignalEnterAgent); !slices.Equal(got, []uint32{3}) {
			t.Errorf("enter_agent bitmap after the index rebuild = %v; want [3]", got)
		}
		// u2's read is re-emitted rather than hidden: flushd ignores it
		// (WHERE is_read = 0) if the first delta already landed.
		if n, err := e.rec.CardRead(ctx, testCorp, 7, "u2", "task-1", T); n != 1 || err != nil {
			t.Errorf("CardRead(u2) after a second loss = %d, %v; want 1 (re-emitted), nil", n, err)
		}
	})
	if e.loader.loads < 2 {
		t.Errorf("LoadMessage called %d times; want ≥ 2", e.loader.loads)
	}
}

func TestRecorderConcurrent(t *testing.T) {
	// 64 callbacks at once on overlapping (member, message) pairs: each
	// read is new exactly once and on the topic exactly once.
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	const members = 300
	at := time.Unix(1_700_000_100, 0)
	e.register(t, testMessage("a", 7, at), rangeBitmap(0, members))
	e.register(t, testMessage("b", 7, at), rangeBitmap(0, members/2)) // half are not recipients
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 40 {
				u := (g*7 + i*13) % members
				task := []string{"a", "b"}[i%2]
				n, err := e.rec.CardRead(ctx, testCorp, 7, fmt.Sprintf("u%d", u), task, at)
				if err != nil {
					t.Errorf("CardRead: %v", err)
					return
				}
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	var want int64
	for _, id := range []string{"a", "b"} {
		_, rd, _, err := e.s.Counts(ctx, testCorp, id)
		testenv.Check(t, "Counts", err)
		want += rd
	}
	if total.Load() != want || want == 0 {
		t.Errorf("new reads reported %d; read bits %d", total.Load(), want)
	}
	got := testenv.Deltas(t, e.brokers, e.topic)
	seen := map[string]bool{}
	for _, d := range got {
		k := fmt.Sprintf("%s/%d", d.MsgID, d.UID)
		if seen[k] {
			t.Errorf("delta %s twice", k)
		}
		seen[k] = true
	}
	if int64(len(got)) != want {
		t.Errorf("%d deltas on the topic; want %d", len(got), want)
	}
}

// BenchmarkRecorderCardRead is the whole read path of one card callback:
// lookup, Mark (shared pipeline), Publish to kfake and wait for the ack,
// Ack. Parallelism models many concurrent WeCom callbacks.
func BenchmarkRecorderCardRead(b *testing.B) {
	e := newRecEnv(b, Options{})
	ctx := context.Background()
	const members = 1 << 20
	at := time.Unix(1_700_000_100, 0)
	e.register(b, testMessage("bench", 7, at), rangeBitmap(0, members))
	users := make([]string, 1<<16)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i*16)
	}
	var next atomic.Uint32
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := users[next.Add(1)%uint32(len(users))]
			if _, err := e.rec.CardRead(ctx, testCorp, 7, u, "bench", at); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "callbacks/s")
	b.ReportMetric(meanObserved(b, e.s.m.batchCalls), "calls/pipeline")
	b.ReportMetric(meanObserved(b, e.s.m.batchCmds), "commands/pipeline")
}

// TestCardPressRecorded: CardPress says whether a press is on record, which
// decides the member's passive reply ("read" on their button): a
// recipient's press, new or repeated, is; one yidu keeps nowhere is not.
func TestCardPressRecorded(t *testing.T) {
	const msg = "notice-1"
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	at := time.Unix(1_700_000_100, 0)
	e.register(t, testMessage(msg, 7, at.Add(-time.Hour)), uids(1, 2, 3))
	tests := []struct {
		name         string
		agent        int64
		user, taskID string
		want         int
		wantRecorded bool
	}{
		{"recipient", 7, "u1", msg + "@0", 1, true},
		{"repeated press", 7, "u1", msg + "@1", 0, true},
		{"non-recipient", 7, "u9", msg + "@0", 0, false},
		{"unknown member", 7, "bob", msg + "@0", 0, false},
		{"unknown message", 7, "u2", "no-such@0", 0, false},
		{"malformed task id", 7, "u2", msg + "}{", 0, false},
		{"another app's message", 8, "u2", msg + "@0", 0, false},
	}
	for _, tt := range tests {
		n, recorded, err := e.rec.CardPress(ctx, testCorp, tt.agent, tt.user, tt.taskID, at)
		if err != nil || n != tt.want || recorded != tt.wantRecorded {
			t.Errorf("%s: CardPress(%q, %q) = %d, %v, %v; want %d, %v, nil", tt.name, tt.user, tt.taskID, n, recorded, err, tt.want, tt.wantRecorded)
		}
	}
}
