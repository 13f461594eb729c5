// Package clientip finds the address of the client behind a request for
// rate limits: the connection's peer, unless that peer is a proxy the
// operator trusts, in which case the nearest address in X-Forwarded-For
// that is not itself a trusted proxy. Headers from anyone else are
// ignored: a client controls them.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Proxies are the networks whose X-Forwarded-For is believed.
type Proxies []netip.Prefix

// ParseProxies parses CIDRs or single addresses ("10.0.0.0/8", "::1").
func ParseProxies(list []string) (Proxies, error) {
	out := make(Proxies, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("clientip: %q is neither an address nor a CIDR", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

func (p Proxies) trusted(a netip.Addr) bool {
	for _, n := range p {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Trusts reports whether r came straight from a trusted proxy, whose
// other forwarded headers (X-Forwarded-Proto) may then be believed.
func (p Proxies) Trusts(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && p.trusted(a.Unmap())
}

// Of returns the client address of r (invalid when RemoteAddr is not an
// address, as in some tests).
func (p Proxies) Of(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	peer = peer.Unmap()
	if len(p) == 0 || !p.trusted(peer) {
		return peer
	}
	// Walk X-Forwarded-For from the right: each hop appends the address
	// it received from; the first one no trusted proxy added is the client.
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return peer // a malformed hop: trust nothing past it
		}
		a = a.Unmap()
		if !p.trusted(a) {
			return a
		}
		peer = a
	}
	return peer
}
