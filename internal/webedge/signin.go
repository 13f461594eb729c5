package webedge

import (
	"context"
	"net/http"

	"github.com/yidu-io/yidu/access"
)

// Sign-in with WeCom, the part both surfaces share (package access has
// the URLs, the states and the doc paths): start sends the browser to
// WeCom bound to it by a nonce cookie; WeCom's return is finished once,
// by FinishWeCom.

// NonceCookie is the cookie that binds a started sign-in to its browser.
type NonceCookie struct {
	Name, Path string
	Secure     bool
}

// set gives the browser value for access.StateTTL (a negative maxAge
// clears it).
func (c NonceCookie) set(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: c.Name, Value: value, Path: c.Path, MaxAge: maxAge,
		HttpOnly: true, Secure: c.Secure, SameSite: http.SameSiteLaxMode})
}

// Take returns the nonce r carries ("" for none) and clears the cookie:
// a sign-in's return is finished once.
func (c NonceCookie) Take(w http.ResponseWriter, r *http.Request) string {
	nonce := ""
	if ck, err := r.Cookie(c.Name); err == nil {
		nonce = ck.Value
	}
	c.set(w, "", -1)
	return nonce
}

// App is the WeCom app a sign-in goes through and where it comes back.
type App struct {
	CorpID  string
	AgentID int64
	// RedirectURI is WeCom's way back: built on the configured public
	// URL, never on the request (its host must be the app's trusted
	// domain, 可信域名).
	RedirectURI string
	Endpoints   access.Endpoints
}

// StartWeCom begins a sign-in of app that comes back to next (a path of
// this surface): the nonce goes into the browser's cookie c, the
// browser to WeCom's OAuth2 authorization inside WeCom's browser, to its
// web login elsewhere. An error is the state store's: nothing was
// answered.
func StartWeCom(w http.ResponseWriter, r *http.Request, st *access.States, app App, next string, c NonceCookie) error {
	state, nonce, err := st.Begin(r.Context(), app.CorpID, next)
	if err != nil {
		return err
	}
	c.set(w, nonce, int(access.StateTTL.Seconds()))
	to := app.Endpoints.LoginURL(app.CorpID, app.AgentID, app.RedirectURI, state)
	if access.InWeCom(r.UserAgent()) {
		to = app.Endpoints.AuthorizeURL(app.CorpID, app.AgentID, app.RedirectURI, state)
	}
	http.Redirect(w, r, to, http.StatusFound)
	return nil
}

// Return is WeCom's return to a sign-in's redirect_uri: the state and
// code of its query and the nonce of the browser's cookie.
type Return struct {
	State, Code, Nonce string
}

// ReturnOf reads r's state and code, and takes the nonce cookie c.
func ReturnOf(w http.ResponseWriter, r *http.Request, c NonceCookie) Return {
	nonce := c.Take(w, r)
	q := r.URL.Query()
	return Return{State: q.Get("state"), Code: q.Get("code"), Nonce: nonce}
}

// Exchange asks WeCom which member a sign-in code is, through the app
// of corp ("" for someone outside the corp): wecom.OAuth's UserID (doc
// path 91023), with what a surface adds (the page backs off 45009/45033
// and counts the codes WeCom refused).
type Exchange func(ctx context.Context, corp, code string) (userID string, err error)

// FinishWeCom finishes a sign-in that came back from WeCom: the state is
// consumed once and must be this browser's (access.ErrBadState), accept
// (nil: any) must take its next path and corp before anything is spent
// (access.ErrBadState otherwise), the code must look like one of WeCom's
// (at most 512 bytes, doc path 91022) and is used once
// (access.ErrCodeUsed), then exchanged for the member's UserID
// (access.ErrNotMember when WeCom names none: an openid, not a member).
// It returns the path to go on to and the corp of the sign-in.
func FinishWeCom(ctx context.Context, st *access.States, ex Exchange, ret Return, accept func(next, corp string) bool) (next, corp, userID string, err error) {
	next, corp, err = st.Finish(ctx, ret.State, ret.Nonce)
	if err == nil && (ret.Code == "" || len(ret.Code) > 512 || (accept != nil && !accept(next, corp))) {
		err = access.ErrBadState
	}
	if err == nil {
		err = st.UseCode(ctx, ret.Code)
	}
	if err == nil {
		userID, err = ex(ctx, corp, ret.Code)
		if err == nil && userID == "" {
			err = access.ErrNotMember
		}
	}
	return next, corp, userID, err
}
