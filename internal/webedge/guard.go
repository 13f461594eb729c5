package webedge

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/yidu-io/yidu/access"
)

type principalKey struct{}

type signInKey struct{}

// Caller returns the request's caller, nil outside the guards.
func Caller(ctx context.Context) *access.Principal {
	p, _ := ctx.Value(principalKey{}).(*access.Principal)
	return p
}

// SignInOf returns the request's session; nil for a bearer token.
func SignInOf(ctx context.Context) *access.SignIn {
	s, _ := ctx.Value(signInKey{}).(*access.SignIn)
	return s
}

// WithCaller returns ctx carrying p and, for a person, their session.
func WithCaller(ctx context.Context, p *access.Principal, sess *access.SignIn) context.Context {
	ctx = context.WithValue(ctx, principalKey{}, p)
	if sess != nil {
		ctx = context.WithValue(ctx, signInKey{}, sess)
	}
	return ctx
}

// Identities is what the guards ask of access.Identities: a bearer
// token's principal, a session's.
type Identities interface {
	Bearer(tok string) (*access.Principal, bool)
	Lookup(ctx context.Context, id string) (*access.SignIn, bool, error)
}

// Guard admits the callers of a surface's pages and API, and puts them
// in the request's context (Caller, SignInOf).
type Guard struct {
	IDs Identities
	// Cookie is the session cookie's name; a value longer than 64 is
	// none.
	Cookie string
	Log    *slog.Logger
	// Strict reports whether a request to path must show its site
	// strictly (FromThisSite): downloads of people's data.
	Strict func(path string) bool
	// SignIn is where a browser without a session is sent back from to
	// next (an escaped path): the sign-in page's URL.
	SignIn func(r *http.Request, next string) string
}

// Session returns the request's live session. An error (the session
// store is unreachable) is logged and counts as no session, except that
// the guards answer 503 rather than sign the person out.
func (g Guard) Session(r *http.Request) (string, *access.SignIn, bool, error) {
	c, err := r.Cookie(g.Cookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return "", nil, false, nil
	}
	sess, ok, err := g.IDs.Lookup(r.Context(), c.Value)
	if err != nil {
		g.Log.ErrorContext(r.Context(), "session store", "err", err)
	}
	return c.Value, sess, ok, err
}

// API admits a bearer token or a session; a session's POSTs need the
// CSRF token (Origin is checked for every request by CrossOrigin).
func (g Guard) API(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *access.Principal
		var sess *access.SignIn
		if h := r.Header.Get("Authorization"); h != "" {
			// The scheme is case-insensitive (RFC 9110 §11.1).
			scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
			ok = ok && strings.EqualFold(scheme, "Bearer")
			if ok {
				p, ok = g.IDs.Bearer(strings.TrimSpace(tok))
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
				WriteError(w, http.StatusUnauthorized, "invalid bearer token")
				return
			}
		} else if _, ss, ok, err := g.Session(r); err != nil {
			WriteError(w, http.StatusServiceUnavailable, "sessions are unavailable, try again shortly")
			return
		} else if ok {
			if !SafeMethod(r.Method) && !CSRFOK(r, ss.CSRF) {
				WriteError(w, http.StatusForbidden, "missing or wrong CSRF token")
				return
			}
			// A link on another site must not act or read in the
			// session's name (issue 38: an export with the attacker's
			// filters, audited as the victim's): the browser says where
			// the request came from.
			if !FromThisSite(r, g.Strict != nil && g.Strict(r.URL.Path)) {
				WriteError(w, http.StatusForbidden, "cross-site request refused")
				return
			}
			p, sess = ss.Principal, ss
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
			WriteError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), p, sess)))
	})
}

// Page admits a session; others are sent to the sign-in page (SignIn).
func (g Guard) Page(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, sess, ok, err := g.Session(r)
		if err != nil {
			WriteError(w, http.StatusServiceUnavailable, "sessions are unavailable, try again shortly")
			return
		}
		if !ok {
			if SafeMethod(r.Method) {
				// Back to this page once signed in.
				http.Redirect(w, r, g.SignIn(r, access.SafeNext(r.URL.RequestURI())), http.StatusSeeOther)
				return
			}
			WriteError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		if !SafeMethod(r.Method) && !CSRFOK(r, sess.CSRF) {
			WriteError(w, http.StatusForbidden, "missing or wrong CSRF token")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), sess.Principal, sess)))
	})
}
