package page

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var viewRE = regexp.MustCompile(`data-view="([^"]+)"`)

// open signs b in (if needed) and opens target; it returns the view
// token the page handed out.
func (b *browser) open(t testing.TB, target, userID string) string {
	t.Helper()
	if b.cookies[sessionCookie] == nil {
		b.signIn(t, target, userID)
	}
	w := b.get(t, target)
	if w.Code != 200 {
		t.Fatalf("GET %s = %d", target, w.Code)
	}
	m := viewRE.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("GET %s: no view token in the page", target)
	}
	return m[1]
}

// post sends an event as the page's script does; mod may change the
// request before it is sent.
func (b *browser) post(t testing.TB, path, body string, mod func(*http.Request)) (int, string) {
	t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.RemoteAddr = "203.0.113.7:5123"
	r.Header.Set("User-Agent", b.ua)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", "https://read.example.com")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	if mod != nil {
		mod(r)
	}
	w := httptest.NewRecorder()
	b.f.h.ServeHTTP(w, r)
	var e struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(bytes.NewReader(w.Body.Bytes())).Decode(&e)
	return w.Code, e.Error
}

// tamper changes the middle character of a view token.
func tamper(tok string) string {
	b := []byte(tok)
	if b[len(b)/2] == 'A' {
		b[len(b)/2] = 'B'
	} else {
		b[len(b)/2] = 'A'
	}
	return string(b)
}

func event(name string, v int, view string) string {
	b, _ := json.Marshal(map[string]any{"event": name, "version": v, "view": view})
	return string(b)
}

