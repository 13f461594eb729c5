package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/webedge"
)

// Who is asking is package access's (access.Identities: tokens, password
// users, sign-in limits, sessions); the CSRF and same-site checks are the
// web edge's (internal/webedge); here are the cookie and the guards that
// put the caller in the request's context.

const (
	sessionCookie = "yidu_session"
	csrfHeader    = webedge.CSRFHeader
	csrfField     = webedge.CSRFField
)

// principalFrom, signInFrom and withCaller are the web edge's (the
// guards put the caller in the request's context).
var (
	principalFrom = webedge.Caller
	signInFrom    = webedge.SignInOf
	withCaller    = webedge.WithCaller
	// safeMethod: GET, HEAD and OPTIONS change nothing.
	safeMethod = webedge.SafeMethod
)

// guard admits the page's and the API's callers (webedge.Guard): a
// download of people's data must show its site strictly; a browser
// without a session goes to sign in, inside WeCom's browser straight
// through WeCom (a leader opening a digest card's link signs in without
// a click).
func (s *Server) guard() webedge.Guard {
	return webedge.Guard{IDs: liveIdentities{s}, Cookie: sessionCookie, Log: s.log, Strict: download,
		SignIn: func(r *http.Request, next string) string {
			if s.wecomLogin != nil && s.publicURL != "" && access.InWeCom(r.UserAgent()) {
				return "/login/wecom?next=" + url.QueryEscape(next)
			}
			return "/login?next=" + url.QueryEscape(next)
		}}
}

// liveIdentities asks the Server's identities of the moment (the tests
// swap them after Routes).
type liveIdentities struct{ s *Server }

func (l liveIdentities) Bearer(tok string) (*access.Principal, bool) { return l.s.auth.Bearer(tok) }

func (l liveIdentities) Lookup(ctx context.Context, id string) (*access.SignIn, bool, error) {
	return l.s.auth.Lookup(ctx, id)
}

// sessionFrom returns the request's live session (webedge.Guard.Session).
func (s *Server) sessionFrom(r *http.Request) (string, *access.SignIn, bool, error) {
	return s.guard().Session(r)
}

// download reports whether path is a download of people's data
// (export.csv, an evidence record, PDF or ZIP): a browser is asked to
// show where it came from before one leaves (webedge.FromThisSite
// strict).
func download(path string) bool {
	return strings.HasSuffix(path, "/export.csv") || strings.HasSuffix(path, "/evidence.zip") || strings.Contains(path, "/evidence/")
}

// clientIP is the client's address for the sign-in limits and the
// audit, through the trusted proxies (webedge.ClientIP, the receiver's
// rule too).
func (s *Server) clientIP(r *http.Request) string { return webedge.ClientIP(s.proxies, r) }

// secure reports whether the browser reached us over HTTPS
// (webedge.Secure), so the cookie gets the Secure flag behind a
// TLS-terminating ingress.
func (s *Server) secure(r *http.Request) bool { return webedge.Secure(s.proxies, s.httpsOnly, r) }

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
	// access decides the rows the attempt is due (Identities.SignIn: no
	// row names whatever a stranger typed); they are written as given.
	at, err := s.auth.SignIn(r.Context(), ip, user, pass)
	for _, e := range at.Audit {
		_ = s.record(r, e)
	}
	switch {
	case errors.Is(err, access.ErrRateLimited):
		s.met.logins.WithLabelValues("rate_limited").Inc()
		w.Header().Set("Retry-After", "60")
		s.renderLogin(w, r, http.StatusTooManyRequests, "login.too_many")
		return
	case errors.Is(err, access.ErrBadPassword):
		s.met.logins.WithLabelValues("bad_password").Inc()
		s.log.InfoContext(r.Context(), "sign-in refused", "ip", ip)
		s.renderLogin(w, r, http.StatusUnauthorized, "login.wrong")
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "sign-in", "err", err)
		s.renderLogin(w, r, http.StatusServiceUnavailable, "login.unavailable")
		return
	}
	s.signedIn(w, r, at, r.PostForm.Get("next"))
}

// signedIn gives the browser the session a sign-in opened (its cookie)
// and sends it on to next, a path of this site's.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, at access.Attempt, next string) {
	s.met.logins.WithLabelValues("ok").Inc()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: at.ID, Path: "/", Expires: at.Session.Expires,
		MaxAge: int(s.auth.TTL().Seconds()), HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, access.SafeNext(next), http.StatusSeeOther)
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
