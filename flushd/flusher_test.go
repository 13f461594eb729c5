package flushd

import (
	"context"
	"database/sql"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// kafkaEnv is a Kafka with the deltas topic and a MySQL database: Apache
// Kafka where YIDU_TEST_KAFKA_BROKERS names one (a topic and a group of
// the test's own), kfake otherwise; cluster is set only on kfake
// (newKfakeEnv), for the tests that make the broker misbehave.
type kafkaEnv struct {
	db      *sql.DB
	spy     *spyDB
	cluster *kfake.Cluster
	brokers []string
	topic   string
	group   string
	parts   int32
	prod    *kgo.Client
	adm     *kadm.Client
}

func newKafkaEnv(t *testing.T, partitions int32) *kafkaEnv {
	t.Helper()
	e := &kafkaEnv{group: testenv.RandomName("flushd-test-"), parts: partitions}
	e.brokers, e.topic = testenv.Topic(t, "yidu.reads", partitions)
	return e.open(t)
}

// newKfakeEnv is newKafkaEnv on kfake always, with opts: for the tests
// that control its answers (ControlKey) or its group settings.
func newKfakeEnv(t *testing.T, partitions int32, opts ...kfake.Opt) *kafkaEnv {
	t.Helper()
	e := &kafkaEnv{topic: "yidu.reads", group: "flushd-test", parts: partitions}
	var err error
	e.cluster, err = kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, e.topic)}, opts...)...)
	testenv.Check(t, "kfake", err)
	t.Cleanup(e.cluster.Close)
	e.brokers = e.cluster.ListenAddrs()
	return e.open(t)
}

func (e *kafkaEnv) open(t *testing.T) *kafkaEnv {
	t.Helper()
	e.db = testenv.MySQL(t)
	e.spy = &spyDB{DB: e.db}
	var err error
	e.prod, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.DefaultProduceTopic(e.topic))
	testenv.Check(t, "producer", err)
	t.Cleanup(e.prod.Close)
	e.adm = kadm.NewClient(e.prod)
	return e
}

// produce writes deltas keyed like the read path does.
func (e *kafkaEnv) produce(t *testing.T, ds ...delta.Delta) {
	t.Helper()
	rs := make([]*kgo.Record, len(ds))
	for i, d := range ds {
		rs[i] = &kgo.Record{Key: delta.Key(d.CorpID, d.MsgID), Value: delta.Marshal(d)}
	}
	testenv.Check(t, "produce", e.prod.ProduceSync(context.Background(), rs...).FirstErr())
}

func (e *kafkaEnv) produceRaw(t *testing.T, key string, values ...[]byte) {
	t.Helper()
	for _, v := range values {
		testenv.Check(t, "produce", e.prod.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: v}).FirstErr())
	}
}

// running is a Flusher whose Run is in a goroutine.
type running struct {
	*Flusher
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned err
	err    error
}

// stop cancels Run and returns its result.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
		return nil
	}
}

func (e *kafkaEnv) start(t *testing.T, opts Options, setup func(*Flusher)) *running {
	t.Helper()
	return e.startOn(t, e.spy, opts, setup)
}

