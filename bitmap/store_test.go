package bitmap

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/testenv"
)

func testMessage(msgID string, agentID int64, sentAt time.Time) yidu.Message {
	return yidu.Message{CorpID: testCorp, MsgID: msgID, App: "hr", AgentID: agentID,
		Title: "通知 " + msgID, SentAt: sentAt, Recipients: 0}
}

func TestPutMessageAndRead(t *testing.T) {
	s, rdb := mustStore(t, Options{})
	ctx := context.Background()
	sent := time.UnixMilli(1_700_000_000_123)
	m := testMessage("m-1", 1000002, sent)
	m.Recipients = 4
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, m, uids(1, 5, 9, 100_000)))

	rc, rd, found, err := s.Counts(ctx, testCorp, "m-1")
	if err != nil || !found || rc != 4 || rd != 0 {
		t.Errorf("Counts = %d, %d, %v, %v; want 4, 0, true, nil", rc, rd, found, err)
	}
	got, found, err := s.MessageMeta(ctx, testCorp, "m-1")
	if err != nil || !found || got.App != m.App || got.AgentID != m.AgentID || got.Title != m.Title ||
		!got.SentAt.Equal(sent) || got.Recipients != 4 {
		t.Errorf("MessageMeta = %+v, %v, %v; want %+v", got, found, err, m)
	}
	rb, found, err := s.RecipientBitmap(ctx, testCorp, "m-1")
	if err != nil || !found || !rb.Equals(uids(1, 5, 9, 100_000)) {
		t.Errorf("RecipientBitmap = %v, %v, %v", rb, found, err)
	}
	// Before any read the read key does not exist: an empty set, not nil
	// (a nil one took yidu serve down in a follow-up round, issue 46).
	if rd, found, err := s.ReadBitmap(ctx, testCorp, "m-1"); err != nil || found || rd == nil || !rd.IsEmpty() {
		t.Errorf("ReadBitmap before any read = %v, found=%v err=%v; want empty, false, nil", rd, found, err)
	}
	if sb, found, err := s.SignalBitmap(ctx, testCorp, "m-1", yidu.SignalAcknowledged); err != nil || found || sb == nil || !sb.IsEmpty() {
		t.Errorf("SignalBitmap before any signal = %v, found=%v err=%v; want empty, false, nil", sb, found, err)
	}
	if rb, found, err := s.RecipientBitmap(ctx, testCorp, "nope"); err != nil || found || rb == nil || !rb.IsEmpty() {
		t.Errorf("RecipientBitmap(unknown) = %v, found=%v err=%v; want empty, false, nil", rb, found, err)
	}
	if _, rd, found, _ := s.Counts(ctx, testCorp, "nope"); found || rd != 0 {
		t.Errorf("Counts(unknown) found=%v", found)
	}
	if _, found, _ := s.MessageMeta(ctx, testCorp, "nope"); found {
		t.Errorf("MessageMeta(unknown) found")
	}
	// A second batch of recipients ORs in.
	testenv.Check(t, "PutMessage 2", s.PutMessage(ctx, m, uids(2)))
	if rc, _, _, _ := s.Counts(ctx, testCorp, "m-1"); rc != 5 {
		t.Errorf("Counts after second batch = %d; want 5", rc)
	}
	// Keys carry the TTL and the message's hash tag.
	ttl, err := rdb.PTTL(ctx, s.msgKey(testCorp, "m-1", "rcpt")).Result()
	if err != nil || ttl < 29*24*time.Hour {
		t.Errorf("PTTL rcpt = %v, %v; want about 30 days", ttl, err)
	}
	if k := s.msgKey(testCorp, "m-1", "read"); k != s.opts.Prefix+":m:{wwcorp/m-1}:read" {
		t.Errorf("msgKey = %q", k)
	}
}

