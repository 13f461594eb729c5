package dashboard

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
)

// Who is asking is package access's (access.Identities: tokens, password
// users, sign-in limits, sessions); here are its cookie, the CSRF check
// and the guards that put the caller in the request's context.

const (
	sessionCookie = "yidu_session"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
)

type principalKey struct{}

type signInKey struct{}

// principalFrom returns the request's caller, nil outside the guards.
func principalFrom(ctx context.Context) *access.Principal {
	p, _ := ctx.Value(principalKey{}).(*access.Principal)
	return p
}

// signInFrom returns the request's session; nil for a bearer token.
func signInFrom(ctx context.Context) *access.SignIn {
	s, _ := ctx.Value(signInKey{}).(*access.SignIn)
	return s
}

// withCaller returns ctx carrying p and, for a person, their session.
func withCaller(ctx context.Context, p *access.Principal, sess *access.SignIn) context.Context {
	ctx = context.WithValue(ctx, principalKey{}, p)
	if sess != nil {
		ctx = context.WithValue(ctx, signInKey{}, sess)
	}
	return ctx
}

// sessionFrom returns the request's live session. An error (the session
// store is unreachable) is logged and counts as no session, except that
// the guards answer 503 rather than sign the person out.
func (s *Server) sessionFrom(r *http.Request) (string, *access.SignIn, bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return "", nil, false, nil
	}
	sess, ok, err := s.auth.Lookup(r.Context(), c.Value)
	if err != nil {
		s.log.ErrorContext(r.Context(), "session store", "err", err)
	}
	return c.Value, sess, ok, err
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// csrfOK compares the request's CSRF token (header, or form field for the
// page's plain forms) with the session's, in constant time.
func csrfOK(r *http.Request, sess *access.SignIn) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.CSRF)) == 1
}

// requireAPI admits a bearer token or a session; a session's POSTs need the
// CSRF token (Origin is checked for every request by CrossOriginProtection).
func (s *Server) requireAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *access.Principal
		var sess *access.SignIn
		if h := r.Header.Get("Authorization"); h != "" {
			// The scheme is case-insensitive (RFC 9110 §11.1).
			scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
			ok = ok && strings.EqualFold(scheme, "Bearer")
			if ok {
				p, ok = s.auth.Bearer(strings.TrimSpace(tok))
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
				writeError(w, http.StatusUnauthorized, "invalid bearer token")
				return
			}
		} else if _, ss, ok, err := s.sessionFrom(r); err != nil {
			writeError(w, http.StatusServiceUnavailable, "sessions are unavailable, try again shortly")
			return
		} else if ok {
			if !safeMethod(r.Method) && !csrfOK(r, ss) {
				writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
				return
			}
			// A link on another site must not act or read in the
			// session's name (issue 38: an export with the attacker's
			// filters, audited as the victim's): the browser says where
			// the request came from.
			if !fromThisSite(r, strings.HasSuffix(r.URL.Path, "/export.csv")) {
				writeError(w, http.StatusForbidden, "cross-site request refused")
				return
			}
			p, sess = ss.Principal, ss
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), p, sess)))
	})
}

// fromThisSite reports whether a session's request came from this site:
// Sec-Fetch-Site same-origin, or none (typed, a bookmark). A browser that
// sends no Sec-Fetch-Site is believed unless strict, which asks it for a
// Referer of this host instead (the page's own export links send one:
// Referrer-Policy same-origin).
func fromThisSite(r *http.Request, strict bool) bool {
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

// requirePage admits a session; others are sent to the sign-in page.
func (s *Server) requirePage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, sess, ok, err := s.sessionFrom(r)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "sessions are unavailable, try again shortly")
			return
		}
		if !ok {
			if safeMethod(r.Method) {
				// Back to this page once signed in; inside WeCom's
				// browser straight through WeCom (a leader opening a
				// digest card's link signs in without a click).
				next := url.QueryEscape(access.SafeNext(r.URL.RequestURI()))
				if s.wecomLogin != nil && s.publicURL != "" && access.InWeCom(r.UserAgent()) {
					http.Redirect(w, r, "/login/wecom?next="+next, http.StatusSeeOther)
					return
				}
				http.Redirect(w, r, "/login?next="+next, http.StatusSeeOther)
				return
			}
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		if !safeMethod(r.Method) && !csrfOK(r, sess) {
			writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
			return
		}
		next.ServeHTTP(w, r.WithContext(withCaller(r.Context(), sess.Principal, sess)))
	})
}

// clientIP is the client's address for the sign-in limits and the
// audit: the TCP peer, or behind a configured trusted proxy the nearest
// X-Forwarded-For hop no trusted proxy added (internal/clientip, the
// receiver's rule too). Proxy headers of anyone else are not believed.
func (s *Server) clientIP(r *http.Request) string {
	if a := s.proxies.Of(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}

// secure reports whether the browser reached us over HTTPS: the public
// URL is https, or directly, or through a trusted proxy that says so
// (X-Forwarded-Proto), so the cookie gets the Secure flag behind a
// TLS-terminating ingress.
func (s *Server) secure(r *http.Request) bool {
	if s.httpsOnly || r.TLS != nil {
		return true
	}
	return s.proxies.Trusts(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "error.bad_request")
		return
	}
	user, pass := r.PostForm.Get("username"), r.PostForm.Get("password")
	if len(user) > 128 || len(pass) > 72 { // bcrypt reads at most 72 bytes
		s.renderLogin(w, r, http.StatusUnauthorized, "login.wrong")
		return
	}
	ip := s.clientIP(r)
	id, sess, err := s.auth.SignIn(r.Context(), ip, user, pass)
	switch {
	case errors.Is(err, access.ErrRateLimited):
		s.met.logins.WithLabelValues("rate_limited").Inc()
		w.Header().Set("Retry-After", "60")
		s.renderLogin(w, r, http.StatusTooManyRequests, "login.too_many")
		return
	case errors.Is(err, access.ErrBadPassword):
		s.met.logins.WithLabelValues("bad_password").Inc()
		s.log.InfoContext(r.Context(), "sign-in refused", "ip", ip)
		// The name typed is anyone's input: a configured user's name is
		// recorded (someone tried their password), anything else only as
		// "unknown" (issue 38: no row names whatever a stranger typed).
		actor := "unknown"
		if s.auth.Known(user) {
			actor = user
		}
		_ = s.record(r, audit.Event{Actor: actor, ActorKind: "password", Action: yidu.ActionSignInFailed, Outcome: "refused"})
		s.renderLogin(w, r, http.StatusUnauthorized, "login.wrong")
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "sign-in", "err", err)
		s.renderLogin(w, r, http.StatusServiceUnavailable, "login.unavailable")
		return
	}
	s.met.logins.WithLabelValues("ok").Inc()
	_ = s.record(r, audit.Event{Actor: user, ActorKind: "password", Action: yidu.ActionSignIn})
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", Expires: sess.Expires,
		MaxAge: int(s.auth.TTL().Seconds()), HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, access.SafeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" && len(c.Value) <= 64 {
		// The actor is the session's owner, looked up before it ends; a
		// cookie of no live session signs nobody out and records nothing.
		ev, live := s.signOutEvent(r, c.Value)
		err := s.auth.SignOut(r.Context(), c.Value)
		if live {
			s.recordDone(r, ev, err)
		}
		if err != nil {
			// The cookie must not outlive a session we failed to end.
			s.log.ErrorContext(r.Context(), "sign-out", "err", err)
			writeError(w, http.StatusServiceUnavailable, "sign-out failed, try again shortly")
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
