package wecom

import (
	"errors"
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
)

// WeCom errcodes meaning the access_token must be fetched again
// (document/path/90313): 40014 invalid, 42001 expired. silenceper caches the
// token for expires_in-1500 s and never drops it on these.
const (
	ErrInvalidToken = 40014
	ErrExpiredToken = 42001
)

// Session is one silenceper work client with its own token cache. A token
// WeCom rejects is dropped by replacing the whole session: silenceper's
// cache key is its business, and a fresh cache cannot hold a stale token.
// The cache is private to the session because cache.Memory reads its map
// without a lock; silenceper's token handle serialises every access to it.
type Session struct {
	Work *work.Work
	// Token fetches the access token with a context (gettoken is the only
	// call silenceper takes one for); never nil.
	Token credential.AccessTokenContextHandle
}

// Credentials is one app's (corp_id, secret) sessions. Safe for concurrent
// use.
type Credentials struct {
	corpID string
	secret string

	mu  sync.Mutex
	cur *Session
}

// NewCredentials returns the Credentials of the app whose secret is
// secret. It talks to WeCom's origin, or wherever the process's
// util.SetURIModifier points it.
func NewCredentials(corpID, secret string) *Credentials {
	return &Credentials{corpID: corpID, secret: secret}
}

// Session returns the current session, replacing it first if it is stale
// (its token was rejected). Concurrent callers rejected on one session
// replace it once.
func (c *Credentials) Session(stale *Session) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || c.cur == stale {
		// work.NewWork rather than wechat.NewWechat().GetWork: the root
		// package does not build from this module's go.sum (it pulls in
		// pay/notify) and its init reconfigures logrus process-wide.
		wk := work.NewWork(&workconfig.Config{CorpID: c.corpID, CorpSecret: c.secret, Cache: cache.NewMemory()})
		h, ok := wk.GetContext().AccessTokenHandle.(credential.AccessTokenContextHandle)
		if !ok {
			// v2.1.10's work token handle has a context method; a version
			// without one still works, without ctx on gettoken.
			h = credential.AccessTokenCompatibleHandle{AccessTokenHandle: wk.GetContext().AccessTokenHandle}
		}
		c.cur = &Session{Work: wk, Token: h}
	}
	return c.cur
}

// StaleToken reports whether err is WeCom refusing the access token, so
// the caller should take a fresh Session and try once more.
func StaleToken(err error) bool {
	var ce *util.CommonError
	return errors.As(err, &ce) && (ce.ErrCode == ErrInvalidToken || ce.ErrCode == ErrExpiredToken)
}

// tokenErr matches silenceper's gettoken failure, a plain fmt error
// (credential.GetTokenFromServerContext).
var tokenErr = regexp.MustCompile(`(?s)get access_token error : errcode=(-?\d+) , errormsg=(.*)$`)

// TokenError parses silenceper's gettoken refusal, which carries its
// errcode only in its text; msg is scrubbed.
func (c *Credentials) TokenError(err error) (code int64, msg string, ok bool) {
	m := tokenErr.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, "", false
	}
	code, perr := strconv.ParseInt(m[1], 10, 64)
	if perr != nil {
		return 0, "", false
	}
	return code, c.Scrub(m[2]), true
}

// Clean returns err without its URL (a *url.Error's holds the token or
// the secret) and with its text scrubbed; an error that needed nothing
// keeps its identity.
func (c *Credentials) Clean(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if s := c.Scrub(err.Error()); s != err.Error() {
		return errors.New(s)
	}
	return err
}

var (
	urlPattern   = regexp.MustCompile(`https?://[^\s"'<>]+`)
	paramPattern = regexp.MustCompile(`(?i)(access_token|corpsecret|\bcode)=[^&\s"']*`)
)

// Scrub removes from s every URL's query (silenceper writes "uri=…" with
// the token or secret in it), any stray credential parameter (an OAuth
// code included) and the secret itself.
func (c *Credentials) Scrub(s string) string {
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