func TestZeroRecipientsIsNotMissing(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("empty", 1, time.Now()), uids()))
	out, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "empty", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{0, 3}}})
	testenv.Check(t, "Mark", err)
	if want := []Outcome{OutcomeNotRecipient, OutcomeNotRecipient}; !slices.Equal(out[0], want) {
		t.Errorf("Mark on empty audience = %v; want %v", out[0], want)
	}
}

func TestMarkOutcomes(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2, 3)))
	mark := func(agent int64, us ...uint32) []Outcome {
		t.Helper()
		out, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", AgentID: agent, Signal: yidu.SignalButton, Counted: true, UIDs: us}})
		testenv.Check(t, "Mark", err)
		return out[0]
	}
	steps := []struct {
		name string
		do   func() []Outcome
		want []Outcome
	}{
		{"first read is new, non-recipient rejected", func() []Outcome { return mark(7, 1, 4) },
			[]Outcome{OutcomeNew, OutcomeNotRecipient}},
		{"before ack another attempt is in flight", func() []Outcome { return mark(7, 1) },
			[]Outcome{OutcomeInFlight}},
		{"after ack it is a duplicate", func() []Outcome {
			testenv.Check(t, "Ack", s.Ack(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1}}}))
			return mark(0, 1)
		}, []Outcome{OutcomeDuplicate}},
		{"released lease is re-emitted at once", func() []Outcome {
			mark(7, 2)
			testenv.Check(t, "Release", s.Release(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{2}}}))
			return mark(7, 2)
		}, []Outcome{OutcomeNew}},
		{"other app's card does not mark", func() []Outcome { return mark(8, 3) },
			[]Outcome{OutcomeOtherApp}},
		{"missing message", func() []Outcome {
			out, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "gone", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1, 2}}})
			testenv.Check(t, "Mark", err)
			return out[0]
		}, []Outcome{OutcomeMissing, OutcomeMissing}},
	}
	for _, st := range steps {
		if got := st.do(); !slices.Equal(got, st.want) {
			t.Errorf("%s: Mark = %v; want %v", st.name, got, st.want)
		}
	}
	if rd, found, _ := s.ReadBitmap(ctx, testCorp, "m"); !found || !rd.Equals(uids(1, 2)) {
		t.Errorf("ReadBitmap = %v; want [1 2] (uid 3 was marked by another app)", rd)
	}
	if p, _ := s.PendingUIDs(ctx, testCorp, "m"); !slices.Equal(p, []uint32{2}) {
		t.Errorf("PendingUIDs = %v; want [2] (uid 2 not acked)", p)
	}
}

func TestMarkExpiredLeaseIsNewAgain(t *testing.T) {
	// An attempt that set the bit and died (no Ack, no Release): once its
	// lease is over, the next signal re-emits the delta.
	// The lease must outlast two round trips on a loaded CI machine; it
	// lives in Redis TIME, not a fake clock, so the test polls for its end.
	const lease = 2 * time.Second
	s, _ := mustStore(t, Options{Lease: lease})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1)))
	tg := []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1}}}
	start := time.Now() // at or before the lease's start in Redis TIME
	want := []Outcome{OutcomeNew, OutcomeInFlight}
	for _, w := range want {
		out, err := s.Mark(ctx, tg)
		testenv.Check(t, "Mark", err)
		if out[0][0] != w {
			t.Fatalf("Mark = %v; want %v", out[0][0], w)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := s.Mark(ctx, tg)
		testenv.Check(t, "Mark", err)
		if o := out[0][0]; o != OutcomeInFlight {
			if o != OutcomeNew {
				t.Errorf("Mark once the lease ends = %v; want new", o)
			}
			// Redis TIME is read in whole milliseconds (floored), so the
			// lease may end up to 1 ms before start+lease by Go's clock.
			if took := time.Since(start); took < lease-time.Millisecond {
				t.Errorf("taken over after %v; want not before the %v lease", took, lease)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still in flight 30 s after a %v lease", lease)
		}
		time.Sleep(20 * time.Millisecond) // polling Redis, not asserting on time
	}
}

func TestRestoreNeverClearsRead(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	m := testMessage("m", 7, time.Now())
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, m, uids(1, 2, 3, 4)))
	_, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1, 2}}})
	testenv.Check(t, "Mark", err)
	// MySQL lags behind: it knows only uid 3 as read.
	testenv.Check(t, "RestoreMessage", s.RestoreMessage(ctx, m, uids(1, 2, 3, 4), uids(3)))
	rd, _, err := s.ReadBitmap(ctx, testCorp, "m")
	testenv.Check(t, "ReadBitmap", err)
	if !rd.Equals(uids(1, 2, 3)) {
		t.Errorf("ReadBitmap after restore = %v; want [1 2 3]", rd.ToArray())
	}
	if _, n, _, _ := s.Counts(ctx, testCorp, "m"); n != 3 {
		t.Errorf("read count = %d; want 3", n)
	}
}

