package bitmap

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The tests in this file make Redis, MySQL (the loader) or Kafka fail
// under the read path and check that no failure is answered as a success.
// Those that crash or reset Redis run a redis-server of their own.

// ownRecEnv is newRecEnv on a redis-server of the test's own.
func ownRecEnv(tb testing.TB, opts Options, pub func(Publisher) Publisher, loader MessageLoader) (*recEnv, *ownRedis) {
	tb.Helper()
	s, o := ownStore(tb, opts)
	p, brokers, topic := testenv.Producer(tb, testTopic)
	e := &recEnv{s: s, rdb: o.Client, loader: newFakeLoader(), pub: &flakyPublisher{pub: p}, brokers: brokers, topic: topic}
	if loader == nil {
		loader = e.loader
	}
	var publisher Publisher = e.pub
	if pub != nil {
		publisher = pub(e.pub)
	}
	rec, err := NewRecorder(s, fakeIDs{}, publisher, loader, RecorderOptions{Registerer: prometheus.NewRegistry(), AckTimeout: 10 * time.Second})
	testenv.Check(tb, "NewRecorder", err)
	e.rec = rec
	return e, o
}

// TestMarkAfterScriptFlush: a restarted or failed-over Redis has no
// scripts cached, so every EVALSHA answers NOSCRIPT. Mark, Ack and Release
// must fall back to EVAL and keep their meaning, on a fresh server and
// after SCRIPT FLUSH (which would break every other test on a shared one).
func TestMarkAfterScriptFlush(t *testing.T) {
	s, o := ownStore(t, Options{Registerer: prometheus.NewRegistry()})
	ctx := context.Background()
	flush := func() {
		t.Helper()
		testenv.Check(t, "SCRIPT FLUSH", o.Client.ScriptFlush(ctx).Err())
		if ok, err := o.Client.ScriptExists(ctx, markScript.Hash()).Result(); err != nil || ok[0] {
			t.Fatalf("SCRIPT EXISTS mark after SCRIPT FLUSH = %v, %v; want false", ok, err)
		}
	}
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2)))
	tg := func(u uint32) []Target {
		return []Target{{CorpID: testCorp, MsgID: "m", AgentID: 7, Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{u}}}
	}
	mark := func(u uint32) Outcome {
		t.Helper()
		out, err := s.Mark(ctx, tg(u))
		if err != nil {
			t.Fatalf("Mark(uid %d) with no script cached = %v; want the EVAL fallback", u, err)
		}
		return out[0][0]
	}
	steps := []struct {
		name string
		do   func() Outcome
		want Outcome
	}{
		{"fresh server: first read", func() Outcome { flush(); return mark(1) }, OutcomeNew},
		{"after flush: still in flight", func() Outcome { flush(); return mark(1) }, OutcomeInFlight},
		{"ack after flush, then a duplicate", func() Outcome {
			flush()
			testenv.Check(t, "Ack with no script cached", s.Ack(ctx, tg(1)))
			flush()
			return mark(1)
		}, OutcomeDuplicate},
		{"release after flush re-emits at once", func() Outcome {
			if o := mark(2); o != OutcomeNew {
				t.Errorf("Mark(uid 2) = %v; want new", o)
			}
			flush()
			testenv.Check(t, "Release with no script cached", s.Release(ctx, tg(2)))
			flush()
			return mark(2)
		}, OutcomeNew},
	}
	for _, st := range steps {
		if got := st.do(); got != st.want {
			t.Errorf("%s: Mark = %v; want %v", st.name, got, st.want)
		}
	}
	if n := testutil.ToFloat64(s.m.redisErrors); n != 0 {
		t.Errorf("redis_errors_total = %v; want 0 (NOSCRIPT is not an error)", n)
	}
}

