package webedge

import (
	"net/http"
	"strings"
)

// CSP is a surface's Content-Security-Policy: everything from this
// origin only, no inline script, no framing; what differs between the
// surfaces are the extra sources of images and of fetches.
type CSP struct {
	// Img are the sources of images besides 'self' ("data:" for the
	// dashboard's inline icons, the object storage's origin for the
	// page's attachments).
	Img []string
	// Connect are the sources of fetches besides 'self'. ConnectSelf
	// states connect-src 'self' even with none (the dashboard's); the
	// page states it only with an object storage's origin, last.
	Connect     []string
	ConnectSelf bool
}

// String is the policy's header value.
func (c CSP) String() string {
	var b strings.Builder
	b.WriteString("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'")
	for _, s := range c.Img {
		b.WriteString(" " + s)
	}
	connect := "; connect-src 'self'"
	for _, s := range c.Connect {
		connect += " " + s
	}
	if c.ConnectSelf {
		b.WriteString(connect)
	}
	b.WriteString("; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	if !c.ConnectSelf && len(c.Connect) > 0 {
		b.WriteString(connect)
	}
	return b.String()
}

// Headers are what every answer of a surface carries.
type Headers struct {
	CSP CSP
	// Referrer is the Referrer-Policy: "same-origin" for the dashboard
	// (its export links show where they came from), "no-referrer" for
	// the page (a notice's URL never leaves it).
	Referrer string
	// NoStore adds Cache-Control: no-store to every answer (a handler
	// may set another).
	NoStore bool
}

// Middleware sets the headers on every answer: the policy, no framing
// (X-Frame-Options DENY), no MIME sniffing, the referrer policy. Their
// values are built once and shared by every answer, each a slice of
// capacity one, so a handler's Set or Add makes a new one and never
// writes into another answer's (five allocations less per request).
func (hs Headers) Middleware(next http.Handler) http.Handler {
	one := func(v string) []string { return []string{v}[:1:1] }
	csp, frame, sniff, ref, store := one(hs.CSP.String()), one("DENY"), one("nosniff"), one(hs.Referrer), one("no-store")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Security-Policy"] = csp
		h["X-Frame-Options"] = frame
		h["X-Content-Type-Options"] = sniff
		h["Referrer-Policy"] = ref
		if hs.NoStore {
			h["Cache-Control"] = store
		}
		next.ServeHTTP(w, r)
	})
}