func TestQueueFull(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	reg := prometheus.NewRegistry()
	s, err := newStore(rdb, Options{Prefix: prefix, QueueSize: 1, Registerer: reg})
	testenv.Check(t, "newStore", err)
	t.Cleanup(s.Close)
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2)))
	tg := func(u uint32) []Target {
		return []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{u}}}
	}

	// No loop runs yet: the first request fills the queue.
	first := make(chan error, 1)
	go func() { _, err := s.Mark(ctx, tg(1)); first <- err }()
	for len(s.queue) == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := s.Mark(ctx, tg(2)); !errors.Is(err, ErrQueueFull) {
		t.Errorf("Mark on a full queue = %v; want ErrQueueFull", err)
	}
	if n := testutil.ToFloat64(s.m.queueFull); n != 1 {
		t.Errorf("queue_full_total = %v; want 1", n)
	}
	s.start()
	if err := <-first; err != nil {
		t.Errorf("queued Mark = %v; want it served once the loop runs", err)
	}
	s.Close()
	if _, err := s.Mark(ctx, tg(2)); !errors.Is(err, ErrClosed) {
		t.Errorf("Mark after Close = %v; want ErrClosed", err)
	}
}

func TestMarkCtxDone(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1}}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Mark with a cancelled ctx = %v; want context.Canceled", err)
	}
}

