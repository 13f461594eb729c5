package flushd

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/delta"
)

func at(off int64) kgo.EpochOffset { return kgo.EpochOffset{Epoch: 0, Offset: off} }

func d(msgID string, uid uint32, t int64) delta.Delta {
	return delta.Delta{CorpID: "corp", MsgID: msgID, UID: uid, ReadTime: t, Source: delta.SourceCard, Counted: true}
}

// TestCommitPoints: a partition is never committed past a delta that is
// not written, and is committed to the end once everything is.
func TestCommitPoints(t *testing.T) {
	type step func(p *pending)
	add := func(part int32, off int64, msgID string) step {
		return func(p *pending) { p.add(part, at(off), d(msgID, uint32(off), base), time.Time{}) }
	}
	skip := func(part int32, off int64) step { return func(p *pending) { p.skip(part, at(off)) } }
	written := func(part int32, msgID string) step {
		return func(p *pending) { p.written(part, msgKey{"corp", msgID}) }
	}
	committed := func(part int32, off int64) step {
		return func(p *pending) { p.committed(map[int32]kgo.EpochOffset{part: at(off)}) }
	}
	tests := []struct {
		name  string
		steps []step
		want  map[int32]int64
	}{
		{"nothing consumed", nil, map[int32]int64{}},
		{"one pending", []step{add(0, 0, "a")}, map[int32]int64{0: 0}},
		{"written", []step{add(0, 0, "a"), add(0, 1, "a"), written(0, "a")}, map[int32]int64{0: 2}},
		{"earlier message unwritten", []step{add(0, 0, "a"), add(0, 1, "b"), written(0, "b")}, map[int32]int64{0: 0}},
		{"later message unwritten", []step{add(0, 0, "a"), add(0, 1, "b"), written(0, "a")}, map[int32]int64{0: 1}},
		{"malformed only", []step{skip(0, 0), skip(0, 1)}, map[int32]int64{0: 2}},
		{"malformed after pending", []step{add(0, 0, "a"), skip(0, 1)}, map[int32]int64{0: 0}},
		{"partitions independent", []step{add(0, 0, "a"), add(1, 5, "a"), written(1, "a")}, map[int32]int64{0: 0, 1: 6}},
		{"already committed", []step{add(0, 0, "a"), written(0, "a"), committed(0, 1)}, map[int32]int64{}},
		{"new batch after flush", []step{add(0, 0, "a"), written(0, "a"), add(0, 1, "a"), add(0, 2, "a")}, map[int32]int64{0: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPending()
			for _, s := range tt.steps {
				s(p)
			}
			got := map[int32]int64{}
			for n, o := range p.commitPoints(nil) {
				got[n] = o.Offset
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("commitPoints = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestPendingFirstRead(t *testing.T) {
	p := newPending()
	p.add(0, at(0), d("a", 7, base+60), time.Time{})
	p.add(0, at(1), d("a", 7, base), time.Time{})    // earlier read arrives later: it wins
	p.add(0, at(2), d("a", 7, base+90), time.Time{}) // later one never does
	p.add(0, at(3), d("a", 3, base+5), time.Time{})
	// Signals that do not count keep their own first times only; a later
	// counted read of another signal does not displace the earliest.
	enter := delta.Delta{CorpID: "corp", MsgID: "a", UID: 7, ReadTime: base - 100, Source: delta.SourceEnterAgent}
	p.add(0, at(4), enter, time.Time{})
	enter.ReadTime = base - 200
	p.add(0, at(5), enter, time.Time{})
	link := delta.Delta{CorpID: "corp", MsgID: "a", UID: 3, ReadTime: base + 1, Source: delta.SourceLink, Counted: true}
	p.add(0, at(6), link, time.Time{})
	only := delta.Delta{CorpID: "corp", MsgID: "a", UID: 9, ReadTime: base + 2, Source: delta.SourceEnterAgent}
	p.add(0, at(7), only, time.Time{})
	if p.uids != 3 {
		t.Errorf("pending uids = %d; want 3", p.uids)
	}
	got := p.parts[0].batches[msgKey{"corp", "a"}].reads()
	want := []Read{
		{UID: 3, At: base + 1, Source: delta.SourceLink, Button: base + 5, Link: base + 1},
		{UID: 7, At: base, Source: delta.SourceCard, Button: base, EnterAgent: base - 200},
		{UID: 9, EnterAgent: base + 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reads = %+v; want %+v", got, want)
	}
	p.drop([]int32{0})
	if p.uids != 0 || len(p.parts) != 0 {
		t.Errorf("after drop: %d uids, %d partitions; want none", p.uids, len(p.parts))
	}
}

// TestDue runs the flush triggers on a fake clock: size at once, age after
// the interval, counted from each batch's first read.
func TestDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const interval = time.Minute
		p := newPending()
		p.add(0, at(0), d("old", 1, base), time.Now())
		time.Sleep(40 * time.Second)
		p.add(0, at(1), d("young", 1, base), time.Now())
		for uid := range uint32(3) {
			p.add(1, at(int64(uid)), d("full", uid, base), time.Now())
		}
		names := func(ds []dueBatch) map[string]bool {
			out := map[string]bool{}
			for _, b := range ds {
				out[b.key.msgID] = true
			}
			return out
		}
		if got := names(p.due(time.Now(), interval, 3, false)); !maps.Equal(got, map[string]bool{"full": true}) {
			t.Errorf("due at 40s = %v; want only the full batch", got)
		}
		next, ok := p.nextDue(interval)
		if want := time.Now().Add(20 * time.Second); !ok || !next.Equal(want) {
			t.Errorf("nextDue = %v, %v; want %v (the old batch)", next, ok, want)
		}
		time.Sleep(20 * time.Second)
		if got := names(p.due(time.Now(), interval, 3, false)); !maps.Equal(got, map[string]bool{"full": true, "old": true}) {
			t.Errorf("due at 60s = %v; want full and old", got)
		}
		if got := len(p.due(time.Now(), interval, 3, true)); got != 3 {
			t.Errorf("due(all) = %d batches; want 3", got)
		}
	})
}

func TestBackoffDelay(t *testing.T) {
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	tests := []struct {
		n    int
		want time.Duration
	}{{1, 100 * time.Millisecond}, {2, 200 * time.Millisecond}, {4, 800 * time.Millisecond}, {5, time.Second}, {60, time.Second}}
	for _, tt := range tests {
		if got := b.delay(tt.n); got != tt.want {
			t.Errorf("delay(%d) = %v; want %v", tt.n, got, tt.want)
		}
	}
}

func TestBackoffWaitJittered(t *testing.T) {
	tests := []struct {
		rnd  float64
		want time.Duration
	}{{0, 400 * time.Millisecond}, {0.5, 600 * time.Millisecond}, {1, 800 * time.Millisecond}}
	for _, tt := range tests {
		b := backoff{min: 100 * time.Millisecond, max: time.Second, rnd: func() float64 { return tt.rnd }}
		if got := b.wait(4); got != tt.want {
			t.Errorf("wait(4) with rnd %v = %v; want %v (in [delay/2, delay])", tt.rnd, got, tt.want)
		}
	}
	b := backoff{min: 100 * time.Millisecond, max: time.Second}
	for range 100 {
		if got := b.wait(4); got < 400*time.Millisecond || got > 800*time.Millisecond {
			t.Fatalf("wait(4) = %v; want within [400ms, 800ms]", got)
		}
	}
}

// TestRetry checks the capped backoff between attempts and that retry
// gives up when its context (the drain deadline) ends.
func TestRetry(t *testing.T) {
	// The jitter pinned at its top: the waits are the full backoff.
	b := backoff{min: 100 * time.Millisecond, max: 400 * time.Millisecond, rnd: func() float64 { return 1 }}
	t.Run("succeeds after failures", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			var attempts []time.Duration
			err := retry(context.Background(), b, func() error {
				attempts = append(attempts, time.Since(start))
				if len(attempts) < 5 {
					return errDown
				}
				return nil
			}, func(error) {})
			want := []time.Duration{0, 100, 300, 700, 1100} // waits 100, 200, 400, 400 ms
			if err != nil || len(attempts) != len(want) {
				t.Fatalf("retry = %v after %v; want nil after %d attempts", err, attempts, len(want))
			}
			for i, w := range want {
				if attempts[i] != w*time.Millisecond {
					t.Errorf("attempt %d at %v; want %v", i, attempts[i], w*time.Millisecond)
				}
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			retries := 0
			err := retry(ctx, b, func() error { return errDown }, func(error) { retries++ })
			if !errors.Is(err, errDown) {
				t.Errorf("retry = %v; want the last error", err)
			}
			if el := time.Since(start); el != time.Second {
				t.Errorf("retry gave up after %v; want at the 1s deadline", el)
			}
			if retries != 4 { // attempts at 0, 100, 300, 700 ms; the deadline cuts the 4th wait
				t.Errorf("retries = %d; want 4", retries)
			}
		})
	})
}
