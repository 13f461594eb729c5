package webedge

import (
	"crypto/subtle"
	"net/http"
	"net/url"
	"strings"

	"github.com/yidu-io/yidu/internal/clientip"
)

// ClientIP is the client's address as the sign-in limits, the audit and
// the page's signals record it: the TCP peer, or behind a trusted proxy
// the nearest X-Forwarded-For hop no trusted proxy added
// (internal/clientip). Proxy headers of anyone else are not believed. A
// peer that is no address is recorded as it came.
func ClientIP(p clientip.Proxies, r *http.Request) string {
	if a := p.Of(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// Secure reports whether the browser reached us over HTTPS: httpsOnly
// (the public URL is https), or directly, or through a trusted proxy
// that says so (X-Forwarded-Proto), so the cookie gets the Secure flag
// behind a TLS-terminating ingress.
func Secure(p clientip.Proxies, httpsOnly bool, r *http.Request) bool {
	if httpsOnly || r.TLS != nil {
		return true
	}
	return p.Trusts(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// HTTPS reports whether publicURL is an https URL: every cookie of that
// surface is Secure.
func HTTPS(publicURL string) bool { return strings.HasPrefix(strings.ToLower(publicURL), "https://") }

// SafeMethod reports whether m changes nothing (GET, HEAD, OPTIONS): the
// others need the checks below.
func SafeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// CSRF is where a request carries its session's CSRF token: a header,
// or a form field for a page's plain forms.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf"
)

// CSRFOK compares the request's CSRF token (header, or form field for the
// page's plain forms) with the session's, in constant time.
func CSRFOK(r *http.Request, token string) bool {
	got := r.Header.Get(CSRFHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(CSRFField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(token)) == 1
}

// FromThisSite reports whether a session's request came from this site:
// Sec-Fetch-Site same-origin, or none (typed, a bookmark). A browser that
// sends no Sec-Fetch-Site is believed unless strict, which asks it for a
// Referer of this host instead (the dashboard's own export links send
// one: Referrer-Policy same-origin).
func FromThisSite(r *http.Request, strict bool) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
		if !strict {
			return true
		}
		ref, err := url.Parse(r.Referer())
		return err == nil && ref.Host != "" && strings.EqualFold(ref.Host, r.Host)
	}
	return false
}

// SameSiteJSON reports whether r can only be this site's own script's:
// a JSON body (a cross-site page cannot send that content type without
// a preflight this server never answers), not cross-site by the
// browser's word, and no Origin but origin (the surface's public
// scheme://host).
func SameSiteJSON(r *http.Request, origin string) bool {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if !strings.EqualFold(strings.TrimSpace(ct), "application/json") || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	o := r.Header.Get("Origin")
	return o == "" || o == origin
}

// CrossOrigin refuses a cross-origin unsafe request (Go's
// http.CrossOriginProtection: Sec-Fetch-Site, else Origin against Host)
// with deny.
func CrossOrigin(deny http.Handler) func(http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(deny)
	return cop.Handler
}

// Origin is publicURL's scheme://host ("" when it is no URL).
func Origin(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