func TestMarkConcurrentExactlyOnce(t *testing.T) {
	// 64 goroutines mark overlapping uids, each acking its new reads: every
	// read is new exactly once.
	s, _ := mustStore(t, Options{Loops: 2, MaxBatch: 64})
	ctx := context.Background()
	const members = 2000
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), rangeBitmap(0, members)))
	var news [members]atomic.Int32
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for i := range 200 {
				u := uint32((g*37 + i*11) % members)
				tg := []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{u, (u + 1) % members}}}
				out, err := s.Mark(ctx, tg)
				if err != nil {
					t.Errorf("Mark: %v", err)
					return
				}
				var fresh []uint32
				for j, o := range out[0] {
					if o == OutcomeNew {
						news[tg[0].UIDs[j]].Add(1)
						fresh = append(fresh, tg[0].UIDs[j])
					}
				}
				if len(fresh) > 0 {
					if err := s.Ack(ctx, []Target{{CorpID: testCorp, MsgID: "m", Signal: yidu.SignalButton, Counted: true, UIDs: fresh}}); err != nil {
						t.Errorf("Ack: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	rd, _, err := s.ReadBitmap(ctx, testCorp, "m")
	testenv.Check(t, "ReadBitmap", err)
	for u := range members {
		want := int32(0)
		if rd.Contains(uint32(u)) {
			want = 1
		}
		if got := news[u].Load(); got != want {
			t.Fatalf("uid %d new %d times; want %d", u, got, want)
		}
	}
	if rd.GetCardinality() == 0 {
		t.Fatal("nothing marked")
	}
	if p, _ := s.PendingUIDs(ctx, testCorp, "m"); len(p) != 0 {
		t.Errorf("PendingUIDs after all acks = %v; want none", p)
	}
}

func TestCursorForwardOnly(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	steps := []struct {
		at, want int64
	}{{100, 100}, {50, 100}, {100, 100}, {250, 250}}
	for _, st := range steps {
		testenv.Check(t, "AdvanceCursor", s.AdvanceCursor(ctx, testCorp, 7, 42, time.Unix(st.at, 0)))
		got, err := s.Cursor(ctx, testCorp, 7, 42)
		testenv.Check(t, "Cursor", err)
		if got.Unix() != st.want {
			t.Errorf("AdvanceCursor(%d): cursor = %d; want %d", st.at, got.Unix(), st.want)
		}
	}
}

// BenchmarkMark is the Redis step of the read path: concurrent callers
// marking single reads through the shared pipeline queue.
func BenchmarkMark(b *testing.B) {
	s, _ := mustStore(b, Options{})
	ctx := context.Background()
	const members = 1 << 20
	testenv.Check(b, "PutMessage", s.PutMessage(ctx, testMessage("bench", 7, time.Now()), rangeBitmap(0, members)))
	var next atomic.Uint32
	b.SetParallelism(32) // 32 × GOMAXPROCS concurrent callbacks
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			u := next.Add(1) % members
			tg := []Target{{CorpID: testCorp, MsgID: "bench", AgentID: 7, Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{u}}}
			if _, err := s.Mark(ctx, tg); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
	b.ReportMetric(meanObserved(b, s.m.batchCalls), "calls/pipeline")
	b.ReportMetric(meanObserved(b, s.m.batchCmds), "commands/pipeline")
}

// TestIsRecipient: the reading page's check agrees with the recipients
// bitmap, in Redis's bit order, and says when Redis lacks the message.
func TestIsRecipient(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("r", 7, time.Now()), uids(0, 9, 100000)))
	for _, tc := range []struct {
		uid  uint32
		want bool
	}{{0, true}, {1, false}, {8, false}, {9, true}, {100000, true}, {100001, false}, {1 << 30, false}} {
		is, found, err := s.IsRecipient(ctx, testCorp, "r", tc.uid)
		if err != nil || !found || is != tc.want {
			t.Errorf("IsRecipient(%d) = %v, %v, %v; want %v, true", tc.uid, is, found, err, tc.want)
		}
	}
	if is, found, err := s.IsRecipient(ctx, testCorp, "absent", 0); err != nil || found || is {
		t.Errorf("IsRecipient of a message Redis lacks = %v, %v, %v; want false, false", is, found, err)
	}
}

// TestMarkLoopSurvivesAPanic (issue 46): a pipeline that panics (here a
// call whose merged arguments are out of range, as a bug would make)
// answers its caller with the recovered panic, counts it, and the queue
// loop goes on marking for the next callers.
func TestMarkLoopSurvivesAPanic(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, _ := mustStore(t, Options{Registerer: reg})
	ctx := context.Background()
	poison := mergeKey{op: "poison"}
	err := s.do(ctx, []call{{merge: poison, args: []any{"a"}}, {merge: poison, args: []any{}, fixed: 5}}, 5*time.Second)
	var pe *loop.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("a panicking pipeline answered %v; want the recovered panic", err)
	}
	var got float64
	mfs, err := reg.Gather()
	testenv.Check(t, "Gather", err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "yidu_loop_panics_total" && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "bitmap_mark" {
				got = m.GetCounter().GetValue()
			}
		}
	}
	if got != 1 {
		t.Errorf("yidu_loop_panics_total{loop=bitmap_mark} = %v; want 1", got)
	}
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1)))
	out, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: "m", AgentID: 7, Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1}}})
	if err != nil || out[0][0] != OutcomeNew {
		t.Fatalf("Mark after the panic = %v, %v; want a new read (the loop survived)", out, err)
	}
}