// startOn starts a Flusher writing through db.
func (e *kafkaEnv) startOn(t *testing.T, db DB, opts Options, setup func(*Flusher)) *running {
	t.Helper()
	opts.Brokers, opts.Topic, opts.Group = e.brokers, e.topic, e.group
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if opts.FetchWait == 0 {
		opts.FetchWait = 100 * time.Millisecond
	}
	opts.KafkaOpts = append(opts.KafkaOpts, kgo.HeartbeatInterval(100*time.Millisecond))
	f, err := New(db, opts)
	testenv.Check(t, "New", err)
	f.backoff = backoff{min: 10 * time.Millisecond, max: 100 * time.Millisecond}
	if setup != nil {
		setup(f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Flusher: f, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = f.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

// offsets returns per partition the group's committed offset (-1: none)
// and the end offset.
func (e *kafkaEnv) offsets(tb testing.TB) (committed, ends map[int32]int64) {
	tb.Helper()
	ctx := context.Background()
	fetched, err := e.adm.FetchOffsets(ctx, e.group)
	testenv.Check(tb, "fetch offsets", err)
	listed, err := e.adm.ListEndOffsets(ctx, e.topic)
	testenv.Check(tb, "end offsets", err)
	committed, ends = map[int32]int64{}, map[int32]int64{}
	for p := range e.parts {
		committed[p] = -1
		if o, ok := fetched.Lookup(e.topic, p); ok && o.Err == nil {
			committed[p] = o.At
		}
		o, _ := listed.Lookup(e.topic, p)
		ends[p] = o.Offset
	}
	return committed, ends
}

// committed returns the group's committed offset per partition (-1: none).
func (e *kafkaEnv) committed(tb testing.TB) map[int32]int64 {
	tb.Helper()
	c, _ := e.offsets(tb)
	return c
}

// waitCommittedToEnd waits until the group has committed parts (every
// partition if none is given) up to their end offsets as they are now, and
// returns those.
func (e *kafkaEnv) waitCommittedToEnd(t *testing.T, parts ...int32) map[int32]int64 {
	t.Helper()
	_, ends := e.offsets(t)
	if len(parts) == 0 {
		parts = slices.Collect(maps.Keys(ends))
	}
	testenv.WaitFor(t, 20*time.Second, "offsets committed to the end", func() bool {
		c := e.committed(t)
		for _, p := range parts {
			if c[p] != ends[p] && ends[p] != 0 { // nothing to commit in an empty partition
				return false
			}
		}
		return true
	})
	return ends
}

// recipients writes unread rows for uids [0, n) of messages.
func (e *kafkaEnv) recipients(tb testing.TB, messages, n int) {
	tb.Helper()
	for m := range messages {
		insertRecipients(tb, e.db, "corp", msgName(m), 0, uint32(n))
	}
}

// reads builds deltas for uids [0, n) of messages, read at base+uid.
func reads(messages, n int) []delta.Delta {
	var out []delta.Delta
	for m := range messages {
		for uid := range uint32(n) {
			out = append(out, delta.Delta{CorpID: "corp", MsgID: msgName(m), UID: uid, ReadTime: base + int64(uid), Source: delta.SourceCard, Counted: true})
		}
	}
	return out
}

// checkRows asserts every uid [0, n) of each message is read at base+uid.
func checkRows(t *testing.T, db *sql.DB, messages, n int) {
	t.Helper()
	for m := range messages {
		rows := readRows(t, db, "corp", msgName(m))
		for uid := range uint32(n) {
			if want := (row{read: true, at: base + int64(uid), source: 1}); rows[uid] != want {
				t.Fatalf("%s row %d = %+v; want %+v", msgName(m), uid, rows[uid], want)
			}
		}
	}
}

func TestFlusherWritesDeltas(t *testing.T) {
	e := newKafkaEnv(t, 2)
	const messages, n = 3, 200
	e.recipients(t, messages, n)
	f := e.start(t, Options{Interval: 200 * time.Millisecond}, nil)
	ds := reads(messages, n)
	// A second, later read of some uids: the first read_time stays.
	for uid := range uint32(10) {
		ds = append(ds, delta.Delta{CorpID: "corp", MsgID: msgName(0), UID: uid, ReadTime: base + 3600, Source: delta.SourceLink, Counted: true})
	}
	// Reads of uids without a row yet are parked, not lost.
	ds = append(ds, delta.Delta{CorpID: "corp", MsgID: msgName(0), UID: n, ReadTime: base + 7, Source: delta.SourceLink, Counted: true},
		delta.Delta{CorpID: "corp", MsgID: msgName(0), UID: n + 1, ReadTime: base + 8, Source: delta.SourceLink, Counted: true})
	e.produce(t, ds...)
	testenv.WaitFor(t, 20*time.Second, "all rows read", func() bool { return countRead(t, e.db) == messages*n })
	e.waitCommittedToEnd(t)
	checkRows(t, e.db, messages, n)
	if got := testutil.ToFloat64(f.m.orphans); got != 2 {
		t.Errorf("orphans_total = %v; want 2", got)
	}
	if err := f.stop(t); err != nil {
		t.Errorf("Run = %v; want nil", err)
	}

	insertRecipients(t, e.db, "corp", msgName(0), n, n+2)
	if applied, err := ApplyOrphans(context.Background(), e.db, "corp", msgName(0)); err != nil || applied != 2 {
		t.Fatalf("ApplyOrphans = %d, %v; want 2, nil", applied, err)
	}
	rows := readRows(t, e.db, "corp", msgName(0))
	if got, want := rows[n+1], (row{read: true, at: base + 8, source: 3}); got != want {
		t.Errorf("orphan row %d = %+v; want %+v", n+1, got, want)
	}
}

// TestFlusherBatchSize: a message with more dirty uids than BatchSize is
// written in statements of at most BatchSize uids, full ones first.
func TestFlusherBatchSize(t *testing.T) {
	e := newKafkaEnv(t, 1)
	const n = 12000
	e.recipients(t, 1, n)
	e.produce(t, reads(1, n)...)
	f := e.start(t, Options{Interval: time.Hour}, nil) // only the size trigger and the drain flush
	testenv.WaitFor(t, 20*time.Second, "the size-triggered flushes", func() bool { return countRead(t, e.db) >= 10000 })
	if err := f.stop(t); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	checkRows(t, e.db, 1, n)
	total, full := 0, 0
	for _, b := range e.spy.batches() {
		if b > DefaultBatchSize {
			t.Errorf("statement of %d uids; want at most %d", b, DefaultBatchSize)
		}
		total += b
		if b == DefaultBatchSize {
			full++
		}
	}
	if total != n || full < 1 {
		t.Errorf("statements %v: %d uids, %d full; want %d uids, some full", e.spy.batches(), total, full, n)
	}
	if got := testutil.ToFloat64(f.m.batches); got != float64(len(e.spy.batches())) {
		t.Errorf("batches_total = %v; want %d", got, len(e.spy.batches()))
	}
}

// TestFlusherCrashReplay: a Flusher dies after writing rows but before
// committing; the next one replays every delta and changes nothing.
func TestFlusherCrashReplay(t *testing.T) {
	e := newKafkaEnv(t, 2)
	const messages, n = 2, 300
	e.recipients(t, messages, n)
	e.produce(t, reads(messages, n)...)
	first := e.start(t, Options{Interval: 100 * time.Millisecond}, func(f *Flusher) { f.skipCommit.Store(true) })
	testenv.WaitFor(t, 20*time.Second, "rows written", func() bool { return countRead(t, e.db) == messages*n })
	if err := first.stop(t); err != nil {
		t.Fatalf("first Run = %v; want nil", err)
	}
	for p, o := range e.committed(t) {
		if o != -1 {
			t.Fatalf("partition %d committed at %d by a Flusher that crashed before committing", p, o)
		}
	}
	// Later reads of the same uids arrive meanwhile: the first read_time stays.
	var later []delta.Delta
	for _, d := range reads(messages, n) {
		d.ReadTime += 600
		d.Source = delta.SourceReconcile
		later = append(later, d)
	}
	e.produce(t, later...)

	second := e.start(t, Options{Interval: 100 * time.Millisecond}, nil)
	e.waitCommittedToEnd(t)
	if err := second.stop(t); err != nil {
		t.Fatalf("second Run = %v; want nil", err)
	}
	checkRows(t, e.db, messages, n)
	if got := testutil.ToFloat64(second.m.updated); got != 0 {
		t.Errorf("replay updated %v rows; want 0", got)
	}
	if got := testutil.ToFloat64(second.m.orphans); got != 0 {
		t.Errorf("replay parked %v orphans; want 0", got)
	}
}

// TestFlusherMySQLDown: while every statement fails the Flusher retries,
// consumes up to MaxPending, pauses, and commits nothing; once MySQL is
// back every read is written and committed.
func TestFlusherMySQLDown(t *testing.T) {
	e := newKafkaEnv(t, 2)
	const messages, n, maxPending = 4, 100, 150
	e.recipients(t, messages, n)
	e.spy.fail.Store(true)
	f := e.start(t, Options{Interval: 50 * time.Millisecond, MaxPending: maxPending}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 20*time.Second, "pending reads at MaxPending", func() bool { return testutil.ToFloat64(f.m.pending) == maxPending })
	testenv.WaitFor(t, 20*time.Second, "retries", func() bool { return testutil.ToFloat64(f.m.retries) >= 3 })
	if got := testutil.ToFloat64(f.m.pending); got > maxPending {
		t.Errorf("pending = %v; want at most MaxPending %d", got, maxPending)
	}
	if got := countRead(t, e.db); got != 0 {
		t.Fatalf("%d rows read while MySQL fails", got)
	}
	for p, o := range e.committed(t) {
		if o > 0 {
			t.Fatalf("partition %d committed at %d while nothing was written", p, o)
		}
	}

	e.spy.fail.Store(false)
	testenv.WaitFor(t, 20*time.Second, "all rows read", func() bool { return countRead(t, e.db) == messages*n })
	e.waitCommittedToEnd(t)
	checkRows(t, e.db, messages, n)
	if err := f.stop(t); err != nil {
		t.Errorf("Run = %v; want nil", err)
	}
}

// TestFlusherTwoInstances: two members split 4 partitions; the second
// joins while the first is consuming. Every read lands, every partition is
// committed to its end.
func TestFlusherTwoInstances(t *testing.T) {
	e := newKafkaEnv(t, 4)
	const messages, n = 16, 50
	e.recipients(t, messages, n)
	all := reads(messages, n)
	half := len(all) / 2
	a := e.start(t, Options{Interval: 100 * time.Millisecond}, nil)
	e.produce(t, all[:half]...)
	testenv.WaitFor(t, 20*time.Second, "first member writing", func() bool { return countRead(t, e.db) > 0 })
	b := e.start(t, Options{Interval: 100 * time.Millisecond}, nil)
	testenv.WaitFor(t, 20*time.Second, "second member assigned", func() bool {
		g, ok := e.stable(2)
		for _, m := range g.Members {
			if c, assigned := m.Assigned.AsConsumer(); !assigned || len(c.Topics) == 0 || len(c.Topics[0].Partitions) == 0 {
				ok = false
			}
		}
		return ok
	})
	e.produce(t, all[half:]...)
	testenv.WaitFor(t, 20*time.Second, "all rows read", func() bool { return countRead(t, e.db) == messages*n })
	e.waitCommittedToEnd(t)
	checkRows(t, e.db, messages, n)
	if testutil.ToFloat64(b.m.batches) == 0 {
		t.Errorf("second member wrote nothing; want a share of the partitions")
	}
	var wg sync.WaitGroup
	for _, r := range []*running{a, b} {
		wg.Go(func() {
			if err := r.stop(t); err != nil {
				t.Errorf("Run = %v; want nil", err)
			}
		})
	}
	wg.Wait()
}

// stable describes the group and reports whether it is stable with
// members members.
func (e *kafkaEnv) stable(members int) (kadm.DescribedGroup, bool) {
	groups, err := e.adm.DescribeGroups(context.Background(), e.group)
	if err != nil {
		return kadm.DescribedGroup{}, false
	}
	g := groups[e.group]
	return g, g.State == "Stable" && len(g.Members) == members
}

// assigned returns the partitions the group gives member f, once the
// group is stable with members members.
func (e *kafkaEnv) assigned(t *testing.T, f *Flusher, members int) []int32 {
	t.Helper()
	var parts []int32
	testenv.WaitFor(t, 20*time.Second, "a stable group", func() bool {
		g, ok := e.stable(members)
		if !ok {
			return false
		}
		id, _ := f.cl.GroupMetadata()
		for _, m := range g.Members {
			if c, ok := m.Assigned.AsConsumer(); ok && m.MemberID == id {
				for _, tp := range c.Topics {
					parts = tp.Partitions
				}
			}
		}
		return len(parts) > 0
	})
	return parts
}

// TestFlusherRevokeFlushes: when a member gives partitions to a newcomer it
// first writes their pending reads and commits them, although no flush is
// due; the newcomer starts after them and writes nothing twice.
func TestFlusherRevokeFlushes(t *testing.T) {
	e := newKafkaEnv(t, 4)
	const messages, n = 16, 20
	e.recipients(t, messages, n)
	a := e.start(t, Options{Interval: time.Hour}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 20*time.Second, "reads consumed", func() bool { return testutil.ToFloat64(a.m.pending) == messages*n })
	b := e.start(t, Options{Interval: time.Hour}, nil)
	moved := e.assigned(t, b.Flusher, 2)
	ends := e.waitCommittedToEnd(t, moved...)
	want := 0
	for _, p := range moved {
		want += int(ends[p])
	}
	if got := countRead(t, e.db); got != want {
		t.Errorf("%d rows read after the revoke; want %d (the revoked partitions' reads)", got, want)
	}
	if got := testutil.ToFloat64(a.m.pending); got != float64(messages*n-want) {
		t.Errorf("first member still holds %v reads; want %d", got, messages*n-want)
	}
	for _, r := range []*running{a, b} {
		if err := r.stop(t); err != nil {
			t.Errorf("Run = %v; want nil", err)
		}
	}
	checkRows(t, e.db, messages, n)
	if got := testutil.ToFloat64(b.m.updated); got != 0 {
		t.Errorf("newcomer updated %v rows; want 0 (all were written before the handover)", got)
	}
}

// TestFlusherDrain: on cancel the Flusher writes what is pending although
// no flush is due yet, commits past malformed records, and returns nil.
func TestFlusherDrain(t *testing.T) {
	e := newKafkaEnv(t, 1)
	const messages, n = 2, 100
	e.recipients(t, messages, n)
	f := e.start(t, Options{Interval: time.Hour}, nil)
	e.produceRaw(t, "corp/x", []byte("not a delta"), nil,
		delta.Marshal(delta.Delta{CorpID: "corp", MsgID: "bad id", UID: 1, ReadTime: base}),
		delta.Marshal(delta.Delta{CorpID: "corp", MsgID: "m", UID: 1, ReadTime: 0}))
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 20*time.Second, "reads consumed", func() bool { return testutil.ToFloat64(f.m.pending) == messages*n })
	if got := countRead(t, e.db); got != 0 {
		t.Fatalf("%d rows read before the interval or the drain", got)
	}
	if err := f.stop(t); err != nil {
		t.Fatalf("Run = %v; want nil", err)
	}
	checkRows(t, e.db, messages, n)
	if got := testutil.ToFloat64(f.m.malformed); got != 4 {
		t.Errorf("malformed_total = %v; want 4", got)
	}
	committed, ends := e.offsets(t)
	if committed[0] != ends[0] {
		t.Errorf("committed %d; want the end offset %d", committed[0], ends[0])
	}
}

// kill stops r as kill -9 would, as far as MySQL and the group can tell:
// nothing more is written or committed, and it does not leave the group. A
// dynamic member's LeaveGroup on close is answered by kfake without acting
// on it; a static member sends none.
func (e *kafkaEnv) kill(t *testing.T, r *running, db *spyDB) {
	t.Helper()
	db.fail.Store(true)
	r.skipCommit.Store(true)
	e.cluster.ControlKey(int16(kmsg.LeaveGroup), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.LeaveGroupRequest)
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		for _, m := range req.Members {
			rm := kmsg.NewLeaveGroupResponseMember()
			rm.MemberID, rm.InstanceID = m.MemberID, m.InstanceID
			resp.Members = append(resp.Members, rm)
		}
		return resp, nil, true
	})
	_ = r.stop(t) // the drain fails: MySQL is "gone" with the process
}

