// Package wecomauth exchanges WeCom OAuth2 codes for member UserIDs
// (auth/getuserinfo, document/path/91023) for the receiver's tracked links
// (callback.OAuth), through silenceper/wechat/v2's work client.
//
// It lives under callback, not in idmap/wecomdir, because the exchange is
// part of the receiver's request (it runs inside a link landing, under the
// receiver's deadline) while wecomdir reads the directory for idmap's
// Syncer; it follows wecomdir's pattern: a private token cache per app,
// one refetch of a token WeCom rejects, every error scrubbed of URLs and
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
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/silenceper/wechat/v2/cache"
	"github.com/silenceper/wechat/v2/credential"
	"github.com/silenceper/wechat/v2/util"
	"github.com/silenceper/wechat/v2/work"
	workconfig "github.com/silenceper/wechat/v2/work/config"
	"github.com/silenceper/wechat/v2/work/oauth"

	"github.com/yidu-io/yidu/config"
)

// getUserInfoURL is silenceper's own (work/oauth, unexported). Its
// Oauth.GetUserInfo takes no context, and a landing page must not hold a
// person for util.DefaultHTTPClient's 30 s, so the request is made with
// util.HTTPGetContext: same URI modifier, same client, the caller's ctx.
const getUserInfoURL = "https://qyapi.weixin.qq.com/cgi-bin/auth/getuserinfo?access_token=%s&code=%s"

// WeCom errcodes meaning the access_token must be fetched again
// (document/path/90313): 40014 invalid, 42001 expired.
const (
	errInvalidToken = 40014
	errExpiredToken = 42001
)

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
	apps map[appKey]*client
}

type appKey struct {
	corpID  string
	agentID int64
}

// client is one app's token source; see wecomdir for why the session (and
// its cache) is replaced rather than its token dropped.
type client struct {
	corpID, secret string
	mu             sync.Mutex
	cur            credential.AccessTokenContextHandle
}

// New returns an Exchanger for apps; apps without a secret cannot exchange
// codes and are left out (UserID answers ErrNoApp for them).
func New(apps []config.App) *Exchanger {
	e := &Exchanger{apps: map[appKey]*client{}}
	for _, a := range apps {
		if a.Secret != "" {
			e.apps[appKey{a.CorpID, a.AgentID}] = &client{corpID: a.CorpID, secret: a.Secret}
		}
	}
	return e
}

// token returns the current token handle, replacing it first if it is the
// stale one.
func (c *client) token(stale credential.AccessTokenContextHandle) credential.AccessTokenContextHandle {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.cur == stale {
		// work.NewWork, not wechat.NewWechat().GetWork: see wecomdir.
		wk := work.NewWork(&workconfig.Config{CorpID: c.corpID, CorpSecret: c.secret, Cache: cache.NewMemory()})
		h, ok := wk.GetContext().AccessTokenHandle.(credential.AccessTokenContextHandle)
		if !ok {
			// v2.1.10's work token handle has a context method; a version
			// without one still works, without ctx on gettoken.
			h = credential.AccessTokenCompatibleHandle{AccessTokenHandle: wk.GetContext().AccessTokenHandle}
		}
		c.cur = h
	}
	return c.cur
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
	var stale credential.AccessTokenContextHandle
	for attempt := 0; ; attempt++ {
		h := c.token(stale)
		tok, err := h.GetAccessTokenContext(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return "", ctxErr
			}
			return "", c.wrap("gettoken", err)
		}
		// The code is the visitor's input: escaped, it cannot add
		// parameters to our request.
		body, err := util.HTTPGetContext(ctx, fmt.Sprintf(getUserInfoURL, url.QueryEscape(tok), url.QueryEscape(code)))
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return "", ctxErr
			}
			return "", c.wrap("auth/getuserinfo", err)
		}
		var res oauth.GetUserInfoResponse
		err = util.DecodeWithError(body, &res, "auth/getuserinfo")
		var ce *util.CommonError
		if errors.As(err, &ce) && attempt == 0 && (ce.ErrCode == errInvalidToken || ce.ErrCode == errExpiredToken) {
			stale = h
			continue
		}
		if err != nil {
			return "", c.wrap("auth/getuserinfo", err)
		}
		return res.UserID, nil
	}
}

// tokenErr matches silenceper's gettoken failure, a plain fmt error.
var tokenErr = regexp.MustCompile(`(?s)get access_token error : errcode=(-?\d+) , errormsg=(.*)$`)

// wrap turns silenceper's errors into ours, without URLs or credentials.
func (c *client) wrap(api string, err error) error {
	var ce *util.CommonError
	if errors.As(err, &ce) {
		return &APIError{Code: ce.ErrCode, Msg: c.scrub(ce.ErrMsg)}
	}
	if m := tokenErr.FindStringSubmatch(err.Error()); m != nil {
		if code, perr := strconv.ParseInt(m[1], 10, 64); perr == nil {
			return fmt.Errorf("wecomauth: gettoken: errcode %d: %s", code, c.scrub(m[2]))
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its URL holds the token or the secret
	}
	return fmt.Errorf("wecomauth: %s: %s", api, c.scrub(err.Error()))
}

var (
	urlPattern   = regexp.MustCompile(`https?://[^\s"'<>]+`)
	paramPattern = regexp.MustCompile(`(?i)(access_token|corpsecret|code)=[^&\s"']*`)
)

// scrub removes every URL's query (silenceper writes "uri=…" with the
// token or secret in it), stray credential parameters and the secret.
func (c *client) scrub(s string) string {
	s = urlPattern.ReplaceAllStringFunc(s, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return "<url>"
		}
		return u.Scheme + "://" + u.Host + u.Path
	})
	s = paramPattern.ReplaceAllString(s, "<redacted>")
	if c.secret != "" {
		s = strings.ReplaceAll(s, c.secret, "<redacted>")
	}
	return s
}
