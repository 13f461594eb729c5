package flushd

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The tests in this file fail MySQL or Kafka under the Flusher at the
// points where a read could be lost: between park's SELECT and its
// INSERT, on offset commits, on a lost session, in a revoke and in the
// drain.

// beforeParkDB runs hook once, right before the first INSERT that parks
// orphans: after park's SELECT found them, before they are parked.
type beforeParkDB struct {
	DB
	once sync.Once
	hook func()
}

func (b *beforeParkDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if strings.HasPrefix(q, "INSERT INTO read_orphans") {
		b.once.Do(b.hook)
	}
	return b.DB.ExecContext(ctx, q, args...)
}

// TestParkAppliesRowsThatAppear: registration writes the recipient rows
// (and applies the orphans it finds: none yet) between park's SELECT and
// its INSERT. Only park's own ApplyOrphans then writes those reads; without
// it they would wait in read_orphans for a registration that never comes.
func TestParkAppliesRowsThatAppear(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 1) // uid 0 has its row; 1 and 2 not yet
	hooked := &beforeParkDB{DB: db, hook: func() {
		insertRecipients(t, db, "corp", "m1", 1, 3)
		if n, err := ApplyOrphans(ctx, db, "corp", "m1"); err != nil || n != 0 {
			t.Errorf("registration's ApplyOrphans before the park = %d, %v; want 0, nil", n, err)
		}
	}}
	w, err := NewWriter(hooked, WriterOptions{})
	testenv.Check(t, "NewWriter", err)
	reads := []Read{
		{UID: 0, At: base, Source: delta.SourceCard, Button: base},
		{UID: 1, At: base + 1, Source: delta.SourceLink, Link: base + 1},
		{UID: 2, Button: base + 2}, // a signal that does not count
	}
	updated, orphaned, err := w.Write(ctx, "corp", "m1", reads)
	if err != nil || updated != 1 || orphaned != 2 {
		t.Fatalf("Write = %d, %d, %v; want 1, 2, nil", updated, orphaned, err)
	}
	got := readRows(t, db, "corp", "m1")
	want := map[uint32]row{0: {true, base, 1}, 1: {true, base + 1, uint8(delta.SourceLink)}, 2: {}}
	for uid, w := range want {
		if got[uid] != w {
			t.Errorf("row %d = %+v; want %+v (the rows appeared before the park)", uid, got[uid], w)
		}
	}
	if s := signalRows(t, db, "corp", "m1"); s[2].button != base+2 || s[1].link != base+1 {
		t.Errorf("signal times = %+v; want uid 1 link and uid 2 button applied", s)
	}
	if n := orphanCount(t, db); n != 0 {
		t.Errorf("read_orphans keeps %d rows; want 0 (applied by the park)", n)
	}
}

// offsetCommitFails makes the next n OffsetCommit requests fail with code
// for every partition, as a coordinator refusing them would; it returns
// how many it failed so far.
func (e *kafkaEnv) offsetCommitFails(n int, code int16) *atomic.Int32 {
	var failed atomic.Int32
	e.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if int(failed.Load()) >= n {
			return nil, nil, false // the control is dropped: kfake answers
		}
		e.cluster.KeepControl()
		failed.Add(1)
		req := kreq.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &failed
}

// TestFlusherCommitFails: offset commits refused by the coordinator. The
// rows are written; the offsets are committed by a later flush once the
// coordinator accepts them again, never taken as committed before.
func TestFlusherCommitFails(t *testing.T) {
	e := newKfakeEnv(t, 2)
	const messages, n = 4, 50
	e.recipients(t, messages, n)
	const fails = 3
	failed := e.offsetCommitFails(fails, kerr.OffsetMetadataTooLarge.Code)
	f := e.start(t, Options{Interval: 100 * time.Millisecond}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 30*time.Second, "all rows read", func() bool { return countRead(t, e.db) == messages*n })
	e.waitCommittedToEnd(t)
	if got := failed.Load(); got != fails {
		t.Errorf("%d commits refused; want %d", got, fails)
	}
	if err := f.stop(t); err != nil {
		t.Errorf("Run = %v; want nil", err)
	}
	checkRows(t, e.db, messages, n)
}

