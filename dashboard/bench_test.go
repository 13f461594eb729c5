package dashboard

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/tracker"
)

// benchServer serves a message "big" to n recipients (40% read, their
// reads spread over an hour) of a synthetic corp of n people in depts
// departments (a root and depts-1 children; person uid sits in child
// 2+uid%(depts-1)), over the real tracker and directory on a fresh
// database, with the given Bitmaps (nil: the real store on the test's
// Redis), restored from the rows.
func benchServer(b testing.TB, n, depts int, bms progress.Bitmaps, mods ...func(*deps)) (http.Handler, *Server) {
	b.Helper()
	c := &clock{t: t0.Add(time.Hour)}
	db := testenv.MySQL(b)
	bulkInsert(b, db, "INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ", depts, func(i int) (string, []any) {
		if i == 0 {
			return "('acme',1,0,'Root 总部')", nil
		}
		return "('acme',?,1,?)", []any{i + 1, fmt.Sprintf("部门 %d", i+1)}
	})
	// person uid sits in child 2+uid%(depts-1)
	for _, q := range []string{
		"INSERT INTO users (corp_id, uid, userid, name, departments) SELECT 'acme', n + 1, CONCAT('u', LPAD(n + 1, 7, '0')), 'N'," +
			" CAST(2 + (n + 1) % ? AS CHAR) FROM " + seqSQL + " WHERE n < ?",
		"INSERT INTO user_departments (corp_id, dept_id, uid) SELECT 'acme', 2 + (n + 1) % ?, n + 1 FROM " + seqSQL + " WHERE n < ?",
	} {
		_, err := db.Exec(q, depts-1, n)
		testenv.Check(b, q, err)
	}
	m := yidu.Message{CorpID: "acme", MsgID: "big", App: "hr", AgentID: 1000002, Title: "Big", SentAt: t0, Recipients: int64(n)}
	_, err := db.Exec("INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)", m.CorpID, m.MsgID, m.App, m.AgentID, m.Title, m.SentAt, m.Recipients, strings.Repeat("0", 64))
	testenv.Check(b, "insert message", err)
	rec, read := roaring.New(), roaring.New()
	rec.AddRange(1, uint64(n)+1)
	// 40% read (uid%5 < 2), at t0 + uid%60 minutes, by the button.
	_, err = db.Exec("INSERT INTO message_read_record (corp_id, msgid, uid, is_read, read_time, source, button_at)"+
		" SELECT 'acme', 'big', n + 1, (n + 1) % 5 < 2, IF((n + 1) % 5 < 2, DATE_ADD(?, INTERVAL (n + 1) % 60 MINUTE), NULL),"+
		" IF((n + 1) % 5 < 2, 1, 0), IF((n + 1) % 5 < 2, DATE_ADD(?, INTERVAL (n + 1) % 60 MINUTE), NULL) FROM "+seqSQL+" WHERE n < ?", t0, t0, n)
	testenv.Check(b, "insert read records", err)
	for uid := uint32(1); uid <= uint32(n); uid++ {
		if uid%5 < 2 {
			read.Add(uid)
		}
	}
	if bms == nil {
		bms = newRedisBitmaps(b)
	}
	testenv.Check(b, "restore", bms.RestoreReads(context.Background(), m, rec, read, map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: read}))
	mapper, err := idmap.New(db, idmap.Options{})
	testenv.Check(b, "idmap.New", err)
	reg, err := tracker.New(db, mapper, nil, tracker.Options{Now: c.Now})
	testenv.Check(b, "tracker.New", err)
	opts := deps{Options: Options{Now: c.Now},
		Tokens: []access.Token{{Name: "b", Token: acmeToken, Corps: []string{"acme"}}},
	}
	for _, mod := range mods {
		mod(&opts)
	}
	srv, err := newServer(&archive{Registry: reg}, bms, mapper, opts)
	testenv.Check(b, "New", err)
	b.Cleanup(srv.Close)
	return srv.Routes(), srv
}

func get(b *testing.B, h http.Handler, w http.ResponseWriter, target string) {
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("Authorization", "Bearer "+acmeToken)
	h.ServeHTTP(w, r)
}

// BenchmarkProgress: GET /progress of a 1,000,000-recipient message through
// the whole handler (auth, routing, JSON) with the real bitmap.Store on
// Redis (BITCOUNT) and the real tracker (its curve is cached anyway).
func BenchmarkProgress(b *testing.B) {
	rdb, prefix := testenv.Redis(b)
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix, Registerer: prometheus.NewRegistry(), Logger: slog.New(slog.DiscardHandler)})
	testenv.Check(b, "bitmap.New", err)
	b.Cleanup(store.Close)
	h, _ := benchServer(b, 1_000_000, 10, store)
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		w := httptest.NewRecorder()
		get(b, h, w, "/api/v1/messages/big/progress")
		if w.Code != 200 {
			b.Fatalf("progress = %d: %s", w.Code, w.Body)
		}
		lat = append(lat, time.Since(start))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkDepartments: the breakdown of a 1,000,000-recipient message over
// 500 departments (recursive sets cached, as between two polls), so the
// intersections are what is measured.
func BenchmarkDepartments(b *testing.B) {
	h, _ := benchServer(b, 1_000_000, 500, nil)
	w := httptest.NewRecorder()
	get(b, h, w, "/api/v1/messages/big/departments") // warm the tree cache
	if w.Code != 200 {
		b.Fatalf("departments = %d", w.Code)
	}
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		get(b, h, w, "/api/v1/messages/big/departments")
	}
}

// countingWriter discards the body, so the benchmark holds no output.
type countingWriter struct {
	h     http.Header
	bytes atomic.Int64
	code  int
}

func (c *countingWriter) Header() http.Header  { return c.h }
func (c *countingWriter) WriteHeader(code int) { c.code = code }
func (c *countingWriter) Flush()               {}
func (c *countingWriter) Write(p []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	c.bytes.Add(int64(len(p)))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

// BenchmarkExport streams export.csv?state=all and reports rows/s and the
// heap the stream adds at its peak (live objects above what the fixture
// holds before it starts): about equal for 100,000 and 1,000,000 rows.
func BenchmarkExport(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			h, _ := benchServer(b, n, 500, nil)
			get(b, h, &countingWriter{h: http.Header{}}, "/api/v1/messages/big/departments") // build the tree cache
			runtime.GC()
			base := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
			rtmetrics.Read(base)
			var peak atomic.Uint64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
				t := time.NewTicker(2 * time.Millisecond)
				defer t.Stop()
				for {
					rtmetrics.Read(s)
					if v := s[0].Value.Uint64(); v > peak.Load() {
						peak.Store(v)
					}
					select {
					case <-stop:
						return
					case <-t.C:
					}
				}
			})
			var bytes int64
			b.ReportAllocs()
			for b.Loop() {
				w := &countingWriter{h: http.Header{}}
				get(b, h, w, "/api/v1/messages/big/export.csv?state=all")
				if w.code != 200 {
					b.Fatalf("export = %d", w.code)
				}
				bytes = w.bytes.Load()
			}
			close(stop)
			wg.Wait()
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			// Above the heap the fixture itself holds (bitmaps, department sets).
			b.ReportMetric(float64(peak.Load()-min(peak.Load(), base[0].Value.Uint64()))/(1<<20), "stream-heap-MB")
			b.ReportMetric(float64(bytes)/(1<<20), "csv-MB")
		})
	}
}
