package fakewecom

import (
	"net/url"
	"testing"
)

// TestTrusts: a trusted domain with a port admits that host and port
// only; without one, the host on any port; none admits anything.
func TestTrusts(t *testing.T) {
	tests := []struct {
		domain, uri string
		want        bool
	}{
		{"", "https://evil.example/cb", true},
		{"yidu.example.com", "https://yidu.example.com/login/wecom/callback", true},
		{"yidu.example.com", "https://yidu.example.com:8443/cb", true},
		{"yidu.example.com", "https://evil.example/cb", false},
		{"yidu.example.com", "https://yidu.example.com.evil.example/cb", false},
		{"127.0.0.1", "http://127.0.0.1:34015/r/hr/signin", true},
		{"127.0.0.1:8081", "http://127.0.0.1:8081/login/wecom/callback", true},
		{"127.0.0.1:8081", "http://127.0.0.1:8082/r/hr/signin", false},
		{"127.0.0.1:8081", "http://127.0.0.1/cb", false},
	}
	for _, tc := range tests {
		u, err := url.Parse(tc.uri)
		if err != nil {
			t.Fatal(err)
		}
		a := &App{RedirectDomain: tc.domain}
		if got := a.trusts(u); got != tc.want {
			t.Errorf("App{RedirectDomain: %q}.trusts(%q) = %v; want %v", tc.domain, tc.uri, got, tc.want)
		}
	}
}