// TestFlusherDrainCommitFails: a drain that writes everything but cannot
// commit returns the commit's error: the next owner replays those reads,
// and the caller must not report a clean stop.
func TestFlusherDrainCommitFails(t *testing.T) {
	e := newKfakeEnv(t, 1)
	const messages, n = 2, 50
	e.recipients(t, messages, n)
	f := e.start(t, Options{Interval: time.Hour}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 30*time.Second, "reads consumed", func() bool { return testutil.ToFloat64(f.m.pending) == messages*n })
	failed := e.offsetCommitFails(1<<20, kerr.OffsetMetadataTooLarge.Code)
	err := f.stop(t)
	if err == nil || !strings.Contains(err.Error(), "commit") || !errors.Is(err, kerr.OffsetMetadataTooLarge) {
		t.Errorf("Run with the final commit refused = %v; want the commit's error", err)
	}
	if failed.Load() == 0 {
		t.Errorf("no commit was attempted in the drain")
	}
	checkRows(t, e.db, messages, n)
	if c := e.committed(t); c[0] > 0 {
		t.Errorf("committed offset %d; want none past offset 0 (every commit refused)", c[0])
	}
}

// TestFlusherDrainWriteFails: MySQL down through the whole drain: Run says
// how many reads it left for replay, and commits none of them.
func TestFlusherDrainWriteFails(t *testing.T) {
	e := newKafkaEnv(t, 1)
	const messages, n = 2, 50
	e.recipients(t, messages, n)
	f := e.start(t, Options{Interval: time.Hour, DrainTimeout: 500 * time.Millisecond}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 30*time.Second, "reads consumed", func() bool { return testutil.ToFloat64(f.m.pending) == messages*n })
	e.spy.fail.Store(true)
	err := f.stop(t)
	if !errors.Is(err, errDown) || !strings.Contains(err.Error(), "100 reads left unwritten") {
		t.Errorf("Run with MySQL down in the drain = %v; want 100 reads left unwritten: %v", err, errDown)
	}
	if c := e.committed(t); c[0] > 0 {
		t.Errorf("committed offset %d after a failed drain; want none past offset 0 (nothing written)", c[0])
	}
	if got := countRead(t, e.db); got != 0 {
		t.Errorf("%d rows read; want 0", got)
	}
}

// TestFlusherRevokeWriteFails: a member that cannot write when its
// partitions are revoked hands them over uncommitted; the new owner
// replays and writes every read.
func TestFlusherRevokeWriteFails(t *testing.T) {
	e := newKafkaEnv(t, 4)
	const messages, n = 16, 20
	e.recipients(t, messages, n)
	dead := &spyDB{DB: e.db}
	a := e.startOn(t, dead, Options{Interval: time.Hour, DrainTimeout: 300 * time.Millisecond}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 30*time.Second, "reads consumed", func() bool { return testutil.ToFloat64(a.m.pending) == messages*n })
	dead.fail.Store(true)
	b := e.start(t, Options{Interval: 100 * time.Millisecond}, nil)
	moved := e.assigned(t, b.Flusher, 2)
	ends := e.waitCommittedToEnd(t, moved...)
	want := 0
	for _, p := range moved {
		want += int(ends[p])
	}
	testenv.WaitFor(t, 30*time.Second, "the moved partitions' rows", func() bool { return countRead(t, e.db) == want })
	if got := testutil.ToFloat64(b.m.updated); got != float64(want) {
		t.Errorf("new owner updated %v rows; want %d (every read of the moved partitions, replayed)", got, want)
	}
	if got := testutil.ToFloat64(a.m.pending); got != float64(messages*n-want) {
		t.Errorf("first member holds %v reads after the revoke; want %d (the revoked ones dropped)", got, messages*n-want)
	}
	_ = a.stop(t) // its drain fails: MySQL is down for it
	if err := b.stop(t); err != nil {
		t.Errorf("new owner's Run = %v; want nil", err)
	}
}

