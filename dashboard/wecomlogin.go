package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/webedge"
)

// WeComLogin is sign-in with WeCom (issue 31): GET /login/wecom?next=
// sends the browser to WeCom's OAuth2 web authorization inside WeCom's
// browser, to its web login elsewhere (package access builds both URLs
// and cites them); GET /login/wecom/callback finishes it.
type WeComLogin struct {
	// CorpID and AgentID are the app people sign in through.
	CorpID  string
	AgentID int64
	// Endpoints are WeCom's sign-in hosts (wecom.oauth_base, login_base).
	Endpoints access.Endpoints
	// Access resolves the member against the directory and roles.
	Access *access.Access
	// States keeps started sign-ins and used codes (Redis).
	States *access.States
	// OAuth exchanges a code for a UserID (wecom.OAuth, doc path 91023).
	OAuth access.CodeExchanger
}

const loginNonceCookie = "yidu_login"

// callbackURL is the redirect_uri: from the configured public URL, never
// from the request (the host must be the app's trusted domain).
func (s *Server) callbackURL() string {
	return strings.TrimRight(s.publicURL, "/") + "/login/wecom/callback"
}

// weComLogin is the configured sign-in with WeCom for a request to its
// routes: 404 when it is not configured, 429 over the rate limit (and
// false: answered).
func (s *Server) weComLogin(w http.ResponseWriter, r *http.Request) (*WeComLogin, bool) {
	wl := s.wecomLogin
	if wl == nil || s.publicURL == "" {
		writeError(w, http.StatusNotFound, "sign-in with WeCom is not configured")
		return nil, false
	}
	if !s.limitWeCom(w, r) {
		return nil, false
	}
	return wl, true
}

func (s *Server) handleWeComStart(w http.ResponseWriter, r *http.Request) {
	wl, ok := s.weComLogin(w, r)
	if !ok {
		return
	}
	app := webedge.App{CorpID: wl.CorpID, AgentID: wl.AgentID, RedirectURI: s.callbackURL(), Endpoints: wl.Endpoints}
	if err := webedge.StartWeCom(w, r, wl.States, app, r.URL.Query().Get("next"), s.loginNonce(r)); err != nil {
		s.log.ErrorContext(r.Context(), "wecom sign-in start", "err", err)
		writeError(w, http.StatusServiceUnavailable, "sign-in is unavailable, try again shortly")
	}
}

// loginNonce binds a started sign-in to its browser.
func (s *Server) loginNonce(r *http.Request) webedge.NonceCookie {
	return webedge.NonceCookie{Name: loginNonceCookie, Path: "/login/wecom", Secure: s.secure(r)}
}

func (s *Server) handleWeComCallback(w http.ResponseWriter, r *http.Request) {
	wl, ok := s.weComLogin(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	exchange := func(ctx context.Context, corp, code string) (string, error) {
		return wl.OAuth.UserID(ctx, corp, wl.AgentID, code)
	}
	next, corp, userID, err := webedge.FinishWeCom(ctx, wl.States, exchange, webedge.ReturnOf(w, r, s.loginNonce(r)), nil)
	// access resolves the member, opens the session and decides the row
	// the attempt is due (none for a forged or replayed state).
	at, err := s.auth.SignInWeCom(ctx, wl.Access, wl.CorpID, access.WeComFinish{Corp: corp, UserID: userID, Err: err})
	for _, e := range at.Audit {
		_ = s.record(r, e)
	}
	switch {
	case errors.Is(err, access.ErrBadState), errors.Is(err, access.ErrCodeUsed):
		s.met.logins.WithLabelValues("bad_state").Inc()
		s.renderLogin(w, r, http.StatusBadRequest, "login.expired")
		return
	case errors.Is(err, access.ErrNotMember), errors.Is(err, access.ErrNoRole):
		s.met.logins.WithLabelValues("no_access").Inc()
		s.renderLogin(w, r, http.StatusForbidden, "login.no_access")
		return
	case err != nil:
		s.log.ErrorContext(ctx, "wecom sign-in", "err", err)
		s.renderLogin(w, r, http.StatusServiceUnavailable, "login.unavailable")
		return
	}
	s.signedIn(w, r, at, next)
}
