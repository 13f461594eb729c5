package bitmap

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestCountsWithin checks CountsWithin against roaring's intersections
// for scopes of every shape: empty, disjoint, past the recipients' end,
// every member, scattered; and a message not in Redis.
func TestCountsWithin(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	const n = 20_000
	m := testMessage("within", 7, time.Now())
	rec, read := roaring.New(), roaring.New()
	rec.AddRange(1, n+1)
	signals := map[yidu.Signal]*roaring.Bitmap{}
	for _, sig := range yidu.Signals() {
		signals[sig] = roaring.New()
	}
	r := rand.New(rand.NewPCG(3, 4))
	for uid := uint32(1); uid <= n; uid++ {
		if r.IntN(10) < 6 {
			read.Add(uid)
			signals[yidu.Signals()[r.IntN(yidu.NumSignals)]].Add(uid)
		}
		if r.IntN(10) == 0 { // opened the app too
			signals[yidu.SignalEnterAgent].Add(uid)
		}
	}
	// A stray read bit outside the recipients never counts.
	read.Add(n + 5)
	testenv.Check(t, "RestoreReads", s.RestoreReads(ctx, m, rec, read, signals))
	scattered := roaring.New()
	for uid := uint32(0); uid < n+100; uid += 97 {
		scattered.Add(uid)
	}
	for _, tc := range []struct {
		name  string
		scope *roaring.Bitmap
	}{
		{"empty", roaring.New()},
		{"disjoint", roaring.BitmapOf(n+1, n+2, 1<<30)},
		{"the stray bit", roaring.BitmapOf(n + 5)},
		{"everyone", rec.Clone()},
		{"scattered", scattered},
		{"uid 0 and the first byte", roaring.BitmapOf(0, 1, 2, 7, 8)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotRec, gotRead, gotBy, found, err := s.CountsWithin(ctx, testCorp, "within", tc.scope)
			if err != nil || !found {
				t.Fatalf("CountsWithin = %v, %v", found, err)
			}
			in := roaring.And(rec, tc.scope)
			var wantBy yidu.SignalCounts
			for sig, b := range signals {
				wantBy.Set(sig, int64(b.AndCardinality(in)))
			}
			if gotRec != int64(in.GetCardinality()) || gotRead != int64(read.AndCardinality(in)) || gotBy != wantBy {
				t.Errorf("CountsWithin = %d, %d, %+v; want %d, %d, %+v", gotRec, gotRead, gotBy,
					in.GetCardinality(), read.AndCardinality(in), wantBy)
			}
		})
	}
	if _, _, _, found, err := s.CountsWithin(ctx, testCorp, "missing", scattered); err != nil || found {
		t.Errorf("CountsWithin of a message not in Redis = found %v, %v; want not found", found, err)
	}
}
