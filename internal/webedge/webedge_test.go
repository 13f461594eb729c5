package webedge_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/webedge"
)

var _ access.SessionStore = (*webedge.Sessions[access.Session])(nil)

// TestCSP: each surface's policy, word for word (the values the
// dashboard and the page sent before they shared the web edge).
func TestCSP(t *testing.T) {
	tests := []struct {
		name string
		csp  webedge.CSP
		want string
	}{
		{"dashboard", webedge.CSP{Img: []string{"data:"}, ConnectSelf: true},
			"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
		{"page", webedge.CSP{},
			"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
		{"page with object storage", webedge.CSP{Img: []string{"https://s3.example"}, Connect: []string{"https://s3.example"}},
			"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' https://s3.example; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; connect-src 'self' https://s3.example"},
	}
	for _, tt := range tests {
		if got := tt.csp.String(); got != tt.want {
			t.Errorf("%s: CSP = %q; want %q", tt.name, got, tt.want)
		}
	}
	w := httptest.NewRecorder()
	webedge.Headers{CSP: webedge.CSP{}, Referrer: "no-referrer", NoStore: true}.Middleware(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	h := w.Header()
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers = %v", h)
	}
	// The values are shared between answers: one answer's Add or edit
	// must not reach the next.
	mw := webedge.Headers{Referrer: "no-referrer", NoStore: true}.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/edit" {
			w.Header().Add("Cache-Control", "private")
			w.Header().Add("X-Frame-Options", "SAMEORIGIN")
		}
	}))
	for _, path := range []string{"/edit", "/next"} {
		w := httptest.NewRecorder()
		mw.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		want := []string{"no-store"}
		if path == "/edit" {
			want = append(want, "private")
		}
		if got := w.Header().Values("Cache-Control"); !slices.Equal(got, want) {
			t.Errorf("%s: Cache-Control = %q; want %q", path, got, want)
		}
		if path == "/next" && !slices.Equal(w.Header().Values("X-Frame-Options"), []string{"DENY"}) {
			t.Errorf("%s: X-Frame-Options = %q after another answer added to it", path, w.Header().Values("X-Frame-Options"))
		}
		// Answered in turn, an Add into spare capacity would not show
		// above, but two answers at once would write the same array: each
		// shared value must leave none.
		if path == "/next" {
			for _, k := range []string{"Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy", "Cache-Control"} {
				if v := w.Header()[k]; len(v) != 1 || cap(v) != 1 {
					t.Errorf("%s: %s is %q with capacity %d; want one value and no spare capacity", path, k, v, cap(v))
				}
			}
		}
	}
}

