package wecom

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/silenceper/wechat/v2/util"
	"github.com/silenceper/wechat/v2/work/oauth"
)

// getUserInfoURL is silenceper's own (work/oauth, unexported). Its
// Oauth.GetUserInfo takes no context, and a landing page must not hold a
// person for util.DefaultHTTPClient's 30 s, so the request is made with
// util.HTTPGetContext: same URI modifier, same client, the caller's ctx.
const getUserInfoURL = "https://qyapi.weixin.qq.com/cgi-bin/auth/getuserinfo?access_token=%s&code=%s"

// ErrNoApp: no configured app with a secret has this corp and agent.
var ErrNoApp = errors.New("wecom: no app with a secret for this corp and agent")

// OAuth turns tracked links' OAuth2 codes into UserIDs
// (auth/getuserinfo, doc path 91023) for every app that has a secret. Safe
// for concurrent use.
type OAuth struct {
	apps map[appKey]*Credentials
}

// NewOAuth returns an OAuth for apps; apps without a secret cannot
// exchange codes and are left out (UserID answers ErrNoApp for them).
func NewOAuth(apps []App) *OAuth {
	e := &OAuth{apps: map[appKey]*Credentials{}}
	for _, a := range apps {
		if a.Secret != "" {
			e.apps[appKey{a.CorpID, a.AgentID}] = NewCredentials(a.CorpID, a.Secret)
		}
	}
	return e
}

// UserID returns the UserID of the member WeCom issued code to, or ""
// with a nil error when the visitor is not a member of the corp (WeCom
// answers an openid or external_userid instead). It implements
// callback.OAuth.
func (e *OAuth) UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error) {
	c, ok := e.apps[appKey{corpID, agentID}]
	if !ok {
		return "", fmt.Errorf("%w: %s/%d", ErrNoApp, corpID, agentID)
	}
	var res oauth.GetUserInfoResponse
	err := call(ctx, c, "auth/getuserinfo", &res, func(ctx context.Context, tok string) ([]byte, error) {
		// The code is the visitor's input: escaped, it cannot add
		// parameters to our request.
		return util.HTTPGetContext(ctx, fmt.Sprintf(getUserInfoURL, url.QueryEscape(tok), url.QueryEscape(code)))
	})
	if err != nil {
		return "", err
	}
	return res.UserID, nil
}
