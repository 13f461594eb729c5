package idmap_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
)

// BenchmarkLookupHit: parallel cached lookups over 100k UserIDs, spelt as
// stored and in another case (folded into a stack buffer: no allocation).
func BenchmarkLookupHit(b *testing.B) {
	m, _ := newTestMapper(b)
	const n = 100_000
	ids := make([]string, n)
	upper := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%06d", i)
		upper[i] = strings.ToUpper(ids[i])
	}
	for start := 0; start < n; start += 10_000 {
		mustAssign(b, m, "corp", ids[start:start+10_000]...)
	}
	ctx := context.Background()
	for name, lookup := range map[string][]string{"as stored": ids, "other case": upper} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if _, ok, err := m.Lookup(ctx, "corp", lookup[i%n]); !ok || err != nil {
						b.Errorf("Lookup: %v, %v", ok, err)
						return
					}
					i += 7919
				}
			})
		})
	}
}

// BenchmarkAssign1000New: one Assign of 1000 UserIDs never seen before (one
// transaction) per iteration.
func BenchmarkAssign1000New(b *testing.B) {
	m, _ := newTestMapper(b)
	ctx := context.Background()
	batch := make([]string, 1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for j := range batch {
			batch[j] = fmt.Sprintf("b%d-u%d", i, j)
		}
		b.StartTimer()
		if _, err := m.Assign(ctx, "corp", batch); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUsers1000: the dashboard's page/export chunk, 1000 uids with
// names and departments (one query) per iteration.
func BenchmarkUsers1000(b *testing.B) {
	m, db := newTestMapper(b)
	ctx := context.Background()
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("u%d", i)
	}
	mustAssign(b, m, "corp", ids...)
	_, err := db.Exec("UPDATE users SET name = CONCAT('员工', uid), departments = '1,2,3' WHERE corp_id = 'corp'")
	testenv.Check(b, "seed", err)
	uids := seq(1000)
	b.ReportAllocs()
	for b.Loop() {
		if got, err := m.Users(ctx, "corp", uids); err != nil || len(got) != 1000 {
			b.Fatalf("Users = %d, %v", len(got), err)
		}
	}
}