func TestSameSiteJSON(t *testing.T) {
	const origin = "https://yidu.example"
	tests := []struct {
		name   string
		header map[string]string
		want   bool
	}{
		{"json, same origin", map[string]string{"Content-Type": "application/json; charset=utf-8", "Origin": origin, "Sec-Fetch-Site": "same-origin"}, true},
		{"json, no origin", map[string]string{"Content-Type": "Application/JSON"}, true},
		{"form", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, false},
		{"text/plain", map[string]string{"Content-Type": "text/plain"}, false},
		{"no type", nil, false},
		{"cross-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, false},
		{"other origin", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, false},
		{"null origin", map[string]string{"Content-Type": "application/json", "Origin": "null"}, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "/r/hr/x/events", nil)
		for k, v := range tt.header {
			r.Header.Set(k, v)
		}
		if got := webedge.SameSiteJSON(r, origin); got != tt.want {
			t.Errorf("%s: SameSiteJSON = %v; want %v", tt.name, got, tt.want)
		}
	}
	if got := webedge.Origin("https://yidu.example/base/"); got != origin {
		t.Errorf("Origin = %q; want %q", got, origin)
	}
}

func TestFromThisSiteAndCSRF(t *testing.T) {
	tests := []struct {
		site, referer string
		strict, want  bool
	}{
		{"same-origin", "", true, true},
		{"none", "", true, true},
		{"same-site", "", false, false},
		{"cross-site", "http://dash.example/", false, false},
		{"", "", false, true},
		{"", "", true, false},
		{"", "http://dash.example/m/x", true, true},
		{"", "http://evil.example/", true, false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://dash.example/api/v1/messages/x/export.csv", nil)
		if tt.site != "" {
			r.Header.Set("Sec-Fetch-Site", tt.site)
		}
		if tt.referer != "" {
			r.Header.Set("Referer", tt.referer)
		}
		if got := webedge.FromThisSite(r, tt.strict); got != tt.want {
			t.Errorf("FromThisSite(site %q, referer %q, strict %v) = %v; want %v", tt.site, tt.referer, tt.strict, got, tt.want)
		}
	}
	r := httptest.NewRequest("POST", "/", strings.NewReader("csrf=tok"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if !webedge.CSRFOK(r, "tok") {
		t.Error("the form's token was refused")
	}
	r = httptest.NewRequest("POST", "/", nil)
	r.Header.Set(webedge.CSRFHeader, "tok")
	if webedge.CSRFOK(r, "other") || !webedge.CSRFOK(r, "tok") || webedge.CSRFOK(httptest.NewRequest("POST", "/", nil), "") {
		t.Error("CSRFOK took a wrong or missing token, or refused the right one")
	}
}

func TestClientIPAndSecure(t *testing.T) {
	proxies := clientip.Proxies{netip.MustParsePrefix("10.0.0.0/8")}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:5000"
	r.Header.Set("X-Forwarded-For", "203.0.113.9, 10.9.9.9")
	r.Header.Set("X-Forwarded-Proto", "https")
	if got := webedge.ClientIP(proxies, r); got != "203.0.113.9" || !webedge.Secure(proxies, false, r) {
		t.Errorf("behind a trusted proxy: ClientIP %q, Secure %v; want 203.0.113.9, true", got, webedge.Secure(proxies, false, r))
	}
	r.RemoteAddr = "198.51.100.7:5000"
	if got := webedge.ClientIP(proxies, r); got != "198.51.100.7" || webedge.Secure(proxies, false, r) || !webedge.Secure(proxies, true, r) {
		t.Errorf("from a stranger: ClientIP %q; want the peer, its X-Forwarded-Proto not believed", got)
	}
	r.RemoteAddr = "not-an-address"
	if got := webedge.ClientIP(proxies, r); got != "not-an-address" {
		t.Errorf("ClientIP = %q; want the peer as it came", got)
	}
}

type page struct {
	UserID string `json:"userid"`
}

func TestSessions(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	const id = "cookie-id-that-must-not-appear-in-redis"
	t.Run("dashboard", func(t *testing.T) {
		store := webedge.DashboardSessions(rdb, prefix)
		testenv.Check(t, "Put", store.Put(ctx, id, access.Session{User: "alice", CSRF: "c", Expires: time.Now().Add(time.Hour)}, time.Hour))
		keys, err := rdb.Keys(ctx, prefix+":*").Result()
		testenv.Check(t, "KEYS", err)
		if len(keys) != 1 || strings.Contains(keys[0], id) || keys[0] != store.Key(id) {
			t.Fatalf("keys = %v; want one, hashed", keys)
		}
		if ttl := rdb.TTL(ctx, keys[0]).Val(); ttl <= 0 || ttl > time.Hour {
			t.Errorf("TTL = %v; want the session's (≤ 1h)", ttl)
		}
		s, ok, err := store.Get(ctx, id)
		if err != nil || !ok || s.User != "alice" || s.CSRF != "c" {
			t.Errorf("Get = %+v, %v, %v; want alice's session", s, ok, err)
		}
		if _, ok, err := store.Get(ctx, "other"); ok || err != nil {
			t.Errorf("Get(unknown) = %v, %v; want not found", ok, err)
		}
		testenv.Check(t, "SET", rdb.Set(ctx, store.Key("bad"), "{", time.Hour).Err())
		if _, ok, err := store.Get(ctx, "bad"); ok || err != nil {
			t.Errorf("Get(corrupt) = %v, %v; want no session", ok, err)
		}
		testenv.Check(t, "Delete", store.Delete(ctx, id))
		if _, ok, _ := store.Get(ctx, id); ok {
			t.Error("a deleted session is still found")
		}
	})
	t.Run("rolling", func(t *testing.T) {
		store := webedge.NewSessions[page](rdb, webedge.SessionKind{Name: "page", Key: prefix + "page:session:", TTL: time.Hour, Rolling: true, Strict: true})
		var also string
		sid, err := store.Create(ctx, page{UserID: "zhangsan"}, func(p redis.Pipeliner, key string) { also = key })
		testenv.Check(t, "Create", err)
		if also != store.Key(sid) || len(sid) != 43 {
			t.Errorf("Create: id %q, also given %q; want 43 characters and the session's key", sid, also)
		}
		testenv.Check(t, "EXPIRE", rdb.Expire(ctx, store.Key(sid), time.Minute).Err())
		p := rdb.Pipeline()
		answer := store.QueueGet(ctx, p, sid)
		cmd := p.Get(ctx, "nothing-"+prefix)
		_, _ = p.Exec(ctx)
		s, ok, err := answer()
		if err != nil || !ok || s.UserID != "zhangsan" || !errors.Is(cmd.Err(), redis.Nil) {
			t.Fatalf("QueueGet = %+v, %v, %v; want the session beside the pipeline's other command", s, ok, err)
		}
		if ttl := rdb.TTL(ctx, store.Key(sid)).Val(); ttl <= time.Minute {
			t.Errorf("TTL after Get = %v; want pushed back to an hour", ttl)
		}
		testenv.Check(t, "SET", rdb.Set(ctx, store.Key("bad"), "{", time.Hour).Err())
		if _, ok, err := store.Get(ctx, "bad"); ok || err == nil {
			t.Errorf("Get(corrupt) = %v, %v; want an error (strict)", ok, err)
		}
	})
}

type exchanger struct {
	calls int
	user  string
	err   error
}

func (e *exchanger) exchange(_ context.Context, corp, code string) (string, error) {
	e.calls++
	return e.user, e.err
}

// TestFinishWeCom: a state is finished once, by the browser that began
// it; accept and the code's shape are checked before the code is spent;
// a code is used once; WeCom naming nobody is ErrNotMember.
func TestFinishWeCom(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	st := access.NewStates(rdb, prefix)
	c := webedge.NonceCookie{Name: "n", Path: "/r/"}
	begin := func(next string) (state, nonce string) {
		w := httptest.NewRecorder()
		app := webedge.App{CorpID: "corp", AgentID: 7, RedirectURI: "https://yidu.example/r/hr/signin", Endpoints: access.DefaultEndpoints}
		testenv.Check(t, "StartWeCom", webedge.StartWeCom(w, httptest.NewRequest("GET", next, nil), st, app, next, c))
		loc := w.Header().Get("Location")
		if w.Code != http.StatusFound || !strings.HasPrefix(loc, "https://login.work.weixin.qq.com/wwlogin/sso/login?") {
			t.Fatalf("StartWeCom: %d to %q; want 302 to the web login", w.Code, loc)
		}
		var ck *http.Cookie
		for _, x := range w.Result().Cookies() {
			if x.Name == "n" && x.Path == "/r/" && x.HttpOnly && x.SameSite == http.SameSiteLaxMode {
				ck = x
			}
		}
		if ck == nil {
			t.Fatal("StartWeCom set no nonce cookie")
		}
		u, _ := http.NewRequest("GET", loc, nil)
		return u.URL.Query().Get("state"), ck.Value
	}
	ctx := context.Background()
	state, _ := begin("/r/hr/perf")
	ex := &exchanger{user: "zhangsan"}
	var nonce string
	if _, _, _, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: "other", Code: "c1"}, nil); !errors.Is(err, access.ErrBadState) || ex.calls != 0 {
		t.Errorf("another browser's nonce: %v, %d calls; want ErrBadState, none", err, ex.calls)
	}
	state, nonce = begin("/r/hr/perf")
	accept := func(next, corp string) bool { return corp == "corp" && strings.HasPrefix(next, "/r/other/") }
	if _, _, _, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: nonce, Code: "c1"}, accept); !errors.Is(err, access.ErrBadState) || ex.calls != 0 {
		t.Errorf("not accepted: %v, %d calls; want ErrBadState, none", err, ex.calls)
	}
	state, nonce = begin("/r/hr/perf")
	next, corp, user, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: nonce, Code: "c1"}, nil)
	if err != nil || next != "/r/hr/perf" || corp != "corp" || user != "zhangsan" || ex.calls != 1 {
		t.Errorf("FinishWeCom = %q, %q, %q, %v; want /r/hr/perf, corp, zhangsan", next, corp, user, err)
	}
	if _, _, _, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: nonce, Code: "c1"}, nil); !errors.Is(err, access.ErrBadState) {
		t.Errorf("the same state again: %v; want ErrBadState", err)
	}
	state, nonce = begin("/r/hr/perf")
	if _, _, _, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: nonce, Code: "c1"}, nil); !errors.Is(err, access.ErrCodeUsed) || ex.calls != 1 {
		t.Errorf("the same code again: %v; want ErrCodeUsed, not exchanged", err)
	}
	state, nonce = begin("/r/hr/perf")
	if _, _, _, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: nonce, Code: strings.Repeat("c", 513)}, nil); !errors.Is(err, access.ErrBadState) {
		t.Errorf("a 513-byte code: %v; want ErrBadState", err)
	}
	state, nonce = begin("/r/hr/perf")
	ex.user = ""
	if _, _, _, err := webedge.FinishWeCom(ctx, st, ex.exchange, webedge.Return{State: state, Nonce: nonce, Code: "c2"}, nil); !errors.Is(err, access.ErrNotMember) {
		t.Errorf("WeCom names nobody: %v; want ErrNotMember", err)
	}
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/r/hr/signin?state=s&code=k", nil)
	r.AddCookie(&http.Cookie{Name: "n", Value: "v"})
	if ret := webedge.ReturnOf(w, r, c); ret != (webedge.Return{State: "s", Code: "k", Nonce: "v"}) || !strings.Contains(w.Header().Get("Set-Cookie"), "Max-Age=0") {
		t.Errorf("ReturnOf = %+v, Set-Cookie %q; want the query, the nonce, and the cookie cleared", ret, w.Header().Get("Set-Cookie"))
	}
}

func TestTable(t *testing.T) {
	errA, errB := errors.New("a"), errors.New("b")
	tab := webedge.Table{{Err: errA, Answer: webedge.NotFound}, {Err: errB, Answer: webedge.Unavailable}}
	if a, ok := tab.Find(errors.Join(errors.New("x"), errB)); !ok || a.Status != 503 || a.ZH != "暂时无法打开，请稍后再试" {
		t.Errorf("Find(wrapped b) = %+v, %v; want Unavailable", a, ok)
	}
	if _, ok := tab.Find(nil); ok {
		t.Error("Find(nil) found an answer")
	}
	if _, ok := tab.Find(errors.New("c")); ok {
		t.Error("Find(other) found an answer")
	}
}