// TestRecorderRedisDown: with Redis gone no read path answers a success
// with nothing recorded. A card press and a link read are published to
// Kafka unmarked (docs/reliability.md, "Outages longer than WeCom's
// patience"): flushd's recipient guard decides and its live view sets the
// bits later. An app entry finds the member's messages in MySQL (the
// loader) and is published unmarked too.
func TestRecorderRedisDown(t *testing.T) {
	e, o := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, nil, nil)
	ctx := context.Background()
	at := time.Now().Truncate(time.Second) // within the TTL: an active message
	e.register(t, testMessage("m", 7, at.Add(-time.Minute)), uids(1, 2, 3))
	o.Kill(t)
	reads := []struct {
		name  string
		read  func(ctx context.Context) (int, error)
		wantN int // 1: published unmarked; 0: an error
	}{
		{"card", func(ctx context.Context) (int, error) { return e.rec.CardRead(ctx, testCorp, 7, "u1", "m", at) }, 1},
		{"link", func(ctx context.Context) (int, error) { return e.rec.LinkRead(ctx, testCorp, 7, "u2", "m", at) }, 1},
		// Not counted by default: published unmarked, 0 reads.
		{"enter_agent", func(ctx context.Context) (int, error) { return e.rec.EnterAgent(ctx, testCorp, 7, "u3", at) }, 0},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			n, err := r.read(ctx)
			if r.wantN == 1 && (err != nil || n != 1) {
				t.Errorf("%s read with Redis down = %d, %v; want 1, nil (published unmarked)", r.name, n, err)
			}
			if r.wantN == 0 && (err != nil || n != 0) {
				t.Errorf("%s read with Redis down = %d, %v; want 0 (not counted), nil", r.name, n, err)
			}
		})
	}
	if n := testutil.ToFloat64(e.s.m.redisErrors); n < 2 {
		t.Errorf("redis_errors_total = %v; want ≥ 2 (the card and link marks)", n)
	}
	want := []delta.Delta{
		{CorpID: testCorp, MsgID: "m", UID: 1, ReadTime: at.Unix(), Source: delta.SourceCard, Counted: true},
		{CorpID: testCorp, MsgID: "m", UID: 2, ReadTime: at.Unix(), Source: delta.SourceLink, Counted: true},
		{CorpID: testCorp, MsgID: "m", UID: 3, ReadTime: at.Unix(), Source: delta.SourceEnterAgent, Counted: false},
	}
	if got := testenv.Deltas(t, e.brokers, e.topic); !slices.Equal(got, want) {
		t.Errorf("deltas published with Redis down = %+v; want %+v", got, want)
	}
}

// TestRecorderReleasesAfterFailedPublish: a publish that fails gives its
// leases up at once, so WeCom's retry (5 s later) re-emits the read well
// inside a lease of a minute instead of waiting it out.
func TestRecorderReleasesAfterFailedPublish(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	for _, path := range []struct {
		name string
		read func(r *Recorder, ctx context.Context) (int, error)
	}{
		{"card", func(r *Recorder, ctx context.Context) (int, error) {
			return r.CardRead(ctx, testCorp, 7, "u1", "m", now)
		}},
		{"enter_agent", func(r *Recorder, ctx context.Context) (int, error) {
			return r.EnterAgent(ctx, testCorp, 7, "u1", now)
		}},
	} {
		t.Run(path.name, func(t *testing.T) {
			e := newRecEnv(t, Options{Lease: time.Minute}, yidu.App{Name: "hr", CorpID: testCorp, AgentID: 7,
				ReadSignals: []yidu.Signal{yidu.SignalButton, yidu.SignalEnterAgent}})
			e.register(t, testMessage("m", 7, now.Add(-time.Minute)), uids(1))
			e.pub.fails = 1
			if n, err := path.read(e.rec, context.Background()); !errors.Is(err, errKafkaDown) || n != 0 {
				t.Fatalf("read with Kafka failing = %d, %v; want 0, %v", n, err, errKafkaDown)
			}
			if n := testutil.ToFloat64(e.rec.m.publishErrors); n != 1 {
				t.Errorf("publish_errors_total = %v; want 1", n)
			}
			// Far inside the lease: only a released lease lets this succeed.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if n, err := path.read(e.rec, ctx); n != 1 || err != nil {
				t.Errorf("retry inside the lease = %d, %v; want 1, nil (re-emitted at once)", n, err)
			}
			if got := testenv.Deltas(t, e.brokers, e.topic); len(got) != 1 || got[0].UID != 1 || !got[0].Counted {
				t.Errorf("deltas = %+v; want one counted delta for uid 1", got)
			}
		})
	}
}

// failingLoader is MySQL failing under the Recorder; before, when set,
// runs first (e.g. to crash Redis between Mark and RestoreReads).
type failingLoader struct {
	*fakeLoader
	err          error
	before       func() // in LoadReads
	beforeActive func() // in ActiveMessages
}

var errMySQLDown = errors.New("mysql down (test)")

func (f *failingLoader) LoadReads(ctx context.Context, corpID, msgID string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap, bool, error) {
	if f.before != nil {
		f.before()
	}
	if f.err != nil {
		return yidu.Message{}, nil, nil, nil, false, f.err
	}
	return f.fakeLoader.LoadReads(ctx, corpID, msgID)
}

