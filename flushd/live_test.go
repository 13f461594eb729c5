package flushd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// fakeLive is Redis's live view as flushd sees it: it records every bit
// it is asked to set, and fails while down is set.
type fakeLive struct {
	mu      sync.Mutex
	down    bool
	calls   int
	read    map[string]*roaring.Bitmap
	signals map[string]map[yidu.Signal]*roaring.Bitmap
}

func newFakeLive() *fakeLive {
	return &fakeLive{read: map[string]*roaring.Bitmap{}, signals: map[string]map[yidu.Signal]*roaring.Bitmap{}}
}

var errRedisDown = errors.New("test: redis is down")

func (l *fakeLive) Heal(_ context.Context, corpID, msgID string, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.down {
		return 0, errRedisDown
	}
	k := corpID + "/" + msgID
	if l.read[k] == nil {
		l.read[k] = roaring.New()
		l.signals[k] = map[yidu.Signal]*roaring.Bitmap{}
	}
	l.read[k].Or(read)
	for sig, b := range signals {
		if l.signals[k][sig] == nil {
			l.signals[k][sig] = roaring.New()
		}
		l.signals[k][sig].Or(b)
	}
	return int(read.GetCardinality()), nil
}

func (l *fakeLive) setDown(v bool) {
	l.mu.Lock()
	l.down = v
	l.mu.Unlock()
}

// bits returns how many read bits and signal sig bits message msgID has.
func (l *fakeLive) bits(msgID string, sig yidu.Signal) (read, signal uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := "corp/" + msgID
	if l.read[k] != nil {
		read = l.read[k].GetCardinality()
	}
	if b := l.signals[k][sig]; b != nil {
		signal = b.GetCardinality()
	}
	return read, signal
}

// TestFlusherSetsWrittenBits: every row flushd writes gets its bits in the
// live view — the read bit only for a counted signal, the signal bit for
// every signal — and a live view that is down holds back MySQL's writes
// but not the commits: a crash meanwhile replays the deltas, whose replay
// sets the bits, instead of leaving them to yidu reconcile. Once it is
// back, the bits are set and the offsets committed.
func TestFlusherSetsWrittenBits(t *testing.T) {
	e := newKafkaEnv(t, 2)
	const messages, n = 2, 100
	e.recipients(t, messages, n)
	lv := newFakeLive()
	f := e.start(t, Options{Interval: 50 * time.Millisecond, Live: lv}, nil)

	ds := reads(messages, n)
	// enter_agent on message 0 that does not count: signal bit only.
	for uid := range uint32(10) {
		ds = append(ds, delta.Delta{CorpID: "corp", MsgID: msgName(0), UID: uid, ReadTime: base + 1, Source: delta.SourceEnterAgent})
	}
	e.produce(t, ds...)
	testenv.WaitFor(t, 20*time.Second, "live view has every written bit", func() bool {
		r0, b0 := lv.bits(msgName(0), yidu.SignalButton)
		_, e0 := lv.bits(msgName(0), yidu.SignalEnterAgent)
		r1, b1 := lv.bits(msgName(1), yidu.SignalButton)
		return r0 == n && b0 == n && e0 == 10 && r1 == n && b1 == n
	})

	// Redis down: MySQL goes on; the bits and the commits wait.
	lv.setDown(true)
	const m2 = 2
	insertRecipients(t, e.db, "corp", msgName(m2), 0, n)
	var late []delta.Delta
	for uid := range uint32(n) {
		late = append(late, delta.Delta{CorpID: "corp", MsgID: msgName(m2), UID: uid, ReadTime: base + int64(uid), Source: delta.SourceLink, Counted: true})
	}
	e.produce(t, late...)
	testenv.WaitFor(t, 20*time.Second, "rows written while the live view is down", func() bool { return countRead(t, e.db) == (messages+1)*n })
	testenv.WaitFor(t, 20*time.Second, "failed heals", func() bool { return testutil.ToFloat64(f.lm.errors) >= 2 })
	_, ends := e.offsets(t)
	behind := false
	for p, c := range e.committed(t) {
		behind = behind || (ends[p] != 0 && c < ends[p]) // an empty partition has nothing to commit
	}
	if !behind {
		t.Errorf("offsets committed to the end %v while Redis lacks written bits; want them held back", ends)
	}
	if r, _ := lv.bits(msgName(m2), yidu.SignalLink); r != 0 {
		t.Fatalf("bits set while down: %d", r)
	}
	if got := testutil.ToFloat64(f.lm.backlog); got != 2*n {
		t.Errorf("backlog = %v; want %d (read + link bit per uid)", got, 2*n)
	}

	lv.setDown(false)
	testenv.WaitFor(t, 20*time.Second, "bits set once the live view is back", func() bool {
		r, l := lv.bits(msgName(m2), yidu.SignalLink)
		return r == n && l == n
	})
	testenv.WaitFor(t, 20*time.Second, "backlog empty", func() bool { return testutil.ToFloat64(f.lm.backlog) == 0 })
	e.waitCommittedToEnd(t)
	if err := f.stop(t); err != nil {
		t.Errorf("Run = %v; want nil", err)
	}
}

