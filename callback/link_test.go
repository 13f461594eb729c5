package callback

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/testenv"
)

const (
	testPublic = "https://yidu.example.com"
	testTarget = "https://intranet.example.com/notices/42?lang=zh&x=a%20b#top"
)

// linkApps are testApps with secrets, plus an app without one.
var linkApps = []App{
	withSecret(testApps[0], "hr-secret-0123456789abcdefghijklmnopqrstuvw"),
	withSecret(testApps[1], "ops-secret-0123456789abcdefghijklmnopqrstuv"),
	{App: yidu.App{Name: "nosecret", CorpID: "wwcorp3", AgentID: 3}, Token: "t3", EncodingAESKey: opsKey},
}

// withSecret gives a the link key cmd derives from the app secret.
func withSecret(a App, secret string) App {
	a.LinkKey = LinkKey(a.Name, secret)
	return a
}

// fakeOAuth maps codes to UserIDs ("" for a non-member); other codes fail.
type fakeOAuth struct {
	codes map[string]string
	calls callLog[string] // corp/code
}

var errBadCode = errors.New("errcode 40029: invalid code (test)")

func (f *fakeOAuth) UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error) {
	f.calls.add(corpID + "/" + code)
	id, ok := f.codes[code]
	if !ok {
		return "", errBadCode
	}
	return id, nil
}

type linkHarness struct {
	*harness
	oauth *fakeOAuth
	logs  *testenv.SyncBuffer
}

func newLinkHarness(tb testing.TB, mod func(*Options)) *linkHarness {
	tb.Helper()
	return newLinkHarnessReads(tb, nil, mod)
}

// newLinkHarnessReads is newLinkHarness recording through reads (nil: the fake).
func newLinkHarnessReads(tb testing.TB, reads ReadRecorder, mod func(*Options)) *linkHarness {
	tb.Helper()
	lh := &linkHarness{
		oauth: &fakeOAuth{codes: map[string]string{"c-zhang": "zhangsan", "c-li": "lisi", "c-guest": ""}},
		logs:  &testenv.SyncBuffer{},
	}
	lh.harness = newHarnessReads(tb, reads, func(o *Options) {
		o.Apps = linkApps
		o.PublicURL = testPublic + "/" // the trailing slash is dropped
		o.OAuth = lh.oauth
		o.Logger = slog.New(slog.NewJSONHandler(lh.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		if mod != nil {
			mod(o)
		}
	})
	return lh
}

// get requests target with headers kv.
func (h *harness) get(tb testing.TB, target string, kv ...string) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, req)
	return w
}

// mustLink returns the request target (path and query) of a tracked link.
func mustLink(tb testing.TB, app, msgID, to string) string {
	tb.Helper()
	a := appNamed(tb, app)
	u, err := LinkURL(testPublic, a.Name, a.LinkKey, msgID, to)
	if err != nil {
		tb.Fatalf("LinkURL(%s, %s, %q): %v", app, msgID, to, err)
	}
	return strings.TrimPrefix(u, testPublic)
}

func appNamed(tb testing.TB, name string) App {
	tb.Helper()
	for _, a := range linkApps {
		if a.Name == name {
			return a
		}
	}
	tb.Fatalf("no app %q", name)
	return App{}
}