// TestScriptInSharedPipeline: Store.Script runs a caller's script in the
// marks' shared pipeline (the reading page's done marks, issue 50): each
// of many concurrent callers' writes lands, alongside a mark, and a
// failing script's error is its caller's alone.
func TestScriptInSharedPipeline(t *testing.T) {
	s, rdb := mustStore(t, Options{})
	ctx := context.Background()
	m := testMessage("m-script", 1000002, time.UnixMilli(1_700_000_000_000))
	m.Recipients = 2
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, m, uids(1, 2)))
	set := redis.NewScript(`redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) return 1`)
	fail := redis.NewScript(`return redis.error_reply('refused')`)
	key := s.opts.Prefix + ":script-test"
	var wg sync.WaitGroup
	errs := make(chan error, 65)
	for i := range 64 {
		wg.Go(func() { errs <- s.Script(ctx, set, []string{key}, strconv.Itoa(i), "done") })
	}
	wg.Go(func() {
		_, err := s.Mark(ctx, []Target{{CorpID: testCorp, MsgID: m.MsgID, Signal: yidu.SignalLink, UIDs: []uint32{1}}})
		errs <- err
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		testenv.Check(t, "Script or Mark", err)
	}
	if n, err := rdb.HLen(ctx, key).Result(); err != nil || n != 64 {
		t.Errorf("fields written = %d, %v; want 64", n, err)
	}
	if err := s.Script(ctx, fail, []string{key}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("failing script = %v; want its error", err)
	}
	if err := s.Script(ctx, set, []string{key}, "after", "done"); err != nil {
		t.Errorf("a script after a failed one = %v", err)
	}
	// A store whose pipeline no longer takes requests (closing, or its
	// queue full) runs the script in a round trip of its own.
	s.Close()
	if err := s.Script(ctx, set, []string{key}, "closed", "done"); err != nil {
		t.Errorf("a script on a closed store = %v", err)
	}
	if v, err := rdb.HGet(ctx, key, "closed").Result(); err != nil || v != "done" {
		t.Errorf("the closed store's script wrote %q, %v; want done", v, err)
	}
}

// TestPipelinedInSharedPipeline: Store.Pipelined queues a caller's own
// commands on the marks' shared pipeline (the reading page's reads,
// issue 50): each of many concurrent callers reads its own replies, a
// missing key is its caller's redis.Nil and no failure of the batch, and
// a closed store runs them in a round trip of their own.
func TestPipelinedInSharedPipeline(t *testing.T) {
	s, rdb := mustStore(t, Options{})
	ctx := context.Background()
	key := func(i int) string { return s.opts.Prefix + ":pipelined:" + strconv.Itoa(i) }
	for i := range 32 {
		testenv.Check(t, "SET", rdb.Set(ctx, key(i), "v"+strconv.Itoa(i), time.Minute).Err())
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			var got *redis.StringCmd
			if err := s.Pipelined(ctx, func(p redis.Pipeliner) { got = p.Get(ctx, key(i)) }); err != nil {
				t.Errorf("Pipelined(%d) = %v", i, err)
				return
			}
			v, err := got.Result()
			switch {
			case i < 32 && (err != nil || v != "v"+strconv.Itoa(i)):
				t.Errorf("GET %d = %q, %v; want v%d", i, v, err, i)
			case i >= 32 && !errors.Is(err, redis.Nil):
				t.Errorf("GET of a missing key %d = %q, %v; want redis.Nil", i, v, err)
			}
		})
	}
	wg.Wait()
	if n := testutil.ToFloat64(s.m.redisErrors); n != 0 {
		t.Errorf("redis errors counted = %v; want 0 (a missing key is no failure)", n)
	}
	s.Close()
	var got *redis.StringCmd
	if err := s.Pipelined(ctx, func(p redis.Pipeliner) { got = p.Get(ctx, key(0)) }); err != nil || got.Val() != "v0" {
		t.Errorf("Pipelined on a closed store = %v, %v; want v0", err, got)
	}
}