func (f *failingLoader) ActiveMessages(ctx context.Context, corpID string, agentID int64, since time.Time) ([]yidu.Message, error) {
	if f.beforeActive != nil {
		f.beforeActive()
	}
	if f.err != nil {
		return nil, f.err
	}
	return f.fakeLoader.ActiveMessages(ctx, corpID, agentID, since)
}

// TestRecorderRestoreFails: a message Redis lacks whose restore fails
// (MySQL down, or Redis failing while the message is written back) is an
// error, never a read of an unknown message (0, nil).
func TestRecorderRestoreFails(t *testing.T) {
	at := time.Unix(1_700_000_100, 0)
	t.Run("mysql down", func(t *testing.T) {
		fl := &failingLoader{fakeLoader: newFakeLoader(), err: errMySQLDown}
		e, _ := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, nil, fl)
		fl.add(testMessage("m", 7, at), uids(1), roaring.New()) // in MySQL only
		if n, err := e.rec.CardRead(context.Background(), testCorp, 7, "u1", "m", at); !errors.Is(err, errMySQLDown) || n != 0 {
			t.Errorf("CardRead with the restore failing = %d, %v; want 0, %v", n, err, errMySQLDown)
		}
		if n, err := e.rec.EnterAgent(context.Background(), testCorp, 7, "u1", at); !errors.Is(err, errMySQLDown) || n != 0 {
			t.Errorf("EnterAgent with the index rebuild failing = %d, %v; want 0, %v", n, err, errMySQLDown)
		}
		if n := testutil.ToFloat64(e.rec.m.restores.WithLabelValues("error")); n != 1 {
			t.Errorf("restores_total{result=error} = %v; want 1", n)
		}
	})
	t.Run("redis fails during the restore", func(t *testing.T) {
		fl := &failingLoader{fakeLoader: newFakeLoader()}
		e, o := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, nil, fl)
		fl.before = func() { o.Kill(t) }
		fl.add(testMessage("m", 7, at), uids(1), roaring.New())
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if n, err := e.rec.CardRead(ctx, testCorp, 7, "u1", "m", at); err == nil || n != 0 {
			t.Errorf("CardRead with Redis failing in the restore = %d, %v; want 0 and an error", n, err)
		}
		if n := testutil.ToFloat64(e.rec.m.restores.WithLabelValues("error")); n != 1 {
			t.Errorf("restores_total{result=error} = %v; want 1", n)
		}
		if got := testenv.Deltas(t, e.brokers, e.topic); len(got) != 0 {
			t.Errorf("deltas published without the bit set: %+v", got)
		}
	})
}

// hookPublisher runs after (e.g. crashing Redis) once the publish is done,
// then returns err, or the publish's own result when err is nil.
type hookPublisher struct {
	pub   Publisher
	after func()
	err   error
}

func (h *hookPublisher) Publish(ctx context.Context, ds []delta.Delta) error {
	var err error
	if h.err == nil {
		err = h.pub.Publish(ctx, ds)
	}
	h.after()
	if h.err != nil {
		return h.err
	}
	return err
}

// TestRecorderAckAndReleaseFail: Redis failing after the publish. When
// Kafka acknowledged, the read is durable and the answer is a success
// whose only cost is one re-emit later (ack_errors_total counts it); when
// the publish failed, the answer stays the publish's error however the
// Release went.
func TestRecorderAckAndReleaseFail(t *testing.T) {
	at := time.Unix(1_700_000_100, 0)
	t.Run("ack fails", func(t *testing.T) {
		var o *ownRedis
		e, o := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, func(p Publisher) Publisher {
			return &hookPublisher{pub: p, after: func() { o.Kill(t) }}
		}, nil)
		e.register(t, testMessage("m", 7, at), uids(1))
		if n, err := e.rec.CardRead(context.Background(), testCorp, 7, "u1", "m", at); n != 1 || err != nil {
			t.Errorf("CardRead with the Ack failing = %d, %v; want 1, nil (the delta is durable)", n, err)
		}
		// The ack is not waited for (Store.AckAsync): its failure is
		// counted when the queue loop hears of it.
		testenv.WaitFor(t, 5*time.Second, "ack_errors_total = 1", func() bool {
			return testutil.ToFloat64(e.rec.m.ackErrors) == 1
		})
		got := testenv.Deltas(t, e.brokers, e.topic)
		if want := []delta.Delta{{CorpID: testCorp, MsgID: "m", UID: 1, ReadTime: at.Unix(), Source: delta.SourceCard, Counted: true}}; !slices.Equal(got, want) {
			t.Errorf("deltas = %+v; want %+v", got, want)
		}
	})
	t.Run("release fails", func(t *testing.T) {
		var o *ownRedis
		e, o := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, func(p Publisher) Publisher {
			return &hookPublisher{pub: p, after: func() { o.Kill(t) }, err: errKafkaDown}
		}, nil)
		e.register(t, testMessage("m", 7, at), uids(1))
		if n, err := e.rec.CardRead(context.Background(), testCorp, 7, "u1", "m", at); !errors.Is(err, errKafkaDown) || n != 0 {
			t.Errorf("CardRead with publish and Release failing = %d, %v; want 0, %v", n, err, errKafkaDown)
		}
		if n := testutil.ToFloat64(e.rec.m.publishErrors); n != 1 {
			t.Errorf("publish_errors_total = %v; want 1", n)
		}
	})
}