// takeover runs a member that is killed after writing a first set of reads,
// then a replacement with opts, and returns how long the replacement took
// to write reads produced after the kill.
func takeover(t *testing.T, e *kafkaEnv, opts Options) time.Duration {
	t.Helper()
	const messages, n = 4, 100
	e.recipients(t, messages, n)
	all := reads(messages, n)
	var first, second []delta.Delta
	for _, d := range all {
		if d.UID < n/2 {
			first = append(first, d)
		} else {
			second = append(second, d)
		}
	}
	opts.Interval, opts.DrainTimeout = 100*time.Millisecond, 200*time.Millisecond
	dead := &spyDB{DB: e.db}
	a := e.startOn(t, dead, opts, nil)
	e.produce(t, first...)
	testenv.WaitFor(t, 20*time.Second, "first reads written", func() bool { return countRead(t, e.db) == len(first) })
	e.waitCommittedToEnd(t)
	e.kill(t, a, dead)

	e.produce(t, second...)
	start := time.Now()
	b := e.start(t, opts, nil)
	testenv.WaitFor(t, 20*time.Second, "reads after the kill written", func() bool { return countRead(t, e.db) == len(all) })
	took := time.Since(start)
	e.waitCommittedToEnd(t)
	checkRows(t, e.db, messages, n)
	if err := b.stop(t); err != nil {
		t.Errorf("replacement Run = %v; want nil", err)
	}
	return took
}

