package clientip

import (
	"net/http/httptest"
	"testing"
)

func TestOf(t *testing.T) {
	proxies, err := ParseProxies([]string{"10.0.0.0/8", "192.168.1.1"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		proxies Proxies
		remote  string
		xff     []string
		want    string
	}{
		{name: "no proxies: the peer", remote: "203.0.113.5:4000", xff: []string{"1.2.3.4"}, want: "203.0.113.5"},
		{name: "untrusted peer's header is ignored", proxies: proxies, remote: "203.0.113.5:4000", xff: []string{"1.2.3.4"}, want: "203.0.113.5"},
		{name: "trusted peer: the client it names", proxies: proxies, remote: "10.1.2.3:4000", xff: []string{"198.51.100.7"}, want: "198.51.100.7"},
		{name: "a spoofed leftmost hop does not win", proxies: proxies, remote: "10.1.2.3:4000", xff: []string{"1.1.1.1, 198.51.100.7"}, want: "198.51.100.7"},
		{name: "through two trusted proxies", proxies: proxies, remote: "10.1.2.3:4000", xff: []string{"198.51.100.7, 192.168.1.1"}, want: "198.51.100.7"},
		{name: "several headers", proxies: proxies, remote: "10.1.2.3:4000", xff: []string{"1.1.1.1", "198.51.100.7"}, want: "198.51.100.7"},
		{name: "garbage hop: the last trusted address", proxies: proxies, remote: "10.1.2.3:4000", xff: []string{"nonsense"}, want: "10.1.2.3"},
		{name: "no header behind a proxy", proxies: proxies, remote: "10.1.2.3:4000", want: "10.1.2.3"},
		{name: "IPv6 peer", remote: "[2001:db8::1]:443", want: "2001:db8::1"},
		{name: "IPv4-mapped peer", remote: "[::ffff:203.0.113.5]:443", want: "203.0.113.5"},
		{name: "not an address", remote: "pipe", want: "invalid IP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := tt.proxies.Of(r).String(); got != tt.want {
				t.Errorf("Of(%s, %q) = %s; want %s", tt.remote, tt.xff, got, tt.want)
			}
		})
	}
	if _, err := ParseProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("ParseProxies(bad CIDR) = nil error")
	}
}

func TestTrusts(t *testing.T) {
	proxies, err := ParseProxies([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	for remote, want := range map[string]bool{
		"10.1.2.3:4000":          true,
		"[::ffff:10.1.2.3]:4000": true,
		"203.0.113.5:4000":       false,
		"10.1.2.3":               false, // no port: not a peer address
		"pipe":                   false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		if got := proxies.Trusts(r); got != want {
			t.Errorf("Trusts(%s) = %v; want %v", remote, got, want)
		}
	}
}
