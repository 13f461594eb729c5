package page

import (
	"net/http"
	"testing"
)

// BenchmarkSignedInOpen is the page's hot path: a member signed in opens
// the notice (one Redis round trip for the session and the current
// version, the view, the link signal; the version and its page from
// memory).
func BenchmarkSignedInOpen(b *testing.B) {
	f := newFixture(b)
	zs := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	zs.open(b, "/r/hr/perf", "zhangsan")
	b.ReportAllocs()
	for b.Loop() {
		if w := zs.get(b, "/r/hr/perf"); w.Code != http.StatusOK {
			b.Fatalf("GET = %d", w.Code)
		}
	}
}

// BenchmarkEvent is an event of a page just served (its session from
// memory, eventSession): read_to_end of the version shown, again.
func BenchmarkEvent(b *testing.B) {
	f := newFixture(b)
	zs := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	v := zs.open(b, "/r/hr/perf?v=1", "zhangsan")
	body := event("read_to_end", 1, v)
	code, _ := zs.post(b, "/r/hr/perf/events", body, nil)
	b.ReportAllocs()
	for b.Loop() {
		if c, _ := zs.post(b, "/r/hr/perf/events", body, nil); c != code {
			b.Fatalf("POST = %d; want %d as the first", c, code)
		}
	}
}
