package access

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sign in with WeCom. Two ways in, one way back:
//
//   - inside WeCom's browser, OAuth2 web authorization: the browser goes
//     to {oauth_base}/connect/oauth2/authorize?appid=CORPID&redirect_uri=
//     &response_type=code&scope=snsapi_base&state=&agentid=#wechat_redirect
//     (构造网页授权链接, doc path 91022; the service-provider copy,
//     doc path 96441, lists agentid). state is a-zA-Z0-9, at most 128 bytes.
//   - on a desktop browser, the web login of a self-built app:
//     {login_base}/wwlogin/sso/login?login_type=CorpApp&appid=CORPID
//     &agentid=&redirect_uri=&state= (构造企业微信登录链接, doc path 98152).
//
// Both come back to redirect_uri?code=CODE&state=STATE; the code is
// exchanged once with auth/getuserinfo (获取访问用户身份, doc path
// 91023: a code is good once, for 5 minutes) for the member's UserID.
// redirect_uri's host must be the app's trusted domain (可信域名), which
// is why it is built from dashboard.public_url and never from the request.

// InWeCom reports whether a User-Agent is WeCom's built-in browser, whose
// User-Agent contains "wxwork" (on every platform).
func InWeCom(userAgent string) bool {
	return strings.Contains(strings.ToLower(userAgent), "wxwork")
}

// Endpoints are WeCom's sign-in hosts (wecom.oauth_base, wecom.login_base:
// origins to which WeCom's own paths are appended), so a fake WeCom, a
// proxy or a test can stand in.
type Endpoints struct {
	OAuthBase string // default https://open.weixin.qq.com
	LoginBase string // default https://login.work.weixin.qq.com
}

// DefaultEndpoints are WeCom's own hosts.
var DefaultEndpoints = Endpoints{OAuthBase: "https://open.weixin.qq.com", LoginBase: "https://login.work.weixin.qq.com"}

// AuthorizeURL is the OAuth2 web authorization URL (doc path 91022).
func (e Endpoints) AuthorizeURL(corpID string, agentID int64, redirectURI, state string) string {
	q := url.Values{}
	q.Set("appid", corpID)
	q.Set("redirect_uri", redirectURI)
	q.Set("response_type", "code")
	q.Set("scope", "snsapi_base")
	q.Set("state", state)
	q.Set("agentid", strconv.FormatInt(agentID, 10))
	// WeCom reads #wechat_redirect to know the link wants the identity.
	return strings.TrimRight(e.OAuthBase, "/") + "/connect/oauth2/authorize?" + q.Encode() + "#wechat_redirect"
}

// LoginURL is the web login URL of a self-built app (doc path 98152).
func (e Endpoints) LoginURL(corpID string, agentID int64, redirectURI, state string) string {
	q := url.Values{}
	q.Set("login_type", "CorpApp")
	q.Set("appid", corpID)
	q.Set("agentid", strconv.FormatInt(agentID, 10))
	q.Set("redirect_uri", redirectURI)
	q.Set("state", state)
	return strings.TrimRight(e.LoginBase, "/") + "/wwlogin/sso/login?" + q.Encode()
}

// SafeNext returns next if it names a path of the dashboard, and "/"
// otherwise: it must start with one "/", and nothing a browser could read
// as another host (//host, /\host, a scheme, control characters, or an
// encoded slash or backslash that a proxy might decode) is let through.
func SafeNext(next string) string {
	if next == "" || len(next) > 2048 || next[0] != '/' {
		return "/"
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return "/"
		}
	}
	if len(next) > 1 && (next[1] == '/' || next[1] == '\\') {
		return "/"
	}
	low := strings.ToLower(next)
	if strings.Contains(low, "%2f") || strings.Contains(low, "%5c") || strings.Contains(low, "%09") || strings.Contains(low, "%0a") || strings.Contains(low, "%0d") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	return next
}

// Login state: the state of one started sign-in, bound to the browser
// that started it. The browser holds a random nonce in a short-lived
// cookie; Redis holds, under the state, the nonce's hash and next. The
// way back must bring the same state and the same cookie, once.

// StateTTL is how long a started sign-in may take.
const StateTTL = 10 * time.Minute

var (
	// ErrBadState is a state that was never issued, expired, was used
	// already, or came back to a browser that did not start it.
	ErrBadState = errors.New("sign-in state is unknown, used, expired or from another browser")
	// ErrCodeUsed is a code that came back a second time.
	ErrCodeUsed = errors.New("sign-in code was used already")
)

