// Package wecomauth exchanges WeCom OAuth2 codes for member UserIDs
// (auth/getuserinfo, document/path/91023) for the receiver's tracked links
// (callback.OAuth), through silenceper/wechat/v2's work client.
//
// It lives under callback, not in idmap/wecomdir, because the exchange is
// part of the receiver's request (it runs inside a link landing, under the
// receiver's deadline) while wecomdir reads the directory for idmap's
// Syncer. Both share internal/wecomapi: a private token cache per app, one
// refetch of a token WeCom rejects, every error scrubbed of URLs and
// credentials.
//
// silenceper's process-wide settings are cmd's (util.SetURIModifier from
// config wecom.api_base, util.DefaultHTTPClient's timeout); this package
// never changes them.
package wecomauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/silenceper/wechat/v2/util"
	"github.com/silenceper/wechat/v2/work/oauth"

	"github.com/yidu-io/yidu/config"
	"github.com/yidu-io/yidu/internal/wecomapi"
)

// getUserInfoURL is silenceper's own (work/oauth, unexported). Its
// Oauth.GetUserInfo takes no context, and a landing page must not hold a
// person for util.DefaultHTTPClient's 30 s, so the request is made with
// util.HTTPGetContext: same URI modifier, same client, the caller's ctx.
const getUserInfoURL = "https://qyapi.weixin.qq.com/cgi-bin/auth/getuserinfo?access_token=%s&code=%s"

// ErrNoApp: no configured app with a secret has this corp and agent.
var ErrNoApp = errors.New("wecomauth: no app with a secret for this corp and agent")

// APIError is WeCom's refusal (errcode ≠ 0), e.g. 40029 for a code that is
// invalid, expired or used.
type APIError struct {
	Code int64
	Msg  string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("wecomauth: auth/getuserinfo: errcode %d: %s", e.Code, e.Msg)
}

// Exchanger turns codes into UserIDs for every configured app that has a
// secret. Safe for concurrent use.
type Exchanger struct {
	apps map[appKey]*wecomapi.Credentials
}

type appKey struct {
	corpID  string
	agentID int64
}

// New returns an Exchanger for apps; apps without a secret cannot exchange
// codes and are left out (UserID answers ErrNoApp for them).
func New(apps []config.App) *Exchanger {
	e := &Exchanger{apps: map[appKey]*wecomapi.Credentials{}}
	for _, a := range apps {
		if a.Secret != "" {
			e.apps[appKey{a.CorpID, a.AgentID}] = wecomapi.New(a.CorpID, a.Secret)
		}
	}
	return e
}

// UserID returns the UserID of the member WeCom issued code to, or ""
// with a nil error when the visitor is not a member of the corp (WeCom
// answers an openid or external_userid instead). It implements
// callback.OAuth.
func (e *Exchanger) UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error) {
	c, ok := e.apps[appKey{corpID, agentID}]
	if !ok {
		return "", fmt.Errorf("%w: %s/%d", ErrNoApp, corpID, agentID)
	}
	var stale *wecomapi.Session
	for attempt := 0; ; attempt++ {
		sess := c.Session(stale)
		tok, err := sess.Token.GetAccessTokenContext(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return "", ctxErr
			}
			return "", wrap(c, "gettoken", err)
		}
		// The code is the visitor's input: escaped, it cannot add
		// parameters to our request.
		body, err := util.HTTPGetContext(ctx, fmt.Sprintf(getUserInfoURL, url.QueryEscape(tok), url.QueryEscape(code)))
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return "", ctxErr
			}
			return "", wrap(c, "auth/getuserinfo", err)
		}
		var res oauth.GetUserInfoResponse
		err = util.DecodeWithError(body, &res, "auth/getuserinfo")
		if attempt == 0 && wecomapi.StaleToken(err) {
			stale = sess
			continue
		}
		if err != nil {
			return "", wrap(c, "auth/getuserinfo", err)
		}
		return res.UserID, nil
	}
}

// wrap turns silenceper's errors into ours, without URLs or credentials.
func wrap(c *wecomapi.Credentials, api string, err error) error {
	var ce *util.CommonError
	if errors.As(err, &ce) {
		return &APIError{Code: ce.ErrCode, Msg: c.Scrub(ce.ErrMsg)}
	}
	if code, msg, ok := c.TokenError(err); ok {
		return fmt.Errorf("wecomauth: gettoken: errcode %d: %s", code, msg)
	}
	return fmt.Errorf("wecomauth: %s: %s", api, c.Clean(err))
}