// TestFlusherSessionLost: the coordinator forgets the member (a heartbeat
// answered UNKNOWN_MEMBER_ID, as after a long pause). The partitions are
// lost: their pending reads are dropped uncommitted, the member rejoins
// and replays them, and every read is written once.
func TestFlusherSessionLost(t *testing.T) {
	e := newKfakeEnv(t, 2)
	const messages, n = 4, 25
	e.recipients(t, messages, n)
	logs := &testenv.SyncBuffer{}
	f := e.start(t, Options{Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(logs, nil))}, nil)
	e.produce(t, reads(messages, n)...)
	testenv.WaitFor(t, 30*time.Second, "reads consumed", func() bool { return testutil.ToFloat64(f.m.pending) == messages*n })
	var forgot atomic.Bool
	e.cluster.ControlKey(int16(kmsg.Heartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		resp := kreq.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		forgot.Store(true)
		return resp, nil, true
	})
	testenv.WaitFor(t, 30*time.Second, "the lost callback", func() bool {
		return strings.Contains(logs.String(), "partitions lost")
	})
	// Rejoined, it consumes the same records again from the start (nothing
	// was committed) and holds them once.
	testenv.WaitFor(t, 30*time.Second, "reads consumed again", func() bool {
		return testutil.ToFloat64(f.m.pending) == messages*n && len(e.assignedNow(t)) == 2
	})
	if c := e.committed(t); c[0] > 0 || c[1] > 0 {
		t.Errorf("committed %v after the loss; want nothing past offset 0 (no read was written)", c)
	}
	if err := f.stop(t); err != nil {
		t.Errorf("Run = %v; want nil", err)
	}
	checkRows(t, e.db, messages, n)
	if got := testutil.ToFloat64(f.m.updated); got != messages*n {
		t.Errorf("updated %v rows; want %d (each read once)", got, messages*n)
	}
	if !forgot.Load() {
		t.Errorf("no heartbeat was answered UNKNOWN_MEMBER_ID")
	}
}

// assignedNow returns the partitions the group's members hold now.
func (e *kafkaEnv) assignedNow(tb testing.TB) []int32 {
	tb.Helper()
	g, ok := e.stable(1)
	if !ok {
		return nil
	}
	var out []int32
	for _, m := range g.Members {
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				out = append(out, t.Partitions...)
			}
		}
	}
	return out
}

// TestLostDropsPending: the lost callback forgets exactly the lost
// partitions of its topic (their reads, their lag series) and commits
// nothing: the group has given them to another member.
func TestLostDropsPending(t *testing.T) {
	f, err := New(&spyDB{}, Options{Brokers: []string{"127.0.0.1:1"}, Topic: "yidu.reads", Group: "g"})
	testenv.Check(t, "New", err)
	defer f.Close()
	now := time.Now()
	for part := range int32(3) {
		for uid := range uint32(10) {
			f.p.add(part, kgo.EpochOffset{Offset: int64(uid)}, delta.Delta{CorpID: "corp", MsgID: msgName(int(part)), UID: uid, ReadTime: base, Source: delta.SourceCard, Counted: true}, now)
		}
		f.m.lag.WithLabelValues(strconv.Itoa(int(part))).Set(1)
	}
	f.lost(context.Background(), nil, map[string][]int32{"yidu.reads": {0, 2}, "other": {1}})
	if got := testutil.ToFloat64(f.m.pending); got != 10 {
		t.Errorf("pending gauge after losing 2 of 3 partitions = %v; want 10", got)
	}
	if got := f.p.uids; got != 10 {
		t.Errorf("pending reads = %d; want 10 (partition 1's)", got)
	}
	if b := f.p.of([]int32{1}); len(b) != 1 || b[0].b.uids.GetCardinality() != 10 {
		t.Errorf("partition 1 batches = %v; want its 10 reads kept", b)
	}
	if n := testutil.CollectAndCount(f.m.lag); n != 1 {
		t.Errorf("%d lag series after the loss; want 1 (partition 1)", n)
	}
	f.lost(context.Background(), nil, map[string][]int32{"other": {1}})
	if got := f.p.uids; got != 10 {
		t.Errorf("pending reads after another topic's loss = %d; want 10", got)
	}
}
