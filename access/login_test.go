package access_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestSafeNext(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/messages/m1?tab=unread", "/messages/m1?tab=unread"},
		{"/m#frag", "/m#frag"},
		{"", "/"},
		{"//evil.example", "/"},
		{"///evil.example", "/"},
		{"/\\evil.example", "/"},
		{"\\\\evil.example", "/"},
		{"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
		{"evil.example", "/"},
		{"/%2F%2Fevil.example", "/"},
		{"/%2fevil.example", "/"},
		{"/%5cevil.example", "/"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/%0a/evil", "/"},
		{"/a\\b", "/"},
		{" /x", "/"},
		{"/" + strings.Repeat("a", 3000), "/"},
	} {
		if got := access.SafeNext(tc.in); got != tc.want {
			t.Errorf("SafeNext(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzSafeNext: whatever comes in, what comes out resolves, against the
// dashboard's origin, to the dashboard's origin.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/", "//x", "/\\x", "https://x", "/a?b#c", "/%2f/x", "/\t/x"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://yidu.example.com/login/wecom")
	f.Fuzz(func(t *testing.T, next string) {
		out := access.SafeNext(next)
		if out != "/" && out != next {
			t.Fatalf("SafeNext(%q) = %q: neither the input nor /", next, out)
		}
		u, err := url.Parse(out)
		if err != nil {
			t.Fatalf("SafeNext(%q) = %q does not parse: %v", next, out, err)
		}
		if r := base.ResolveReference(u); r.Host != base.Host || r.Scheme != base.Scheme {
			t.Fatalf("SafeNext(%q) = %q resolves to %s", next, out, r)
		}
		if strings.ContainsAny(out, "\\\t\r\n") || strings.HasPrefix(out, "//") {
			t.Fatalf("SafeNext(%q) = %q", next, out)
		}
	})
}

func TestSignInURLs(t *testing.T) {
	e := access.Endpoints{OAuthBase: "http://127.0.0.1:9/", LoginBase: "http://127.0.0.1:9"}
	redirect := "https://yidu.example.com/login/wecom/callback"
	a, err := url.Parse(e.AuthorizeURL("wwcorp", 1000002, redirect, "st8"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Path != "/connect/oauth2/authorize" || a.Fragment != "wechat_redirect" {
		t.Errorf("authorize URL %s", a)
	}
	for k, v := range map[string]string{"appid": "wwcorp", "redirect_uri": redirect, "response_type": "code", "scope": "snsapi_base", "state": "st8", "agentid": "1000002"} {
		if got := a.Query().Get(k); got != v {
			t.Errorf("authorize %s = %q, want %q", k, got, v)
		}
	}
	l, err := url.Parse(e.LoginURL("wwcorp", 1000002, redirect, "st8"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Path != "/wwlogin/sso/login" {
		t.Errorf("login URL %s", l)
	}
	for k, v := range map[string]string{"login_type": "CorpApp", "appid": "wwcorp", "agentid": "1000002", "redirect_uri": redirect, "state": "st8"} {
		if got := l.Query().Get(k); got != v {
			t.Errorf("login %s = %q, want %q", k, got, v)
		}
	}
	for ua, want := range map[string]bool{
		"Mozilla/5.0 (iPhone) AppleWebKit wxwork/4.1.22 MicroMessenger/7.0.1":            true,
		"Mozilla/5.0 (Windows NT 10.0) wxwork/4.1.20 (MicroMessenger/6.2) WindowsWechat": true,
		"Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0":                                   false,
		"Mozilla/5.0 MicroMessenger/8.0":                                                 false, // WeChat, not WeCom
	} {
		if got := access.InWeCom(ua); got != want {
			t.Errorf("InWeCom(%q) = %v", ua, got)
		}
	}
}

// TestStatesOnceAndBound: a state is good once, for the browser that
// started it, and a code once, whether the store sends its commands
// itself or through a pipeline shared with other callers (Through: the
// reading page's, which must carry every one of them).
func TestStatesOnceAndBound(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against Redis")
	}
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			rdb, prefix := testenv.Redis(t)
			s := access.NewStates(rdb, prefix)
			var runs atomic.Int64
			if shared {
				s = s.Through(func(ctx context.Context, fn func(p redis.Pipeliner)) error {
					runs.Add(1)
					p := rdb.Pipeline()
					fn(p)
					_, _ = p.Exec(ctx)
					return nil
				})
			}
			statesOnceAndBound(t, s)
			// Begin 2, Finish 5 (the forged state and the replay included), UseCode 3.
			if want := map[bool]int64{false: 0, true: 10}[shared]; runs.Load() != want {
				t.Errorf("%d commands through the shared pipeline; want %d", runs.Load(), want)
			}
		})
	}
}

func statesOnceAndBound(t *testing.T, s *access.States) {
	ctx := context.Background()

	state, nonce, err := s.Begin(ctx, "wwcorp", "//evil.example")
	if err != nil {
		t.Fatal(err)
	}
	if len(state) > 128 || strings.Trim(state, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
		t.Fatalf("state %q is not WeCom's a-zA-Z0-9 of at most 128", state)
	}
	// Another browser (another nonce) brings the state back: refused, and
	// the state is spent, so the right browser cannot be raced either.
	state2, nonce2, err := s.Begin(ctx, "wwcorp", "/messages/m1")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Finish(ctx, state2, nonce); !errors.Is(err, access.ErrBadState) {
		t.Errorf("Finish with another browser's nonce = %v, want ErrBadState", err)
	}
	if _, _, err := s.Finish(ctx, state2, nonce2); !errors.Is(err, access.ErrBadState) {
		t.Errorf("Finish after a refused try = %v, want ErrBadState", err)
	}
	// A forged state.
	if _, _, err := s.Finish(ctx, "forged0000", nonce); !errors.Is(err, access.ErrBadState) {
		t.Errorf("forged state = %v, want ErrBadState", err)
	}
	next, corp, err := s.Finish(ctx, state, nonce)
	if err != nil || next != "/" || corp != "wwcorp" {
		t.Fatalf("Finish = %q, %q, %v; want /, wwcorp (next was another host)", next, corp, err)
	}
	if _, _, err := s.Finish(ctx, state, nonce); !errors.Is(err, access.ErrBadState) {
		t.Errorf("replayed state = %v, want ErrBadState", err)
	}
	if err := s.UseCode(ctx, "code-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.UseCode(ctx, "code-1"); !errors.Is(err, access.ErrCodeUsed) {
		t.Errorf("replayed code = %v, want ErrCodeUsed", err)
	}
	if err := s.UseCode(ctx, "code-2"); err != nil {
		t.Errorf("another code = %v", err)
	}
}