// TestEvents: the page's events in order (read_to_end, then the ack after
// min_read_seconds) are recorded once each with the version shown and the
// reader's address; each hostile event gets its own error and records
// nothing.
func TestEvents(t *testing.T) {
	f := newFixture(t)
	const path = "/r/hr/perf/events"
	zs := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	v2 := zs.open(t, "/r/hr/perf", "zhangsan") // the latest: version 2, min_read_seconds 30
	v1 := zs.open(t, "/r/hr/perf?v=1", "zhangsan")
	ww := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	wwView := ww.open(t, "/r/hr/perf", "wangwu")
	anon := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}

	hostile := []struct {
		name   string
		b      *browser
		body   string
		mod    func(*http.Request)
		status int
		code   string
	}{
		{"no session", anon, event("read_to_end", 2, v2), nil, 401, "no_session"},
		{"someone else's view", ww, event("read_to_end", 2, v2), nil, 403, "not_your_view"},
		{"someone else's ack", zs, event("acknowledged", 2, wwView), nil, 403, "not_your_view"},
		{"a view never handed out", zs, event("read_to_end", 2, "forged-view-token"), nil, 403, "unknown_view"},
		{"a view with a character changed", zs, event("read_to_end", 2, tamper(v2)), nil, 403, "unknown_view"},
		{"a view signed with another key", zs, event("read_to_end", 2, newViewSigner(ViewKey("hr", "a guessed secret")).sign(
			view{App: "hr", Corp: corp, MsgID: "perf", UserID: "zhangsan", UID: 1, Version: 2, ShownMs: f.now.Load() - 60_000})), nil, 403, "unknown_view"},
		{"a version the page did not show", zs, event("read_to_end", 1, v2), nil, 409, "version_not_shown"},
		{"an ack for a version the page did not show", zs, event("acknowledged", 2, v1), nil, 409, "version_not_shown"},
		{"an ack before read_to_end", zs, event("acknowledged", 2, v2), nil, 409, "not_read_to_end"},
		{"an unknown event", zs, `{"event":"button","version":2,"view":"` + v2 + `"}`, nil, 400, "bad_event"},
		{"an unknown field", zs, `{"event":"read_to_end","version":2,"view":"` + v2 + `","uid":1}`, nil, 400, "bad_event"},
		{"a form post", zs, event("read_to_end", 2, v2), func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 403, "cross_site"},
		{"another origin", zs, event("read_to_end", 2, v2), func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403, "cross_site"},
		{"cross-site fetch", zs, event("read_to_end", 2, v2), func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403, "cross_site"},
		{"a huge body", zs, event("read_to_end", 2, v2) + strings.Repeat(" ", 2048), nil, 413, "too_large"},
	}
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			if code, e := tc.b.post(t, path, tc.body, tc.mod); code != tc.status || e != tc.code {
				t.Errorf("POST = %d %q; want %d %q", code, e, tc.status, tc.code)
			}
			if got := f.reads.got(); len(got) != 0 {
				t.Errorf("recorded %v; want nothing", got)
			}
		})
	}

	t.Run("read to the end, then acknowledge after min_read_seconds", func(t *testing.T) {
		if code, e := zs.post(t, path, event("read_to_end", 2, v2), nil); code != 200 {
			t.Fatalf("read_to_end = %d %q; want 200", code, e)
		}
		if code, e := zs.post(t, path, event("read_to_end", 2, v2), nil); code != 200 {
			t.Fatalf("read_to_end again = %d %q; want 200", code, e)
		}
		if code, e := zs.post(t, path, event("acknowledged", 2, v2), nil); code != 409 || e != "too_soon" {
			t.Errorf("ack within min_read_seconds = %d %q; want 409 too_soon", code, e)
		}
		f.now.Add((30 * time.Second).Milliseconds())
		if code, e := zs.post(t, path, event("acknowledged", 2, v2), nil); code != 200 {
			t.Fatalf("ack = %d %q; want 200", code, e)
		}
		if code, e := zs.post(t, path, event("acknowledged", 2, v2), nil); code != 409 || e != "already_acknowledged" {
			t.Errorf("replayed ack = %d %q; want 409 already_acknowledged", code, e)
		}
		// The page shows it acknowledged.
		if w := zs.get(t, "/r/hr/perf"); !strings.Contains(w.Body.String(), `data-acked="1"`) || !strings.Contains(w.Body.String(), "已确认知悉") {
			t.Errorf("reopened page does not show the acknowledgement")
		}
		// Version 1 read after version 2 (material) is out is stale
		// (issue 46): refused, nothing recorded.
		if code, e := zs.post(t, path, event("read_to_end", 1, v1), nil); code != 409 || e != "stale_version" {
			t.Fatalf("read_to_end of v1 = %d %q; want 409 stale_version", code, e)
		}
		want := []string{
			"zhangsan/perf/read_to_end/v2/203.0.113.7",
			"zhangsan/perf/acknowledged/v2/203.0.113.7",
		}
		if got := f.reads.got(); !slices.Equal(got, want) {
			t.Errorf("recorded %v; want %v", got, want)
		}
	})

	t.Run("Redis lost the marks: the archive answers", func(t *testing.T) {
		f.now.Add(time.Minute.Milliseconds())
		ctx := t.Context()
		keys, _ := f.rdb.Keys(ctx, "*page:done:*").Result()
		if len(keys) == 0 {
			t.Fatal("no page:done keys")
		}
		for _, k := range keys {
			// Marks expire (Options.DoneTTL, 30 days by default): a
			// mark without a TTL would outlive every session.
			if ttl := f.rdb.TTL(ctx, k).Val(); ttl <= 29*24*time.Hour || ttl > 30*24*time.Hour {
				t.Errorf("TTL of %s = %v; want 30 days", k, ttl)
			}
		}
		f.rdb.Del(ctx, keys...)
		// wangwu read to the end and flushd archived it; Redis forgot.
		f.archive.mu.Lock()
		f.archive.rows["4/read_to_end/2"] = true
		f.archive.rows["1/acknowledged/2"] = true
		f.archive.mu.Unlock()
		before := len(f.reads.got())
		if code, e := zs.post(t, path, event("acknowledged", 2, v2), nil); code != 409 || e != "already_acknowledged" {
			t.Errorf("replayed ack after Redis lost its mark = %d %q; want 409 already_acknowledged", code, e)
		}
		if code, e := ww.post(t, path, event("acknowledged", 2, wwView), nil); code != 200 {
			t.Errorf("ack with read_to_end only archived = %d %q; want 200", code, e)
		}
		if got := f.reads.got(); len(got) != before+1 || got[before] != "wangwu/perf/acknowledged/v2/203.0.113.7" {
			t.Errorf("recorded %v; want wangwu's ack only", got[before:])
		}
	})

	t.Run("not durable: 503, nothing marked", func(t *testing.T) {
		f := newFixture(t)
		zs := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		v := zs.open(t, "/r/hr/perf", "zhangsan")
		f.reads.mu.Lock()
		f.reads.fail = true
		f.reads.mu.Unlock()
		if code, e := zs.post(t, path, event("read_to_end", 2, v), nil); code != 503 || e != "unavailable" {
			t.Errorf("read_to_end while the read path fails = %d %q; want 503", code, e)
		}
		f.reads.mu.Lock()
		f.reads.fail = false
		f.reads.mu.Unlock()
		f.now.Add((30 * time.Second).Milliseconds())
		if code, e := zs.post(t, path, event("acknowledged", 2, v), nil); code != 409 || e != "not_read_to_end" {
			t.Errorf("ack after a failed read_to_end = %d %q; want 409 not_read_to_end (nothing was marked)", code, e)
		}
		if code, e := zs.post(t, path, event("read_to_end", 2, v), nil); code != 200 {
			t.Errorf("the retry = %d %q; want 200", code, e)
		}
		if code, e := zs.post(t, path, event("acknowledged", 2, v), nil); code != 200 {
			t.Errorf("ack of v2 = %d %q; want 200", code, e)
		}
	})

	t.Run("not recorded by the read path: 404, nothing marked", func(t *testing.T) {
		f := newFixture(t)
		zs := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		v := zs.open(t, "/r/hr/perf", "zhangsan")
		f.reads.mu.Lock()
		f.reads.refuse = true
		f.reads.mu.Unlock()
		if code, e := zs.post(t, path, event("read_to_end", 2, v), nil); code != 404 || e != "not_found" {
			t.Errorf("read_to_end the read path did not keep = %d %q; want 404 not_found", code, e)
		}
		if keys, _ := f.rdb.Keys(t.Context(), f.prefix+"page:done:*").Result(); len(keys) != 0 {
			t.Errorf("done marks %v; want none", keys)
		}
	})
}

