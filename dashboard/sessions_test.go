package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/webedge"
)

// request sends method target with cookie c (may be nil) and, for a
// POST, the CSRF token as a form field.
func (f *fixture) request(tb testing.TB, method, target string, c *http.Cookie, csrf string) int {
	tb.Helper()
	var r *http.Request
	if method == http.MethodPost {
		r = httptest.NewRequest(method, target, strings.NewReader(url.Values{csrfField: {csrf}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	return f.browse(r, c, nil).Code
}

// TestSessionsSharedByReplicas: two dashboards on one Redis store are two
// replicas behind an ingress: a sign-in on one works on the other (CSRF
// token included), survives a restart, and a sign-out on either ends it
// on both.
func TestSessionsSharedByReplicas(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	store := webedge.DashboardSessions(rdb, prefix)
	withStore := func(o *deps) { o.Sessions = store }
	a := newFixtureOpts(t, false, withStore)
	b := newFixtureOpts(t, false, withStore)

	c, csrf := a.login(t)
	if code := b.request(t, "GET", "/api/v1/messages/hello", c, ""); code != http.StatusOK {
		t.Fatalf("replica B with A's session = %d; want 200", code)
	}
	if code := b.request(t, "GET", "/", c, ""); code != http.StatusOK {
		t.Errorf("replica B page with A's session = %d; want 200", code)
	}
	// The CSRF token follows the session: A's page token is good on B.
	if code := b.request(t, "POST", "/api/v1/messages/hello/remind", c, "wrong"); code != http.StatusForbidden {
		t.Errorf("POST on B with a wrong CSRF token = %d; want 403", code)
	}

	restarted := newFixtureOpts(t, false, withStore)
	if code := restarted.request(t, "GET", "/api/v1/messages/hello", c, ""); code != http.StatusOK {
		t.Errorf("after a restart = %d; want 200 (the session is in Redis)", code)
	}

	if code := b.request(t, "POST", "/logout", c, csrf); code != http.StatusSeeOther {
		t.Fatalf("logout on B = %d; want 303", code)
	}
	for name, f := range map[string]*fixture{"A": a, "B": b, "restarted": restarted} {
		if code := f.request(t, "GET", "/api/v1/messages/hello", c, ""); code != http.StatusUnauthorized {
			t.Errorf("replica %s after sign-out = %d; want 401", name, code)
		}
	}

	keys, err := rdb.Keys(context.Background(), prefix+":session:*").Result()
	testenv.Check(t, "KEYS", err)
	if len(keys) != 0 {
		t.Errorf("session keys left after sign-out: %v", keys)
	}
}

// TestRemovedUserSignedOut: a session outlives no user: the next deploy
// without the user ends it.
func TestRemovedUserSignedOut(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	store := webedge.DashboardSessions(rdb, prefix)
	a := newFixtureOpts(t, false, func(o *deps) { o.Sessions = store })
	c, _ := a.login(t)
	without := newFixtureOpts(t, false, func(o *deps) { o.Sessions = store; o.Users = nil })
	if code := without.request(t, "GET", "/api/v1/messages/hello", c, ""); code != http.StatusUnauthorized {
		t.Errorf("session of a removed user = %d; want 401", code)
	}
}

// brokenStore fails every call, as an unreachable Redis does.
type brokenStore struct{}

var errDown = errors.New("redis: connection refused")

func (brokenStore) Put(context.Context, string, access.Session, time.Duration) error { return errDown }
func (brokenStore) Get(context.Context, string) (access.Session, bool, error) {
	return access.Session{}, false, errDown
}
func (brokenStore) Delete(context.Context, string) error { return errDown }

func TestSessionStoreDown(t *testing.T) {
	f := newFixtureOpts(t, false, func(o *deps) { o.Sessions = brokenStore{} })
	if w := f.postLogin("alice", password, nil); w.Code != http.StatusServiceUnavailable {
		t.Errorf("login with the store down = %d; want 503", w.Code)
	}
	c := &http.Cookie{Name: sessionCookie, Value: "some-session"}
	if code := f.request(t, "GET", "/api/v1/messages", c, ""); code != http.StatusServiceUnavailable {
		t.Errorf("API with the store down = %d; want 503, not a sign-out", code)
	}
	// Bearer tokens need no session store.
	if w := f.do(t, "GET", "/api/v1/messages", acmeToken, nil); w.Code != http.StatusOK {
		t.Errorf("bearer with the store down = %d; want 200", w.Code)
	}
}

func TestClientIPBehindTrustedProxy(t *testing.T) {
	s := &Server{proxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	tests := []struct {
		name, peer, xff, proto string
		want                   string
		secure                 bool
	}{
		{"direct client, header ignored", "203.0.113.7:5000", "198.51.100.1", "https", "203.0.113.7", false},
		{"through the ingress", "10.1.2.3:5000", "198.51.100.1", "https", "198.51.100.1", true},
		{"spoofed leftmost hop", "10.1.2.3:5000", "1.1.1.1, 198.51.100.1", "http", "198.51.100.1", false},
		{"two trusted hops", "10.1.2.3:5000", "198.51.100.1, 10.9.9.9", "", "198.51.100.1", false},
		{"no header", "10.1.2.3:5000", "", "", "10.1.2.3", false},
		{"garbage hop", "10.1.2.3:5000", "bogus", "", "10.1.2.3", false},
		{"ipv6 proxy", "[fd00::1]:5000", "2001:db8::5", "HTTPS", "2001:db8::5", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			if tt.xff != "" {
				r.Header.Set("X-Forwarded-For", tt.xff)
			}
			if tt.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tt.proto)
			}
			if got := s.clientIP(r); got != tt.want {
				t.Errorf("clientIP(peer %s, XFF %q) = %s; want %s", tt.peer, tt.xff, got, tt.want)
			}
			if got := s.secure(r); got != tt.secure {
				t.Errorf("secure(peer %s, proto %q) = %v; want %v", tt.peer, tt.proto, got, tt.secure)
			}
		})
	}
}

// TestPublicURLSecureCookie (issue 13 item 11): with an https public URL
// the session cookie is Secure though the dashboard sees plain HTTP (TLS
// ended at an ingress that forwards no X-Forwarded-Proto); without one it
// is not.
func TestPublicURLSecureCookie(t *testing.T) {
	for _, tc := range []struct {
		url    string
		secure bool
	}{{"https://dash.example.com", true}, {"http://dash.example.com", false}, {"", false}} {
		f := newFixtureOpts(t, false, func(o *deps) { o.PublicURL = tc.url })
		c, _ := f.login(t)
		if c.Secure != tc.secure {
			t.Errorf("public URL %q: cookie Secure = %v; want %v", tc.url, c.Secure, tc.secure)
		}
	}
}