func TestLinkURL(t *testing.T) {
	hr := appNamed(t, "hr")
	got, err := LinkURL(testPublic+"/wecom/", hr.Name, hr.LinkKey, "notice-1", testTarget)
	if err != nil {
		t.Fatal(err)
	}
	sig := linkSig(hr.LinkKey, "notice-1", testTarget)
	want := testPublic + "/wecom/r/hr/notice-1?to=" + url.QueryEscape(testTarget) + "&sig=" + sig
	if got != want {
		t.Errorf("LinkURL = %q; want %q", got, want)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(sig) {
		t.Errorf("sig %q is not 32 lower-case hex characters", sig)
	}
	if linkSig(hr.LinkKey, "notice-1", testTarget) != linkSig(withSecret(hr, "hr-secret-0123456789abcdefghijklmnopqrstuvw").LinkKey, "notice-1", testTarget) {
		t.Error("the signature is not deterministic")
	}
	errs := []struct {
		name              string
		public, msgID, to string
		app               App
	}{
		{"no public url", "", "notice-1", testTarget, hr},
		{"relative public url", "/yidu", "notice-1", testTarget, hr},
		{"no secret", testPublic, "notice-1", testTarget, appNamed(t, "nosecret")},
		{"send batch msgid", testPublic, "notice-1@0", testTarget, hr},
		{"empty msgid", testPublic, "", testTarget, hr},
		{"javascript target", testPublic, "notice-1", "javascript:alert(1)", hr},
		{"relative target", testPublic, "notice-1", "//evil.example.com/", hr},
		{"target with a space", testPublic, "notice-1", "https://a.example.com/x y", hr},
		{"target too long", testPublic, "notice-1", "https://a.example.com/" + strings.Repeat("a", maxLinkTarget), hr},
	}
	for _, tt := range errs {
		if u, err := LinkURL(tt.public, tt.app.Name, tt.app.LinkKey, tt.msgID, tt.to); err == nil {
			t.Errorf("%s: LinkURL = %q; want an error", tt.name, u)
		}
	}
}

// TestLinkRejected: a link that does not verify is refused on both routes,
// redirects nowhere, exchanges no code and records nothing.
func TestLinkRejected(t *testing.T) {
	good := mustLink(t, "hr", "notice-1", testTarget)
	q := func(target string) url.Values {
		u, _ := url.Parse(target)
		return u.Query()
	}(good)
	sig := q.Get("sig")
	hrKey := appNamed(t, "hr").LinkKey
	build := func(app, msgID, to, sig string) string {
		v := url.Values{}
		if to != "" {
			v.Set("to", to)
		}
		if sig != "" {
			v.Set("sig", sig)
		}
		return "/r/" + app + "/" + msgID + "?" + v.Encode()
	}
	tests := []struct {
		name    string
		target  string
		status  int
		outcome outcome
		app     string
	}{
		{"tampered to", build("hr", "notice-1", "https://evil.example.com/", sig), 403, outLinkSignature, "hr"},
		{"to with a suffix", build("hr", "notice-1", testTarget+"&next=https://evil.example.com", sig), 403, outLinkSignature, "hr"},
		{"tampered msgid", build("hr", "notice-2", testTarget, sig), 403, outLinkSignature, "hr"},
		{"wrong app", build("ops", "notice-1", testTarget, sig), 403, outLinkSignature, "ops"},
		{"missing sig", build("hr", "notice-1", testTarget, ""), 400, outBadLink, "hr"},
		{"short sig", build("hr", "notice-1", testTarget, sig[:31]), 403, outLinkSignature, "hr"},
		{"upper-case sig", build("hr", "notice-1", testTarget, strings.ToUpper(sig)), 403, outLinkSignature, "hr"},
		{"full-length HMAC", build("hr", "notice-1", testTarget, sig+"00000000000000000000000000000000"), 403, outLinkSignature, "hr"},
		{"app without secret, empty-key HMAC", build("nosecret", "notice-1", testTarget, linkSig(nil, "notice-1", testTarget)), 403, outLinkSignature, "nosecret"},
		{"missing to", build("hr", "notice-1", "", sig), 400, outBadLink, "hr"},
		{"signed javascript: target", build("hr", "notice-1", "javascript:alert(1)", linkSig(hrKey, "notice-1", "javascript:alert(1)")), 400, outBadLink, "hr"},
		{"signed scheme-relative target", build("hr", "notice-1", "//evil.example.com", linkSig(hrKey, "notice-1", "//evil.example.com")), 400, outBadLink, "hr"},
		{"msgid with @", build("hr", "notice-1@0", testTarget, linkSig(hrKey, "notice-1@0", testTarget)), 400, outBadLink, "hr"},
		{"msgid with %", build("hr", "notice%2D1", testTarget, sig), 400, outBadLink, "hr"},
		{"unknown app", build("nope", "notice-1", testTarget, sig), 404, outUnknownApp, unknownApp},
	}
	for _, route := range []string{"link", "landing"} {
		for _, tt := range tests {
			t.Run(route+"/"+tt.name, func(t *testing.T) {
				h := newLinkHarness(t, nil)
				target := tt.target
				if route == "landing" {
					path, query, _ := strings.Cut(target, "?")
					target = path + "/landing?" + query + "&code=c-zhang&state=s"
				}
				w := h.get(t, target)
				if w.Code != tt.status {
					t.Errorf("GET %s = %d %q; want %d", target, w.Code, w.Body, tt.status)
				}
				if loc := w.Header().Get("Location"); loc != "" {
					t.Errorf("GET %s redirects to %q; want no redirect", target, loc)
				}
				if got := h.requests(t, tt.app, tt.outcome); got != 1 {
					t.Errorf("requests_total{app=%s,outcome=%s} = %v; want 1", tt.app, outcomes[tt.outcome].label, got)
				}
				if n := len(h.oauth.calls.all()); n != 0 {
					t.Errorf("%d code exchanges; want none", n)
				}
				if links := h.reads.linkCalls(); len(links) != 0 {
					t.Errorf("LinkRead calls %+v; want none", links)
				}
			})
		}
	}
}

// follow requests the link, checks the authorize redirect and returns the
// landing's request target as WeCom would send the member back with code.
func (lh *linkHarness) follow(tb testing.TB, link, code string) string {
	tb.Helper()
	w := lh.get(tb, link)
	if w.Code != http.StatusFound {
		tb.Fatalf("GET %s = %d %q; want 302", link, w.Code, w.Body)
	}
	loc, err := url.Parse(w.Header().Get("Location"))
	if err != nil {
		tb.Fatal(err)
	}
	q := loc.Query()
	landing, err := url.Parse(q.Get("redirect_uri"))
	if err != nil {
		tb.Fatal(err)
	}
	return landing.RequestURI() + "&code=" + url.QueryEscape(code) + "&state=" + q.Get("state")
}

func TestLinkFlow(t *testing.T) {
	h := newLinkHarness(t, nil)
	link := mustLink(t, "hr", "notice-1", testTarget)

	// Step 1: the link sends the member to WeCom's OAuth2 page; the
	// headers a client controls do not move the redirect_uri.
	w := h.get(t, link, "Host", "evil.example.com", "X-Forwarded-Host", "evil.example.com", "X-Forwarded-Proto", "http")
	if w.Code != http.StatusFound {
		t.Fatalf("GET link = %d %q; want 302", w.Code, w.Body)
	}
	loc := w.Header().Get("Location")
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != "open.weixin.qq.com" || u.Path != "/connect/oauth2/authorize" || u.Fragment != "wechat_redirect" {
		t.Errorf("Location = %q; want WeCom's authorize URL with #wechat_redirect", loc)
	}
	if !strings.HasPrefix(u.RawQuery, "appid="+vecCorpID+"&redirect_uri=") {
		t.Errorf("query %q does not start appid=…&redirect_uri= (the document's order)", u.RawQuery)
	}
	q := u.Query()
	wantLanding := testPublic + "/r/hr/notice-1/landing?to=" + url.QueryEscape(testTarget) + "&sig=" + linkSig(appNamed(t, "hr").LinkKey, "notice-1", testTarget)
	for k, want := range map[string]string{"appid": vecCorpID, "redirect_uri": wantLanding, "response_type": "code", "scope": "snsapi_base", "agentid": "218"} {
		if got := q.Get(k); got != want {
			t.Errorf("authorize %s = %q; want %q", k, got, want)
		}
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(q.Get("state")) {
		t.Errorf("state = %q; want 16 random hex characters", q.Get("state"))
	}
	if w.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control = %q; want no-store", w.Header().Get("Cache-Control"))
	}
	if st := h.follow(t, link, "x"); strings.Contains(st, q.Get("state")) {
		t.Errorf("state %q repeated on the next visit", q.Get("state"))
	}

	// Step 2: WeCom sends the member back with a code: read, then the page.
	steps := []struct {
		code   string
		user   string
		result string
	}{
		{"c-zhang", "zhangsan", landRead},
		{"c-zhang", "zhangsan", landNoNewRead}, // opened again
		{"c-li", "lisi", landRead},
	}
	for i, st := range steps {
		landing := h.follow(t, link, st.code)
		w := h.get(t, landing, "Host", "evil.example.com")
		if w.Code != http.StatusFound || w.Header().Get("Location") != testTarget {
			t.Fatalf("step %d: GET landing = %d Location %q; want 302 to %q", i, w.Code, w.Header().Get("Location"), testTarget)
		}
		if w.Header().Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("step %d: Referrer-Policy = %q; want no-referrer", i, w.Header().Get("Referrer-Policy"))
		}
		links := h.reads.linkCalls()
		want := cardCall{vecCorpID, vecAgent, st.user, "notice-1", h.now}
		if len(links) != i+1 || links[i] != want {
			t.Errorf("step %d: LinkRead calls %+v; want the last %+v", i, links, want)
		}
	}
	for result, want := range map[string]float64{landRead: 2, landNoNewRead: 1, landExchangeFailed: 0} {
		if got := h.counter(t, "yidu_callback_link_landings_total", "app", "hr", "result", result); got != want {
			t.Errorf("link_landings_total{result=%s} = %v; want %v", result, got, want)
		}
	}
	if got := h.counter(t, "yidu_callback_new_reads_total", "app", "hr", "signal", "link"); got != 2 {
		t.Errorf("new_reads_total{signal=link} = %v; want 2", got)
	}
	if got := h.requests(t, "hr", outLinkLanded); got != 3 {
		t.Errorf("requests_total{outcome=link_landed} = %v; want 3", got)
	}
	if got := h.requests(t, "hr", outLinkAuthorize); got != 5 {
		t.Errorf("requests_total{outcome=link_authorize} = %v; want 5", got)
	}
}

