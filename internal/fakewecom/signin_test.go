package fakewecom_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
)

// TestSignInPages: each sign-in page redirects back with a code for the
// chosen member; getuserinfo takes it once and within 5 minutes (doc
// path 91023), and refuses a redirect_uri outside the trusted domain.
func TestSignInPages(t *testing.T) {
	c := seed()
	c.Apps[0].RedirectDomain = "yidu.example.com"
	s := fakewecom.New(c)
	var mu sync.Mutex
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	base := fakewecom.Start(t, s)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tok := call(t, base, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"wwfake"}, "corpsecret": {"sec"}}, "")["access_token"].(string)
	userinfo := func(code string) map[string]any {
		return call(t, base, "GET", "/cgi-bin/auth/getuserinfo", url.Values{"access_token": {tok}, "code": {code}}, "")
	}
	signIn := func(path string, q url.Values) (*http.Response, string) {
		t.Helper()
		resp, err := noFollow.Get(base + path + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			return resp, ""
		}
		back, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || back.Host != "yidu.example.com" || back.Query().Get("state") != "st1" {
			t.Fatalf("redirect to %s", resp.Header.Get("Location"))
		}
		return resp, back.Query().Get("code")
	}
	oauth := url.Values{"appid": {"wwfake"}, "agentid": {"1"}, "redirect_uri": {"https://yidu.example.com/login/wecom/callback"},
		"response_type": {"code"}, "scope": {"snsapi_base"}, "state": {"st1"}, "as": {"b"}}
	sso := url.Values{"login_type": {"CorpApp"}, "appid": {"wwfake"}, "agentid": {"1"}, "redirect_uri": {"https://yidu.example.com/login/wecom/callback"},
		"state": {"st1"}, "as": {"c"}}
	for _, tc := range []struct {
		path string
		q    url.Values
		user string
	}{{"/connect/oauth2/authorize", oauth, "b"}, {"/wwlogin/sso/login", sso, "c"}} {
		_, code := signIn(tc.path, tc.q)
		if code == "" {
			t.Fatalf("%s: no code", tc.path)
		}
		if got := userinfo(code); got["userid"] != tc.user {
			t.Errorf("%s: getuserinfo = %v, want %s", tc.path, got, tc.user)
		}
		if got := userinfo(code); got["errcode"] != float64(fakewecom.ErrInvalidCode) {
			t.Errorf("%s: a used code = %v, want 40029", tc.path, got)
		}
	}
	_, code := signIn("/connect/oauth2/authorize", oauth)
	mu.Lock()
	now = now.Add(5 * time.Minute)
	mu.Unlock()
	if got := userinfo(code); got["errcode"] != float64(fakewecom.ErrInvalidCode) {
		t.Errorf("a code 5 minutes old = %v, want 40029", got)
	}
	for name, edit := range map[string]func(url.Values){
		"another host":   func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") },
		"unknown member": func(q url.Values) { q.Set("as", "nobody") },
		"wrong scope":    func(q url.Values) { q.Set("scope", "snsapi_privateinfo") },
		"unknown agent":  func(q url.Values) { q.Set("agentid", "9") },
	} {
		q := url.Values{}
		for k, v := range oauth {
			q[k] = v
		}
		edit(q)
		if resp, _ := signIn("/connect/oauth2/authorize", q); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
	// Without as=, the page lists the members to choose from.
	q := url.Values{}
	for k, v := range sso {
		q[k] = v
	}
	q.Del("as")
	resp, err := http.Get(base + "/wwlogin/sso/login?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, u := range []string{"as=a", "as=b", "as=c"} {
		if !strings.Contains(sb.String(), u) {
			t.Errorf("member page lacks %s: %s", u, sb.String())
		}
	}
}
