package access_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// memDir is a directory of n members whose department 4's subtree is
// every 100th uid (a subtree's members are scattered through the uid
// space: uids are handed out in order of first sight, not by department).
type memDir struct{ subtree *roaring.Bitmap }

func (d memDir) DepartmentMembers(context.Context, string, []int64, bool) (*roaring.Bitmap, error) {
	return d.subtree.Clone(), nil
}
func (memDir) Lookup(context.Context, string, string) (uint32, bool, error) { return 0, false, nil }
func (memDir) Users(context.Context, string, []uint32) (map[uint32]yidu.User, error) {
	return nil, nil
}

// BenchmarkScopedProgress is the scope's share of /progress for a viewer
// of a 10,000-person subtree on a 1,000,000-recipient notice: resolve the
// View (cached bitmap) and count recipients, reads and three signals
// within it. It reports the p99 of one progress's scope work.
func BenchmarkScopedProgress(b *testing.B) {
	const n, every = 1_000_000, 100
	recipients, read := roaring.New(), roaring.New()
	recipients.AddRange(0, n)
	signals := []*roaring.Bitmap{roaring.New(), roaring.New(), roaring.New()}
	r := rand.New(rand.NewPCG(1, 2))
	for uid := range uint32(n) {
		if r.IntN(100) < 70 { // 70 % read
			read.Add(uid)
			signals[r.IntN(3)].Add(uid)
		}
	}
	for _, bm := range append([]*roaring.Bitmap{recipients, read}, signals...) {
		bm.RunOptimize()
	}
	subtree := roaring.New()
	for uid := uint32(0); uid < n; uid += every {
		subtree.Add(uid)
	}
	a, err := access.New(access.Config{}, memDir{subtree: subtree}, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	p := access.NewPrincipal("leader", access.KindWeCom, false, []access.Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp, Departments: []int64{4}}}})
	ctx := context.Background()
	times := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		v, err := a.View(ctx, p, corp, "hr")
		if err != nil {
			b.Fatal(err)
		}
		if v.Count(recipients) != n/every {
			b.Fatal("wrong recipients in scope")
		}
		_ = v.Count(read)
		for _, s := range signals {
			_ = v.Count(s)
		}
		times = append(times, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds()), "p99-µs")
}
