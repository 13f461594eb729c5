package dashboard

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/testenv"
)

// waitFor polls cond until it holds or a generous deadline (the CI machine
// is loaded) passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testenv.WaitFor(tb, 15*time.Second, what, cond)
}

// openStream opens /events as token over a real listener and returns the
// response, its body unread.
func openStream(tb testing.TB, client *http.Client, base, token string) *http.Response {
	tb.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/messages/hello/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestEventsPerPrincipal (issue 13 item 1): one token holding its maximum
// of streams, none of them read, leaves every other principal able to open
// one; it gets 429 with Retry-After beyond its own cap.
func TestEventsPerPrincipal(t *testing.T) {
	f := newFixtureOpts(t, false, func(o *deps) { o.MaxStreamsPerPrincipal = 3 })
	ts, client := f.client(t)
	for i := range 3 {
		if resp := openStream(t, client, ts.URL, acmeToken); resp.StatusCode != http.StatusOK {
			t.Fatalf("acme stream %d = %d; want 200", i+1, resp.StatusCode)
		}
	}
	resp := openStream(t, client, ts.URL, acmeToken)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("acme stream 4 = %d (Retry-After %q); want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := openStream(t, client, ts.URL, adminToken); resp.StatusCode != http.StatusOK {
		t.Errorf("admin's stream while acme holds its maximum = %d; want 200", resp.StatusCode)
	}
	// A person is one principal across sessions too: alice's own streams
	// are hers, not acme's.
	c, _ := f.login(t)
	req, _ := http.NewRequest("GET", ts.URL+"/api/v1/messages/hello/events", nil)
	req.AddCookie(c)
	r2, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	if r2.StatusCode != http.StatusOK {
		t.Errorf("alice's stream = %d; want 200", r2.StatusCode)
	}
	if g := testutil.ToFloat64(f.srv.met.streams); g != 5 {
		t.Errorf("streams gauge = %v; want 5", g)
	}
}

// changingBitmaps counts one more recipient at every call, so that every
// tick of a stream is an event.
type changingBitmaps struct {
	*redisBitmaps
	n atomic.Int64
}

func (c *changingBitmaps) CountsBySignal(context.Context, string, string) (int64, int64, yidu.SignalCounts, bool, error) {
	return c.n.Add(1), 0, yidu.SignalCounts{}, true, nil
}

// smallBuffers shrinks the send buffer of every accepted connection, so a
// client that does not read fills it within a few events.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestEventsDropStalledReader (issue 13 item 1): a client that opens a
// stream and never reads is dropped once an event cannot be written within
// StreamWriteTimeout, and its slot is free again.
func TestEventsDropStalledReader(t *testing.T) {
	f := newFixture(t)
	bms := &changingBitmaps{redisBitmaps: f.bms}
	srv, err := newServer(f.arch, bms, f.mapper, deps{
		Tokens:  []access.Token{{Name: "acme", Token: acmeToken, Corps: []string{"acme"}}},
		Options: Options{MaxStreamsPerPrincipal: 1, StreamWriteTimeout: 200 * time.Millisecond, Now: f.clock.Now},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	srv.sseInterval = time.Millisecond
	ts := httptest.NewUnstartedServer(srv.Routes())
	ts.Listener = smallBuffers{ts.Listener}
	ts.Start()
	t.Cleanup(ts.Close)

	// A raw client with a small receive buffer that sends the request and
	// never reads a byte.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := "GET /api/v1/messages/hello/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + acmeToken + "\r\n\r\n"
	if _, err := io.Copy(conn, strings.NewReader(req)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to open", func() bool { return srv.userStreams.held("token:acme") == 1 })
	opened := time.Now()
	waitFor(t, "the stalled stream to be dropped", func() bool {
		return srv.userStreams.held("token:acme") == 0 && testutil.ToFloat64(srv.met.streams) == 0
	})
	if n := bms.n.Load(); n < 2 {
		t.Errorf("%d events before the drop; want several", n)
	}
	t.Logf("stalled reader dropped %v after its stream opened, after %d events", time.Since(opened).Round(time.Millisecond), bms.n.Load())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/v1/messages/hello/events", nil)
	r.Header.Set("Authorization", "Bearer "+acmeToken)
	resp, err := ts.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a new stream after the drop = %d; want 200", resp.StatusCode)
	}
}

// gatedBitmaps holds every RecipientBitmap (the start of a recipients,
// departments or export query) until open is closed, and tells entered.
type gatedBitmaps struct {
	*redisBitmaps
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedBitmaps) RecipientBitmap(ctx context.Context, corp, msg string) (*roaring.Bitmap, bool, error) {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	return g.redisBitmaps.RecipientBitmap(ctx, corp, msg)
}

// TestHeavyQueryLimits (issue 13 item 5): one principal's heavy queries are
// bounded (429 with Retry-After beyond, at once) while another principal is
// still served; the dashboard's own bound answers 503 once every slot is
// held longer than QueryWait.
func TestHeavyQueryLimits(t *testing.T) {
	f := newFixture(t)
	gb := &gatedBitmaps{redisBitmaps: f.bms, entered: make(chan struct{}, 16), open: make(chan struct{})}
	srv, err := newServer(f.arch, gb, f.mapper, deps{
		Tokens: []access.Token{
			{Name: "acme", Token: acmeToken, Corps: []string{"acme"}},
			{Name: "admin", Token: adminToken, Corps: []string{"*"}},
			{Name: "other", Token: otherToken, Corps: []string{"acme"}},
		},
		Options: Options{MaxQueriesPerPrincipal: 2, MaxQueries: 3, QueryWait: 100 * time.Millisecond, Now: f.clock.Now},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	h := srv.Routes()
	type answer struct {
		code       int
		retryAfter string
	}
	get := func(token, target string) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			ch <- answer{w.Code, w.Header().Get("Retry-After")}
		}()
		return ch
	}
	wait := func(ch <-chan answer, what string) answer {
		t.Helper()
		select {
		case a := <-ch:
			return a
		case <-time.After(15 * time.Second):
			t.Fatalf("%s: no answer", what)
			return answer{}
		}
	}
	entered := func(what string) {
		t.Helper()
		select {
		case <-gb.entered:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never reached the query", what)
		}
	}
	held := []<-chan answer{
		get(acmeToken, "/api/v1/messages/hello/recipients?q=a"),
		get(acmeToken, "/api/v1/messages/hello/export.csv"),
	}
	entered("acme's first query")
	entered("acme's second query")
	if a := wait(get(acmeToken, "/api/v1/messages/hello/departments"), "acme's third query"); a.code != http.StatusTooManyRequests || a.retryAfter == "" {
		t.Errorf("acme's third heavy query = %d (Retry-After %q); want 429 with Retry-After", a.code, a.retryAfter)
	}
	held = append(held, get(adminToken, "/api/v1/messages/hello/recipients?q=a"))
	entered("admin's query while acme holds its maximum")
	if a := wait(get(otherToken, "/api/v1/messages/hello/recipients"), "a query beyond MaxQueries"); a.code != http.StatusServiceUnavailable || a.retryAfter == "" {
		t.Errorf("query beyond MaxQueries = %d (Retry-After %q); want 503 with Retry-After", a.code, a.retryAfter)
	}
	close(gb.open)
	for i, ch := range held {
		if a := wait(ch, "held query"); a.code != http.StatusOK {
			t.Errorf("held query %d = %d; want 200", i, a.code)
		}
	}
	if n := srv.userQueries.held("token:acme"); n != 0 || len(srv.queries) != 0 {
		t.Errorf("after the queries: acme holds %d, the dashboard %d; want 0", n, len(srv.queries))
	}
	// Light requests are not counted: the message itself is always served.
	r := httptest.NewRequest("GET", "/api/v1/messages/hello", nil)
	r.Header.Set("Authorization", "Bearer "+acmeToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("GET message = %d; want 200", w.Code)
	}
}

// loginFrom posts the sign-in form from addr.
func loginFrom(h http.Handler, addr, user, pass string) *httptest.ResponseRecorder {
	form := url.Values{"username": {user}, "password": {pass}}
	r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.RemoteAddr = addr + ":40000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestLoginNamesAlike (issue 13 item 7): a name that exists and one that
// does not answer the same, try after try, from one address and from an
// address per try (an attacker rotating addresses); an unknown name is
// checked against a dummy hash of the users' bcrypt cost.
func TestLoginNamesAlike(t *testing.T) {
	answer := func(w *httptest.ResponseRecorder) string {
		return fmt.Sprintf("%d Retry-After=%q cookies=%d %s", w.Code, w.Header().Get("Retry-After"), len(w.Result().Cookies()), w.Body)
	}
	for _, tc := range []struct {
		name string
		addr func(user string, try int) string
	}{
		{"one address", func(user string, _ int) string {
			if user == "alice" {
				return "198.51.100.1"
			}
			return "198.51.100.2"
		}},
		{"an address per try", func(user string, try int) string {
			if user == "alice" {
				return fmt.Sprintf("10.1.0.%d", try+1)
			}
			return fmt.Sprintf("10.2.0.%d", try+1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var codes []int
			for try := range 14 {
				known := loginFrom(f.h, tc.addr("alice", try), "alice", "wrong")
				unknown := loginFrom(f.h, tc.addr("ghost", try), "ghost", "wrong")
				if a, b := answer(known), answer(unknown); a != b {
					t.Fatalf("try %d: known name answered\n%s\nunknown name\n%s", try+1, a, b)
				}
				codes = append(codes, known.Code)
			}
			if !slices.Contains(codes, http.StatusUnauthorized) {
				t.Errorf("answers %v; want 401s", codes)
			}
			t.Logf("both names answered %v", codes)
		})
	}
}

// TestLoginStrangerCannotLockOut (issue 13 item 7): after a stranger's
// flood of wrong passwords for alice from many addresses, alice signs in
// from a fresh address; the flooding addresses stay refused.
func TestLoginStrangerCannotLockOut(t *testing.T) {
	f := newFixture(t)
	refused := 0
	for i := range 60 {
		for range 3 {
			w := loginFrom(f.h, fmt.Sprintf("203.0.113.%d", i), "alice", "guess")
			switch w.Code {
			case http.StatusUnauthorized:
			case http.StatusTooManyRequests:
				refused++
			default:
				t.Fatalf("stranger's guess = %d; want 401 or 429", w.Code)
			}
		}
	}
	if refused == 0 {
		t.Error("180 guesses for one name from 60 addresses: none refused; want the name's limit to slow them")
	}
	t.Logf("180 guesses from 60 addresses: %d refused (429), %d checked (401)", refused, 180-refused)
	if w := loginFrom(f.h, "192.0.2.77", "alice", password); w.Code != http.StatusSeeOther {
		t.Errorf("alice from a fresh address after the flood = %d; want 303", w.Code)
	}
	if w := loginFrom(f.h, "203.0.113.1", "alice", "guess"); w.Code != http.StatusTooManyRequests {
		t.Errorf("a flooding address's next guess = %d; want 429", w.Code)
	}
}

// TestRemindAllNonReaders (issue 13 item 3): a message with 300,016 unread
// members (more than any one request's UserID list) reminds every one of
// them, the odd UserID skipped and reported, never a 400.
func TestRemindAllNonReaders(t *testing.T) {
	const n = 300_016
	f := newFixture(t)
	rec := roaring.New()
	rec.AddRange(1000, 1000+n)
	big := yidu.Message{CorpID: "acme", MsgID: "big", App: "hr", Title: "Everyone", SentAt: t0, Recipients: n}
	f.exec(t, "INSERT INTO users (corp_id, uid, userid, name, bad_userid) SELECT 'acme', 1000 + n,"+
		" IF(n = 0, '-dash', CONCAT('u', LPAD(1000 + n, 6, '0'))), 'N', n = 0 FROM "+seqSQL+" WHERE n < ?", n)
	f.add(t, seeded{m: big, rec: rec.ToArray()})
	w := f.ok(t, "POST", "/api/v1/messages/big/remind")
	got := decode[remindJSON](t, w)
	if got.Unread != n || got.Reminded != n-1 || got.Skipped != 1 || got.Batches != (n-1+999)/1000 {
		t.Errorf("remind = %+v; want %d unread, %d reminded in %d batches, 1 skipped", got, n, n-1, (n-1+999)/1000)
	}
	if all := f.wecom.reminders(); len(all) != 1 || len(all[0]) != n-1 {
		t.Errorf("reminders %d; want one to %d UserIDs", len(all), n-1)
	}
}

// TestLoginPerAddress: one address spraying a password over many names is
// slowed by its own limit, whatever the names.
func TestLoginPerAddress(t *testing.T) {
	f := newFixture(t)
	for i := range 10 {
		name := fmt.Sprintf("user%d", i)
		if i == 3 {
			name = "alice"
		}
		if w := loginFrom(f.h, "198.51.100.9", name, "Summer2026!"); w.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d (%s) = %d; want 401", i+1, name, w.Code)
		}
	}
	if w := loginFrom(f.h, "198.51.100.9", "user10", "Summer2026!"); w.Code != http.StatusTooManyRequests {
		t.Errorf("11th attempt from one address = %d; want 429", w.Code)
	}
	if w := loginFrom(f.h, "198.51.100.10", "alice", password); w.Code != http.StatusSeeOther {
		t.Errorf("alice from another address = %d; want 303", w.Code)
	}
}

// TestExportsHoldHalfTheQueries (issue 38): an export lasts as long as
// its client reads, so exports together hold at most half the heavy-query
// slots; a third export while two run is 503 at once, and a search still
// gets a slot.
func TestExportsHoldHalfTheQueries(t *testing.T) {
	f := newFixture(t)
	gb := &gatedBitmaps{redisBitmaps: f.bms, entered: make(chan struct{}, 16), open: make(chan struct{})}
	srv, err := newServer(f.arch, gb, f.mapper, deps{
		Tokens: []access.Token{
			{Name: "acme", Token: acmeToken, Corps: []string{"acme"}},
			{Name: "admin", Token: adminToken, Corps: []string{"*"}},
			{Name: "other", Token: otherToken, Corps: []string{"acme"}},
		},
		Options: Options{MaxQueriesPerPrincipal: 2, MaxQueries: 4, QueryWait: 100 * time.Millisecond, Now: f.clock.Now},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	h := srv.Routes()
	get := func(token, target string) <-chan int {
		ch := make(chan int, 1)
		go func() {
			r := httptest.NewRequest("GET", target, nil)
			r.Header.Set("Authorization", "Bearer "+token)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			ch <- w.Code
		}()
		return ch
	}
	entered := func(what string) {
		t.Helper()
		select {
		case <-gb.entered:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never reached the query", what)
		}
	}
	held := []<-chan int{get(acmeToken, "/api/v1/messages/hello/export.csv"), get(adminToken, "/api/v1/messages/hello/export.csv")}
	entered("first export")
	entered("second export")
	select {
	case code := <-get(otherToken, "/api/v1/messages/hello/export.csv"):
		if code != http.StatusServiceUnavailable {
			t.Errorf("a third export while two run = %d; want 503", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the third export got no answer")
	}
	held = append(held, get(otherToken, "/api/v1/messages/hello/recipients"))
	entered("a search while two exports run")
	close(gb.open)
	for i, ch := range held {
		if code := <-ch; code != http.StatusOK {
			t.Errorf("held query %d = %d; want 200", i, code)
		}
	}
}