// TestFlusherSessionTimeout: a member killed without leaving holds its
// partitions until its session times out; Options.SessionTimeout sets that
// (franz-go's default would make the replacement wait 45 s).
func TestFlusherSessionTimeout(t *testing.T) {
	e := newKfakeEnv(t, 2, kfake.GroupMinSessionTimeout(100*time.Millisecond))
	const session = 2 * time.Second
	took := takeover(t, e, Options{SessionTimeout: session})
	t.Logf("replacement wrote the reads %v after starting (session timeout %v)", took, session)
	// The bound only tells the 2 s session from franz-go's 45 s, with room
	// for a loaded CI machine.
	if took > 30*time.Second {
		t.Errorf("replacement took %v; want about the %v session timeout, not franz-go's 45 s", took, session)
	}
}

// TestFlusherStaticMember: a replacement with the killed member's
// InstanceID takes the partitions back at once, long before the killed
// member's session would time out.
func TestFlusherStaticMember(t *testing.T) {
	e := newKfakeEnv(t, 2)
	const session = 30 * time.Second
	took := takeover(t, e, Options{SessionTimeout: session, InstanceID: "flushd-0"})
	t.Logf("replacement with the same instance id wrote the reads %v after starting (session timeout %v)", took, session)
	if took > session/3 {
		t.Errorf("replacement took %v; want it well inside the %v session timeout", took, session)
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no brokers", Options{Topic: "t", Group: "g"}, "brokers"},
		{"no topic", Options{Brokers: []string{"127.0.0.1:1"}, Group: "g"}, "topic"},
		{"no group", Options{Brokers: []string{"127.0.0.1:1"}, Topic: "t"}, "group"},
		{"batch too big", Options{Brokers: []string{"127.0.0.1:1"}, Topic: "t", Group: "g", BatchSize: MaxBatchSize + 1}, "batch size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(&spyDB{}, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New(%+v) = %v; want an error about %s", tt.opts, err, tt.want)
			}
		})
	}
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestFlusherFetchWait: flushd's fetches ask the broker to gather
// FetchMinBytes for up to FetchWait (DefaultFetchWait when left out), so a
// storm's produce batches do not each wake a fetch of their own.
func TestFlusherFetchWait(t *testing.T) {
	for _, c := range []struct {
		name   string
		wait   time.Duration
		wantMs int32
	}{
		{"default", 0, int32(DefaultFetchWait / time.Millisecond)},
		{"set", 50 * time.Millisecond, 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newKfakeEnv(t, 1)
			seen := make(chan *kmsg.FetchRequest, 1)
			e.cluster.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				e.cluster.KeepControl()
				select {
				case seen <- kreq.(*kmsg.FetchRequest):
				default:
				}
				return nil, nil, false
			})
			f, err := New(e.spy, Options{Brokers: e.brokers, Topic: e.topic, Group: e.group, FetchWait: c.wait})
			testenv.Check(t, "New", err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- f.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run = %v; want nil", err)
				}
			}()
			select {
			case req := <-seen:
				if req.MaxWaitMillis != c.wantMs || req.MinBytes != FetchMinBytes {
					t.Errorf("fetch waits %d ms for %d bytes; want %d ms for %d", req.MaxWaitMillis, req.MinBytes, c.wantMs, FetchMinBytes)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no fetch within 20 s")
			}
		})
	}
}
