package callback

import (
	"crypto/hmac"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzLinkParams drives tracked link parsing with a msgid (the path
// segment), a target and a raw query. Nothing may panic; parseLink accepts
// only what the app's key signed, with a valid msgid and an http(s)
// target; rejections are 4xx of the outcomes table; every link LinkURL
// builds verifies, through the router too, and no other target does.
func FuzzLinkParams(f *testing.F) {
	hr := appNamed(f, "hr")
	key := hr.LinkKey
	for _, s := range []struct{ msgID, to, raw string }{
		{"notice-1", testTarget, "to=" + url.QueryEscape(testTarget) + "&sig=" + linkSig(key, "notice-1", testTarget)},
		{"a", "http://h", "to=http://h&sig=" + linkSig(key, "a", "http://h")},
		{"notice-1", "javascript:alert(1)", "to=javascript:alert(1)&sig=00"},
		{"n@1", "https://a/b c", "to=%zz&sig=%zz"},
		{"", "", ""},
		{strings.Repeat("m", 129), "HTTPS://A", "sig=&to=&to=https://x&sig=" + strings.Repeat("0", 32)},
		{"x", "https://a\x00b", "to=https%3A%2F%2Fa%0Ab&sig=1"},
	} {
		f.Add(s.msgID, s.to, s.raw)
	}
	h := newLinkHarness(f, nil)
	f.Fuzz(func(t *testing.T, msgID, to, raw string) {
		// 1. Arbitrary parameters.
		l, err := parseLink(key, msgID, raw)
		if err != nil {
			if o := errorOutcome(err); o != outBadLink && o != outLinkSignature {
				t.Fatalf("parseLink(%q, %q) = %v, outcome %s", msgID, raw, err, outcomes[o].label)
			}
		} else {
			if checkLinkMsgID(l.msgID) != nil || checkLinkTarget(l.to) != nil {
				t.Fatalf("parseLink(%q, %q) accepted msgid %q target %q", msgID, raw, l.msgID, l.to)
			}
			if !hmac.Equal([]byte(l.sig), []byte(linkSig(key, l.msgID, l.to))) || l.to != queryValue(raw, "to") {
				t.Fatalf("parseLink(%q, %q) accepted an unsigned link", msgID, raw)
			}
			u, perr := url.Parse(l.to)
			if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("parseLink accepted target %q", l.to)
			}
		}

		// 2. A link LinkURL builds: verifies, and no other target or msgid does.
		link, err := LinkURL(testPublic, hr.Name, hr.LinkKey, msgID, to)
		if err != nil {
			return
		}
		target := strings.TrimPrefix(link, testPublic)
		path, query, _ := strings.Cut(target, "?")
		l, err = parseLink(key, strings.TrimPrefix(path, "/r/hr/"), query)
		if err != nil || l.to != to || l.msgID != msgID {
			t.Fatalf("LinkURL(%q, %q) = %q, which parses as %+v, %v", msgID, to, link, l, err)
		}
		if _, err := parseLink(key, msgID, "to="+url.QueryEscape(to+"x")+"&sig="+l.sig); err == nil {
			t.Fatalf("sig of %q also verifies %q", to, to+"x")
		}
		if _, err := parseLink(appNamed(t, "ops").LinkKey, msgID, query); err == nil {
			t.Fatalf("hr's link %q verifies for ops", link)
		}
		w := h.get(t, target)
		if w.Code != http.StatusFound {
			t.Fatalf("GET %s = %d %q; want 302", target, w.Code, w.Body)
		}
		loc, err := url.Parse(w.Header().Get("Location"))
		if err != nil {
			t.Fatalf("Location %q: %v", w.Header().Get("Location"), err)
		}
		landing, err := url.Parse(loc.Query().Get("redirect_uri"))
		if err != nil || landing.Query().Get("to") != to {
			t.Fatalf("redirect_uri %q does not carry the target %q", loc.Query().Get("redirect_uri"), to)
		}
	})
}

// BenchmarkLinkLanding measures a landing through the chi router: verify
// the signature, exchange (fake, instant), LinkRead (no-op), redirect.
func BenchmarkLinkLanding(b *testing.B) {
	h := newLinkHarnessReads(b, nopReads{}, func(o *Options) { o.LinkExchangeRate = 1e9 })
	landing := h.follow(b, mustLink(b, "hr", "notice-1", testTarget), "c-zhang")
	b.ReportAllocs()
	for b.Loop() {
		if w := h.get(b, landing); w.Code != http.StatusFound {
			b.Fatalf("status %d", w.Code)
		}
	}
}
