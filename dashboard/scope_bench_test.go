package dashboard

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/tracker"
)

// subtreeDir is access's directory for the benchmark: department 4's
// subtree is the given bitmap.
type subtreeDir struct{ subtree *roaring.Bitmap }

func (d subtreeDir) DepartmentMembers(context.Context, string, []int64, bool) (*roaring.Bitmap, error) {
	return d.subtree.Clone(), nil
}
func (subtreeDir) Lookup(context.Context, string, string) (uint32, bool, error) { return 0, false, nil }
func (subtreeDir) Users(context.Context, string, []uint32) (map[uint32]yidu.User, error) {
	return nil, nil
}

// BenchmarkScopedCountsRedis is a scoped viewer's counts as /progress
// computes them (progress.Counts), on real Redis: the recipients, read and
// three signal bitmaps of a 1,000,000-recipient notice (70 % read) read
// from bitmap.Store and counted within a 10,000-person subtree (every
// 100th uid). It reports the p99 of one call.
func BenchmarkScopedCountsRedis(b *testing.B) {
	const n, every = 1_000_000, 100
	ctx := context.Background()
	rdb, prefix := testenv.Redis(b)
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix})
	testenv.Check(b, "bitmap.New", err)
	b.Cleanup(store.Close)
	m := yidu.Message{CorpID: "bench", MsgID: "big", App: "hr", AgentID: 1000002, Title: "t", SentAt: time.Now().Add(-time.Hour), Recipients: n}
	rec, read := roaring.New(), roaring.New()
	rec.AddRange(1, n+1)
	signals := map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: roaring.New(), yidu.SignalLink: roaring.New(), yidu.SignalEnterAgent: roaring.New()}
	r := rand.New(rand.NewPCG(1, 2))
	for uid := uint32(1); uid <= n; uid++ {
		if r.IntN(100) < 70 {
			read.Add(uid)
			signals[yidu.Signals()[r.IntN(3)]].Add(uid)
		}
	}
	testenv.Check(b, "RestoreReads", store.RestoreReads(ctx, m, rec, read, signals))
	subtree := roaring.New()
	for uid := uint32(1); uid <= n; uid += every {
		subtree.Add(uid)
	}
	acc, err := access.New(access.Config{}, subtreeDir{subtree}, time.Now)
	testenv.Check(b, "access.New", err)
	db := testenv.MySQL(b)
	mapper, err := idmap.New(db, idmap.Options{})
	testenv.Check(b, "idmap.New", err)
	reg, err := tracker.New(db, mapper, store, tracker.Options{})
	testenv.Check(b, "tracker.New", err)
	s, err := newServer(&archive{Registry: reg}, store, mapper, deps{Access: acc})
	testenv.Check(b, "New", err)
	p := access.NewPrincipal("v4", access.KindToken, false, []access.Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "bench", Departments: []int64{4}}}})
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		v, err := acc.View(ctx, p, m.CorpID, m.App)
		if err != nil {
			b.Fatal(err)
		}
		c, err := s.prog.Counts(ctx, m, v)
		if err != nil {
			b.Fatal(err)
		}
		if c.Recipients != n/every || c.BySignal.Button+c.BySignal.Link+c.BySignal.EnterAgent != c.Read {
			b.Fatalf("counts %+v", c)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}