// TestLiveBacklogBounded: a backlog over its bound drops the oldest bits
// (counted), never grows past it, and a put back merges.
func TestLiveBacklogBounded(t *testing.T) {
	m, err := newLiveMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	l := newLive(10)
	k1, k2 := msgKey{"corp", "a"}, msgKey{"corp", "b"}
	rs := func(from, to uint32) []Read {
		var out []Read
		for u := from; u < to; u++ {
			out = append(out, Read{UID: u, At: base, Source: delta.SourceCard, Button: base})
		}
		return out
	}
	l.add(k1, rs(0, 3), m) // 6 bits
	if l.uids != 6 {
		t.Fatalf("uids = %d; want 6", l.uids)
	}
	l.add(k1, rs(2, 4), m) // uid 2 again: +2
	if l.uids != 8 {
		t.Fatalf("uids = %d; want 8", l.uids)
	}
	l.add(k2, rs(0, 2), m) // 4 more: over 10, the old backlog goes
	if l.uids != 4 || len(l.msgs) != 1 || testutil.ToFloat64(m.dropped) != 8 {
		t.Fatalf("after overflow: uids %d, msgs %d, dropped %v; want 4, 1, 8", l.uids, len(l.msgs), testutil.ToFloat64(m.dropped))
	}
	now := time.Now()
	todo := l.take(now)
	if len(todo) != 1 || l.uids != 0 {
		t.Fatalf("take = %d msgs, left %d", len(todo), l.uids)
	}
	l.add(k2, rs(1, 3), m) // uid 1 again, uid 2 new: 4 bits
	l.putBack(todo, now, backoff{min: time.Second, max: time.Second}, m)
	if l.uids != 6 {
		t.Errorf("after put back: uids = %d; want 6 (uids 0-2, read + button)", l.uids)
	}
	if l.take(now) != nil {
		t.Error("take during backoff returned the backlog")
	}
	if got := l.take(now.Add(2 * time.Second)); len(got) != 1 || got[k2].read.GetCardinality() != 3 {
		t.Errorf("take after backoff = %v", got)
	}
}

// fakeMembers maps "u-<n>" to uid n, anything else is unknown; it fails
// while down.
type fakeMembers struct {
	mu   sync.Mutex
	down bool
}

func (m *fakeMembers) Lookup(_ context.Context, _, userID string) (uint32, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, false, errDown
	}
	var n uint32
	if _, err := fmt.Sscanf(userID, "u-%d", &n); err != nil {
		return 0, false, nil
	}
	return n, true, nil
}

// TestFlusherMapsUserIDs: deltas that name their member by UserID (taken
// while MySQL could not map it) are written once flushd can map them —
// not before, and their offsets are not committed before — merged with
// the same member's uid deltas (earliest read kept); an unknown UserID is
// dropped and counted; the live view gets the mapped uids' bits.
func TestFlusherMapsUserIDs(t *testing.T) {
	e := newKafkaEnv(t, 1)
	const n = 20
	e.recipients(t, 1, n)
	members := &fakeMembers{down: true}
	lv := newFakeLive()
	f := e.start(t, Options{Interval: 50 * time.Millisecond, Live: lv, Members: members}, nil)
	var ds []delta.Delta
	for uid := range uint32(n) {
		ds = append(ds, delta.Delta{CorpID: "corp", MsgID: msgName(0), UserID: fmt.Sprintf("u-%d", uid), ReadTime: base + int64(uid), Source: delta.SourceCard, Counted: true})
	}
	// uid 3 also by uid, later: the earlier read by UserID wins.
	ds = append(ds, delta.Delta{CorpID: "corp", MsgID: msgName(0), UID: 3, ReadTime: base + 100, Source: delta.SourceLink, Counted: true},
		delta.Delta{CorpID: "corp", MsgID: msgName(0), UserID: "ghost", ReadTime: base, Source: delta.SourceCard, Counted: true})
	e.produce(t, ds...)
	testenv.WaitFor(t, 20*time.Second, "failed flushes while the UserIDs cannot be mapped", func() bool { return testutil.ToFloat64(f.m.retries) >= 2 })
	if got := countRead(t, e.db); got != 0 {
		t.Fatalf("%d rows read before the UserIDs could be mapped", got)
	}
	for p, o := range e.committed(t) {
		if o > 0 {
			t.Fatalf("partition %d committed at %d before anything was written", p, o)
		}
	}
	members.mu.Lock()
	members.down = false
	members.mu.Unlock()
	testenv.WaitFor(t, 20*time.Second, "rows read", func() bool { return countRead(t, e.db) == n })
	e.waitCommittedToEnd(t)
	checkRows(t, e.db, 1, n)
	if got := testutil.ToFloat64(f.lm.unknownUsers); got != 1 {
		t.Errorf("unknown_userids_total = %v; want 1", got)
	}
	testenv.WaitFor(t, 20*time.Second, "bits of the mapped uids", func() bool {
		r, b := lv.bits(msgName(0), yidu.SignalButton)
		return r == n && b == n
	})
	if err := f.stop(t); err != nil {
		t.Errorf("Run = %v; want nil", err)
	}
}