// TestParseMark: every reply the mark script can give, and the malformed
// ones a broken script or proxy could; a malformed reply is an error,
// never an outcome.
func TestParseMark(t *testing.T) {
	tests := []struct {
		name    string
		v       any
		n       int
		want    []Outcome
		wantErr bool
	}{
		{name: "missing", v: int64(0), n: 2, want: []Outcome{OutcomeMissing, OutcomeMissing}},
		{name: "other app", v: int64(-1), n: 1, want: []Outcome{OutcomeOtherApp}},
		{name: "per uid", v: []any{int64(1), int64(2), int64(3), int64(4), int64(6)}, n: 5,
			want: []Outcome{OutcomeNew, OutcomeDuplicate, OutcomeInFlight, OutcomeNotRecipient, OutcomeNewUncounted}},
		{name: "no uids", v: []any{}, n: 0, want: []Outcome{}},
		{name: "unknown whole reply", v: int64(1), n: 1, wantErr: true},
		{name: "too few replies", v: []any{int64(1)}, n: 2, wantErr: true},
		{name: "too many replies", v: []any{int64(1), int64(1)}, n: 1, wantErr: true},
		{name: "missing per uid", v: []any{int64(0)}, n: 1, wantErr: true},
		{name: "other app per uid", v: []any{int64(5)}, n: 1, wantErr: true},
		{name: "code past the last", v: []any{int64(7)}, n: 1, wantErr: true},
		{name: "negative code", v: []any{int64(-1)}, n: 1, wantErr: true},
		{name: "string code", v: []any{"1"}, n: 1, wantErr: true},
		{name: "nil element", v: []any{nil}, n: 1, wantErr: true},
		{name: "string reply", v: "OK", n: 1, wantErr: true},
		{name: "nil reply", v: nil, n: 1, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMark(tt.v, tt.n)
			if (err != nil) != tt.wantErr || (!tt.wantErr && !slices.Equal(got, tt.want)) {
				t.Errorf("parseMark(%#v, %d) = %v, %v; want %v, error %v", tt.v, tt.n, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestReEmitKeepsFirstDecision: an attempt under a configuration where
// enter_agent counted (read bit set, lease marked counted) died before
// publishing; the retry, under a configuration where it does not count,
// re-emits the delta as the first attempt decided: counted, since Redis's
// read bit already says read and MySQL's is_read must follow it.
func TestReEmitKeepsFirstDecision(t *testing.T) {
	e := newRecEnv(t, Options{Lease: 300 * time.Millisecond}) // defaults: enter_agent does not count
	ctx := context.Background()
	at := time.Now().Truncate(time.Second)
	e.register(t, testMessage("m", 7, at.Add(-time.Minute)), uids(3))
	_, err := e.s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", AgentID: 7, Signal: yidu.SignalEnterAgent, Counted: true, UIDs: []uint32{3}}})
	testenv.Check(t, "Mark", err)
	long, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if n, err := e.rec.EnterAgent(long, testCorp, 7, "u3", at); n != 1 || err != nil {
		t.Errorf("EnterAgent after the lease = %d, %v; want 1 (re-emitted as counted), nil", n, err)
	}
	want := []delta.Delta{{CorpID: testCorp, MsgID: "m", UID: 3, ReadTime: at.Unix(), Source: delta.SourceEnterAgent, Counted: true}}
	if got := testenv.Deltas(t, e.brokers, e.topic); !slices.Equal(got, want) {
		t.Errorf("deltas = %+v; want %+v", got, want)
	}
}

// TestRecorderLookupFails: a member the directory cannot look up is never
// an unknown member (0, nil). A card press or link read is published by
// UserID for flushd to map once MySQL answers (TestLookupDownPublishesByUserID
// has the deltas); an app entry, which needs the uid to find the
// member's messages, is the lookup's error.
func TestRecorderLookupFails(t *testing.T) {
	rec, _, pub := lookupDownRecorder(t)
	ctx := context.Background()
	at := time.Now()
	tests := []struct {
		name      string
		read      func() (int, error)
		published bool
	}{
		{"card", func() (int, error) { return rec.CardRead(ctx, testCorp, 7, "u1", "m@0", at) }, true},
		{"link", func() (int, error) { return rec.LinkRead(ctx, testCorp, 7, "u1", "m", at) }, true},
		{"enter_agent", func() (int, error) { return rec.EnterAgent(ctx, testCorp, 7, "u1", at) }, false},
	}
	for _, tt := range tests {
		pub.mu.Lock()
		before := len(pub.ds)
		pub.mu.Unlock()
		n, err := tt.read()
		pub.mu.Lock()
		got := pub.ds[before:]
		pub.mu.Unlock()
		switch {
		case tt.published && (err != nil || n != 1 || len(got) != 1 || got[0].UserID != "u1" || got[0].UID != 0):
			t.Errorf("%s with the lookup failing = %d, %v, published %+v; want 1, nil, one delta by UserID u1", tt.name, n, err, got)
		case !tt.published && (!errors.Is(err, errMySQLDown) || n != 0 || len(got) != 0):
			t.Errorf("%s with the lookup failing = %d, %v, published %+v; want 0, %v, nothing", tt.name, n, err, got, errMySQLDown)
		}
	}
}

// TestEnterAgentRedisFails: Redis failing in the steps of an app entry
// other than the mark: rebuilding the app index, and moving the cursor
// after the deltas are durable. Both are errors (the receiver answers 503
// and WeCom retries; re-marking is idempotent).
func TestEnterAgentRedisFails(t *testing.T) {
	at := time.Now().Truncate(time.Second)
	t.Run("index rebuild", func(t *testing.T) {
		fl := &failingLoader{fakeLoader: newFakeLoader()}
		e, o := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, nil, fl)
		fl.add(testMessage("m", 7, at.Add(-time.Minute)), uids(1), roaring.New())
		fl.beforeActive = func() { o.Kill(t) }
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if n, err := e.rec.EnterAgent(ctx, testCorp, 7, "u1", at); err == nil || n != 0 {
			t.Errorf("EnterAgent with Redis failing in the index rebuild = %d, %v; want 0 and an error", n, err)
		}
	})
	t.Run("cursor", func(t *testing.T) {
		e, o := ownRecEnv(t, Options{Registerer: prometheus.NewRegistry()}, nil, nil)
		app := yidu.App{Name: "hr", CorpID: testCorp, AgentID: 7, ReadSignals: []yidu.Signal{yidu.SignalEnterAgent}}
		rec, err := NewRecorder(e.s, fakeIDs{}, &hookPublisher{pub: e.pub, after: func() { o.Kill(t) }}, e.loader,
			RecorderOptions{Apps: []yidu.App{app}, Registerer: prometheus.NewRegistry(), AckTimeout: 10 * time.Second})
		testenv.Check(t, "NewRecorder", err)
		e.register(t, testMessage("m", 7, at.Add(-time.Minute)), uids(1))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if n, err := rec.EnterAgent(ctx, testCorp, 7, "u1", at); err == nil || n != 1 {
			t.Errorf("EnterAgent with the cursor not moved = %d, %v; want 1 (the delta is durable) and an error", n, err)
		}
		if got := testenv.Deltas(t, e.brokers, e.topic); len(got) != 1 || !got[0].Counted {
			t.Errorf("deltas = %+v; want one counted enter_agent delta", got)
		}
	})
}

// TestCardPressByUserIDIsRecorded: a press published by UserID while
// MySQL is down is on record (flushd maps it once MySQL answers), so the
// receiver still gives the member the passive reply that turns the
// button into "已读 ✓" (issue 32); only a press kept nowhere is not.
func TestCardPressByUserIDIsRecorded(t *testing.T) {
	rec, _, _ := lookupDownRecorder(t)
	ctx := context.Background()
	tests := []struct {
		name, userID, taskID string
		want                 bool
	}{
		{"member looked up in vain", "u1", "m@0", true},
		{"a malformed task id", "u1", "not a task", false},
		{"a malformed UserID", "bad user\x00", "m@0", false},
	}
	for _, tt := range tests {
		_, recorded, _ := rec.CardPress(ctx, testCorp, 7, tt.userID, tt.taskID, time.Now())
		if recorded != tt.want {
			t.Errorf("%s: CardPress with MySQL down recorded = %v; want %v", tt.name, recorded, tt.want)
		}
	}
}