// States keeps started sign-ins and used codes in Redis, so every
// dashboard replica can finish a sign-in another started.
type States struct {
	rdb    redis.UniversalClient
	prefix string
	// run, when set, runs each command in a pipeline shared with other
	// callers (Through).
	run func(ctx context.Context, fn func(p redis.Pipeliner)) error
}

// NewStates returns the state store under the Redis key prefix.
func NewStates(rdb redis.UniversalClient, prefix string) *States {
	return &States{rdb: rdb, prefix: prefix}
}

// Through returns the store with each of its commands run by run, a
// pipeline of the same Redis shared with other callers (the reading
// page's sign-ins ride the read path's, bitmap.Store.Pipelined: a
// sign-in storm's states and codes travel in batches, issue 50). run
// returns once fn's commands ran, each command's error its own.
func (s *States) Through(run func(ctx context.Context, fn func(p redis.Pipeliner)) error) *States {
	c := *s
	c.run = run
	return &c
}

// do runs fn's commands: through run when set, else in a round trip of
// their own.
func (s *States) do(ctx context.Context, fn func(p redis.Pipeliner)) error {
	if s.run != nil {
		return s.run(ctx, fn)
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { fn(p); return nil })
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil // each command's error is its own
}

type stateRecord struct {
	Nonce [sha256.Size]byte `json:"nonce"`
	Next  string            `json:"next"`
	Corp  string            `json:"corp"`
}

// Begin starts a sign-in for the browser: it returns the state for
// WeCom (43 characters of a-zA-Z0-9, within WeCom's 128) and the nonce
// for the browser's cookie.
func (s *States) Begin(ctx context.Context, corp, next string) (state, nonce string, err error) {
	state, nonce = alnumToken(), randomToken()
	rec, err := json.Marshal(stateRecord{Nonce: sha256.Sum256([]byte(nonce)), Next: SafeNext(next), Corp: corp})
	if err != nil {
		return "", "", fmt.Errorf("access: encode state: %w", err)
	}
	var set *redis.StatusCmd
	err = s.do(ctx, func(p redis.Pipeliner) { set = p.Set(ctx, s.prefix+"login:state:"+state, rec, StateTTL) })
	if err == nil {
		err = set.Err()
	}
	if err != nil {
		return "", "", fmt.Errorf("access: store state: %w", err)
	}
	return state, nonce, nil
}

// Finish consumes a state (once: GETDEL) and checks the browser's nonce
// against it; it returns the next path and the corp of the sign-in.
func (s *States) Finish(ctx context.Context, state, nonce string) (next, corp string, err error) {
	if state == "" || len(state) > 128 || nonce == "" || len(nonce) > 128 {
		return "", "", ErrBadState
	}
	var get *redis.StringCmd
	err = s.do(ctx, func(p redis.Pipeliner) { get = p.GetDel(ctx, s.prefix+"login:state:"+state) })
	var raw []byte
	if err == nil {
		raw, err = get.Bytes()
	}
	if errors.Is(err, redis.Nil) {
		return "", "", ErrBadState
	}
	if err != nil {
		return "", "", fmt.Errorf("access: load state: %w", err)
	}
	var rec stateRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return "", "", fmt.Errorf("access: decode state: %w", err)
	}
	sum := sha256.Sum256([]byte(nonce))
	if subtle.ConstantTimeCompare(sum[:], rec.Nonce[:]) != 1 {
		return "", "", ErrBadState
	}
	return SafeNext(rec.Next), rec.Corp, nil
}

// UseCode marks a code used (WeCom's codes are good once, doc path
// 91023): a code seen before is ErrCodeUsed, even if WeCom would now
// refuse it anyway. Only the code's hash is stored.
func (s *States) UseCode(ctx context.Context, code string) error {
	sum := sha256.Sum256([]byte(code))
	var set *redis.BoolCmd
	err := s.do(ctx, func(p redis.Pipeliner) {
		set = p.SetNX(ctx, s.prefix+"login:code:"+base64.RawURLEncoding.EncodeToString(sum[:]), 1, StateTTL)
	})
	var ok bool
	if err == nil {
		ok, err = set.Result()
	}
	if err != nil {
		return fmt.Errorf("access: mark code used: %w", err)
	}
	if !ok {
		return ErrCodeUsed
	}
	return nil
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// alnumToken is a random state in WeCom's alphabet (a-zA-Z0-9).
func alnumToken() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var b [43]byte // 43 × log2(62) ≈ 256 bits
	out := make([]byte, len(b))
	for i := range out {
		for {
			_, _ = rand.Read(b[i : i+1])
			if int(b[i]) < 248 { // 248 = 4×62: no modulo bias
				out[i] = alphabet[int(b[i])%len(alphabet)]
				break
			}
		}
	}
	return string(out)
}