// TestLandingAlwaysRedirects: whatever goes wrong after the link verified,
// the member reaches the page; only a durable read counts as read.
func TestLandingAlwaysRedirects(t *testing.T) {
	errRedis := errors.New("redis down (test)")
	tests := []struct {
		name      string
		mod       func(*Options)
		prepare   func(*linkHarness)
		codes     []string // one landing per code
		result    string   // of the last landing
		linkReads int      // LinkRead calls in all
	}{
		{name: "no code", codes: []string{""}, result: landNoCode},
		{name: "code too long", codes: []string{strings.Repeat("c", maxOAuthCode+1)}, result: landNoCode},
		{name: "code refused", codes: []string{"made-up"}, result: landExchangeFailed},
		{name: "not a member", codes: []string{"c-guest"}, result: landNotMember},
		{name: "recorder fails", codes: []string{"c-zhang"}, result: landRecordFailed, linkReads: 0,
			prepare: func(h *linkHarness) { h.reads.set(errRedis, false) }},
		{name: "recorder hangs", codes: []string{"c-zhang"}, result: landRecordFailed,
			mod:     func(o *Options) { o.Timeout = 50 * time.Millisecond },
			prepare: func(h *linkHarness) { h.reads.set(nil, true) }},
		{name: "exchange rate", codes: []string{"c-zhang", "c-li"}, result: landExchangeLimited, linkReads: 1,
			mod: func(o *Options) { o.LinkExchangeRate = 0.001 }},
		{name: "member rate", codes: []string{"c-zhang", "c-zhang"}, result: landRateLimited, linkReads: 1,
			mod: func(o *Options) { o.MemberRate, o.MemberBurst = 0.001, 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newLinkHarness(t, tt.mod)
			if tt.prepare != nil {
				tt.prepare(h)
			}
			link := mustLink(t, "hr", "notice-1", testTarget)
			for _, code := range tt.codes {
				landing := h.follow(t, link, code)
				if code == "" {
					landing = strings.Replace(landing, "&code=&", "&", 1)
				}
				w := h.get(t, landing)
				if w.Code != http.StatusFound || w.Header().Get("Location") != testTarget {
					t.Fatalf("GET landing = %d %q Location %q; want 302 to the target", w.Code, w.Body, w.Header().Get("Location"))
				}
			}
			if got := h.counter(t, "yidu_callback_link_landings_total", "app", "hr", "result", tt.result); got != 1 {
				t.Errorf("link_landings_total{result=%s} = %v; want 1", tt.result, got)
			}
			if got := len(h.reads.linkCalls()); got != tt.linkReads {
				t.Errorf("LinkRead recorded %d calls; want %d", got, tt.linkReads)
			}
			logs := h.logs.String()
			if tt.result == landRecordFailed {
				if !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, "read not recorded") {
					t.Errorf("logs %q; want an error-level line for the lost read", logs)
				}
			} else if strings.Contains(logs, `"level":"ERROR"`) {
				t.Errorf("logs %q; want no error level", logs)
			}
			for _, secret := range []string{"c-zhang", "c-li", "zhangsan"} {
				if strings.Contains(logs, secret) {
					t.Errorf("logs carry %q: %s", secret, logs)
				}
			}
		})
	}
}

