package idmap_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// seedBig writes a directory of members people in depts departments (a
// tree of fan-out 3 under 1) straight into MySQL, as a sync leaves it.
func seedBig(tb testing.TB, db *sql.DB, corp string, members, depts int) {
	tb.Helper()
	exec := func(q string, rows []string) {
		for start := 0; start < len(rows); start += 5000 {
			_, err := db.Exec(q + strings.Join(rows[start:min(start+5000, len(rows))], ","))
			testenv.Check(tb, "seed", err)
		}
	}
	var d, u, ud []string
	for id := 1; id <= depts; id++ {
		parent := 0
		if id > 1 {
			parent = (id-2)/3 + 1
		}
		d = append(d, fmt.Sprintf("('%s',%d,%d,'部门%d')", corp, id, parent, id))
	}
	for i := range members {
		dept := i%depts + 1
		u = append(u, fmt.Sprintf("('%s',%d,'u%06d','员工%d Emp',  '%d',1)", corp, i, i, i, dept))
		ud = append(ud, fmt.Sprintf("('%s',%d,%d)", corp, dept, i))
	}
	exec("INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ", d)
	exec("INSERT INTO users (corp_id, uid, userid, name, departments, status) VALUES ", u)
	exec("INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ", ud)
	_, err := db.Exec("INSERT INTO directory_versions (corp_id, version) VALUES (?, 1)", corp)
	testenv.Check(tb, "seed version", err)
}

// percentiles reports p50 and p99 of ds as ms/op metrics.
func percentiles(b *testing.B, ds []time.Duration) {
	slices.Sort(ds)
	if len(ds) == 0 {
		return
	}
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[min(len(ds)-1, len(ds)*99/100)].Microseconds())/1000, "p99-ms")
}

// BenchmarkDirectory100k: people search, the preview's expansion of
// "all", and the Index build, on 100,000 members in 2,000 departments
// (docs/benchmarks.md, Directory and audience preview).
func BenchmarkDirectory100k(b *testing.B) {
	db := testenv.MySQL(b)
	const corp = "wwbig"
	seedBig(b, db, corp, 100_000, 2_000)
	m := newMapper(b, db)
	ctx := context.Background()
	b.Run("index build", func(b *testing.B) {
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			_, err := m.Index(ctx, corp)
			testenv.Check(b, "Index", err)
			ds = append(ds, time.Since(start))
			_, err = db.Exec("UPDATE directory_versions SET version = version + 1 WHERE corp_id = ?", corp)
			testenv.Check(b, "bump", err)
		}
		percentiles(b, ds)
	})
	b.Run("people search", func(b *testing.B) {
		queries := []string{"u0999", "员工4242", "emp", "U05", "不存在", "3"}
		_, err := m.Index(ctx, corp) // built once per directory version, not per keystroke
		testenv.Check(b, "Index", err)
		var ds []time.Duration
		for i := 0; b.Loop(); i++ {
			start := time.Now()
			idx, err := m.Index(ctx, corp) // the version check each request makes
			testenv.Check(b, "Index", err)
			_ = idx.Search(queries[i%len(queries)], 20)
			ds = append(ds, time.Since(start))
		}
		percentiles(b, ds)
	})
	b.Run("preview all", func(b *testing.B) {
		_, err := m.Index(ctx, corp)
		testenv.Check(b, "Index", err)
		var ds []time.Duration
		for b.Loop() {
			start := time.Now()
			idx, err := m.Index(ctx, corp)
			testenv.Check(b, "Index", err)
			x, err := m.Expand(ctx, corp, yidu.Audience{All: true})
			testenv.Check(b, "Expand", err)
			for _, top := range idx.Children(1) {
				_ = idx.SubtreeMembers(top).AndCardinality(x.Recipients)
			}
			if x.Recipients.GetCardinality() != 100_000 {
				b.Fatalf("all = %d", x.Recipients.GetCardinality())
			}
			ds = append(ds, time.Since(start))
		}
		percentiles(b, ds)
	})
}
