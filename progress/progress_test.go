package progress

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// fakeBitmaps is Redis that lost a message's keys until RestoreReads
// (or, with lose, keeps losing them).
type fakeBitmaps struct {
	mu       sync.Mutex
	rec      *roaring.Bitmap
	read     *roaring.Bitmap
	signals  map[yidu.Signal]*roaring.Bitmap
	lose     bool
	restores atomic.Int32
}

func (f *fakeBitmaps) present() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rec != nil
}

func (f *fakeBitmaps) CountsBySignal(_ context.Context, _, _ string) (int64, int64, yidu.SignalCounts, bool, error) {
	return f.CountsWithin(context.Background(), "", "", nil)
}

func (f *fakeBitmaps) CountsWithin(_ context.Context, _, _ string, scope *roaring.Bitmap) (int64, int64, yidu.SignalCounts, bool, error) {
	if !f.present() {
		return 0, 0, yidu.SignalCounts{}, false, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.rec.Clone()
	if scope != nil {
		rec.And(scope)
	}
	by := yidu.SignalCounts{Button: int64(f.signals[yidu.SignalButton].AndCardinality(rec))}
	return int64(rec.GetCardinality()), int64(f.read.AndCardinality(rec)), by, true, nil
}

func (f *fakeBitmaps) ReadBitmap(context.Context, string, string) (*roaring.Bitmap, bool, error) {
	if !f.present() {
		return nil, false, nil
	}
	return f.read.Clone(), true, nil
}

func (f *fakeBitmaps) RecipientBitmap(context.Context, string, string) (*roaring.Bitmap, bool, error) {
	if !f.present() {
		return nil, false, nil
	}
	return f.rec.Clone(), true, nil
}

func (f *fakeBitmaps) RestoreReads(_ context.Context, _ yidu.Message, rec, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error {
	f.restores.Add(1)
	time.Sleep(10 * time.Millisecond) // long enough for concurrent callers to share it
	if f.lose {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rec, f.read, f.signals = rec, read, signals
	return nil
}

// fakeArchive is MySQL: recipients 1..4, 1 and 2 read (1 by button).
type fakeArchive struct{ missing bool }

func (a fakeArchive) LoadReads(_ context.Context, corpID, msgID string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap, bool, error) {
	if a.missing {
		return yidu.Message{}, nil, nil, nil, false, nil
	}
	return yidu.Message{CorpID: corpID, MsgID: msgID}, roaring.BitmapOf(1, 2, 3, 4), roaring.BitmapOf(1, 2),
		map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: roaring.BitmapOf(1)}, true, nil
}

func (fakeArchive) ReadTimes(_ context.Context, _, _ string, uids []uint32) (map[uint32]time.Time, error) {
	t0 := time.Date(2026, 3, 1, 9, 0, 30, 0, time.UTC)
	out := map[uint32]time.Time{}
	for _, u := range uids {
		out[u] = t0.Add(time.Duration(u) * time.Minute)
	}
	return out, nil
}

var msg = yidu.Message{CorpID: "c", MsgID: "m"}

// TestCountsRestoreOnce: sixteen viewers asking at once after Redis lost
// the keys share one restore, and all see MySQL's numbers, each signal's
// included.
func TestCountsRestoreOnce(t *testing.T) {
	b := &fakeBitmaps{}
	p, err := New(fakeArchive{}, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			c, err := p.Counts(context.Background(), msg, access.Everyone)
			if err == nil && (c.Recipients != 4 || c.Read != 2 || c.BySignal.Button != 1) {
				err = errors.New("wrong counts")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := b.restores.Load(); n != 1 {
		t.Errorf("%d restores; want 1 shared by every viewer", n)
	}
}

func TestMisses(t *testing.T) {
	tests := []struct {
		name    string
		archive fakeArchive
		lose    bool
		want    error
	}{
		{"not in MySQL", fakeArchive{missing: true}, false, yidu.ErrNotFound},
		{"Redis keeps losing the keys", fakeArchive{}, true, ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.archive, &fakeBitmaps{lose: tt.lose}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.Counts(context.Background(), msg, access.Everyone); !errors.Is(err, tt.want) {
				t.Errorf("Counts = %v; want %v", err, tt.want)
			}
			if _, _, err := p.Bitmaps(context.Background(), msg, access.Everyone); !errors.Is(err, tt.want) {
				t.Errorf("Bitmaps = %v; want %v", err, tt.want)
			}
		})
	}
}

// TestRecalledFrozen: for everyone a recalled notice's recipients and
// read are those at its recall; the signals stay live.
func TestRecalledFrozen(t *testing.T) {
	p, err := New(fakeArchive{}, &fakeBitmaps{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := msg
	m.RecalledAt, m.Recipients, m.ReadAtRecall = time.Now(), 4, 1
	c, err := p.Counts(context.Background(), m, access.Everyone)
	if err != nil || c.Recipients != 4 || c.Read != 1 || c.BySignal.Button != 1 {
		t.Errorf("Counts of a recalled notice = %+v, %v; want 4 recipients, 1 read (frozen), button 1", c, err)
	}
}

// TestCurve: reads per minute of the readers' times.
func TestCurve(t *testing.T) {
	p, err := New(fakeArchive{}, &fakeBitmaps{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Curve(context.Background(), msg, access.Everyone)
	if err != nil || len(got) != 2 || got[0].Reads != 1 || !got[0].Minute.Equal(time.Date(2026, 3, 1, 9, 1, 0, 0, time.UTC)) {
		t.Errorf("Curve = %+v, %v; want one read at 09:01 and one at 09:02", got, err)
	}
}