func TestLinksDisabled(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Apps = linkApps })
	if w := h.get(t, mustLink(t, "hr", "notice-1", testTarget)); w.Code != http.StatusNotFound {
		t.Errorf("GET link without PublicURL = %d; want 404 (links disabled)", w.Code)
	}
	for name, opts := range map[string]Options{
		"no OAuth":         {Apps: linkApps, PublicURL: testPublic},
		"relative URL":     {Apps: linkApps, PublicURL: "yidu.example.com", OAuth: &fakeOAuth{}},
		"public URL query": {Apps: linkApps, PublicURL: testPublic + "/?a=b", OAuth: &fakeOAuth{}},
		"not http(s)":      {Apps: linkApps, PublicURL: "ftp://yidu.example.com", OAuth: &fakeOAuth{}},
	} {
		if _, err := New(&fakeReads{}, opts); err == nil {
			t.Errorf("New(%s) = nil error", name)
		}
	}
}

// TestLandingFloodSparesOthers: 3000 landings with made-up codes on one
// signed link, from one address, within one second, leave a real member's
// landing on another notice, from another address, recorded: the flood
// spends its address's and its link's share of the exchange budget, not
// the receiver's (issue: tracked-link reads suppressed for everyone).
func TestLandingFloodSparesOthers(t *testing.T) {
	tests := []struct {
		name    string
		proxies []string
		// attacker and member are (RemoteAddr, X-Forwarded-For).
		attacker, member [2]string
	}{
		{name: "direct", attacker: [2]string{"198.51.100.1:1000", ""}, member: [2]string{"203.0.113.9:2000", ""}},
		{name: "behind a trusted proxy", proxies: []string{"10.0.0.0/8"},
			attacker: [2]string{"10.0.0.2:1000", "198.51.100.1"}, member: [2]string{"10.0.0.2:1001", "203.0.113.9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proxies, err := clientip.ParseProxies(tt.proxies)
			if err != nil {
				t.Fatal(err)
			}
			h := newLinkHarness(t, func(o *Options) { o.TrustedProxies = proxies })
			land := func(link, code string, from [2]string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(http.MethodGet, h.follow(t, link, code), nil)
				r.RemoteAddr = from[0]
				if from[1] != "" {
					r.Header.Set("X-Forwarded-For", from[1])
				}
				w := httptest.NewRecorder()
				h.h.ServeHTTP(w, r)
				return w
			}
			flooded := mustLink(t, "hr", "notice-1", testTarget)
			for i := range 3000 {
				if w := land(flooded, "made-up-"+strconv.Itoa(i), tt.attacker); w.Code != http.StatusFound {
					t.Fatalf("flood landing %d = %d; want 302", i, w.Code)
				}
			}
			limited := h.counter(t, "yidu_callback_link_landings_total", "app", "hr", "result", landExchangeLimited)
			if limited < 2000 {
				t.Errorf("exchange_limited landings = %v of 3000; want the flood held back", limited)
			}
			if w := land(mustLink(t, "hr", "notice-2", testTarget), "c-zhang", tt.member); w.Code != http.StatusFound {
				t.Fatalf("member landing = %d; want 302", w.Code)
			}
			if got := h.counter(t, "yidu_callback_link_landings_total", "app", "hr", "result", landRead); got != 1 {
				t.Errorf("link_landings_total{result=read} = %v; want the member's read recorded", got)
			}
		})
	}
}