// FuzzParseEvent: any body either parses into a known event with a
// version and a bounded view, or is refused.
func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(event("read_to_end", 1, "abc")))
	f.Add([]byte(event("acknowledged", 2, "abc")))
	f.Add([]byte(`{"event":"acknowledged","version":-1,"view":"x"}`))
	f.Add([]byte(`{"event":"acknowledged","version":1,"view":"x"} {}`))
	f.Add([]byte(`{"event":"acknowledged","version":1e99,"view":"x"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseEvent(body)
		if err != nil {
			return
		}
		if (ev.Signal.String() != "read_to_end" && ev.Signal.String() != "acknowledged") || ev.Version < 1 || ev.View == "" || len(ev.View) > 64 {
			t.Fatalf("ParseEvent(%q) = %+v", body, ev)
		}
	})
}

// TestSignalsBounded: the page records link (on the view) and each event
// within Options.Timeout, so a delta Kafka does not acknowledge meets the
// recorder's deadline and goes to the receiver's spool instead of holding
// the reader (internal/faulttest TestPageAcksKafkaStopped).
func TestSignalsBounded(t *testing.T) {
	f := newFixture(t)
	zs := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	v2 := zs.open(t, "/r/hr/perf", "zhangsan")
	if code, e := zs.post(t, "/r/hr/perf/events", event("read_to_end", 2, v2), nil); code != 200 {
		t.Fatalf("read_to_end = %d %q; want 200", code, e)
	}
	f.reads.mu.Lock()
	left := slices.Clone(f.reads.left)
	f.reads.mu.Unlock()
	if len(left) != 2 {
		t.Fatalf("PageSignal called %d times; want 2 (link, read_to_end)", len(left))
	}
	for i, d := range left {
		if d <= 0 || d > DefaultTimeout {
			t.Errorf("PageSignal #%d had %s left; want a deadline within %s", i+1, d, DefaultTimeout)
		}
	}
}