// TestLinkOAuthBase: a tracked link sends the member to the configured
// WeCom OAuth2 host (wecom.oauth_base), not to WeCom's own one; a base
// that is no http(s) origin is refused at New.
func TestLinkOAuthBase(t *testing.T) {
	h := newLinkHarness(t, func(o *Options) { o.OAuthBase = "http://127.0.0.1:8099/" })
	w := h.get(t, mustLink(t, "hr", "notice-1", testTarget))
	u, err := url.Parse(w.Header().Get("Location"))
	if w.Code != http.StatusFound || err != nil {
		t.Fatalf("GET link = %d %q; want 302", w.Code, w.Header().Get("Location"))
	}
	if u.Scheme != "http" || u.Host != "127.0.0.1:8099" || u.Path != "/connect/oauth2/authorize" || u.Query().Get("scope") != "snsapi_base" {
		t.Errorf("Location = %q; want the configured base's /connect/oauth2/authorize", u)
	}
	_, err = New(&fakeReads{}, Options{Apps: linkApps, PublicURL: testPublic, OAuth: &fakeOAuth{}, OAuthBase: "ftp://x?y"})
	if err == nil {
		t.Error("New with OAuthBase ftp://x?y = nil error; want refused")
	}
}

// TestLinkToOwnPage: the tracked link of a notice hosted on this
// receiver's reading page sends the member straight to the page, which
// signs them in and records the link with the version it shows; the link
// records nothing itself (one code exchange a reader, one record a read).
// A link to the same path of another app or message still lands.
func TestLinkToOwnPage(t *testing.T) {
	h := newLinkHarness(t, nil)
	own := testPublic + "/r/hr/notice-1"
	w := h.get(t, mustLink(t, "hr", "notice-1", own))
	if w.Code != http.StatusFound || w.Header().Get("Location") != own {
		t.Fatalf("GET own page's link = %d Location %q; want 302 to %q", w.Code, w.Header().Get("Location"), own)
	}
	if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v; want no-store and no-referrer", w.Header())
	}
	if calls := h.reads.linkCalls(); len(calls) != 0 {
		t.Errorf("LinkRead calls %+v; want none: the page records the read", calls)
	}
	if got := h.counter(t, "yidu_callback_link_landings_total", "app", "hr", "result", landPage); got != 1 {
		t.Errorf("link_landings_total{result=page} = %v; want 1", got)
	}
	for _, other := range []string{testPublic + "/r/hr/notice-2", testPublic + "/r/ops/notice-1", "https://evil.example.com/r/hr/notice-1"} {
		w := h.get(t, mustLink(t, "hr", "notice-1", other))
		if loc := w.Header().Get("Location"); w.Code != http.StatusFound || !strings.Contains(loc, "/connect/oauth2/authorize") {
			t.Errorf("link to %s = %d Location %q; want WeCom's authorize page", other, w.Code, loc)
		}
	}
}
