package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/silenceper/wechat/v2/util"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu/config"
)

// Sender posts one message/send request body (path 90236) for the app
// (corpID, agentID). An error wrapping ErrNotSent means the request never
// left: it is safe to send again. Any other error means the outcome is
// unknown (the request was written, the answer was lost) and the batch must
// not be sent again, or members would get the card twice.
type Sender interface {
	SendMessage(ctx context.Context, corpID string, agentID int64, body []byte) (SendResult, error)
}

// ErrNotSent marks a Sender failure before the request was written.
var ErrNotSent = errors.New("tracker: request not sent")

// SendResult is WeCom's answer to one message/send call (path 90236).
type SendResult struct {
	ErrCode int64
	ErrMsg  string
	// InvalidUsers are the UserIDs WeCom refused (invaliduser, lower-cased by
	// WeCom).
	InvalidUsers []string
	// MsgID is WeCom's message id (only good for recalling the message).
	MsgID string
}

// WeCom API URLs (gettoken: path 91039; message/send: path 90236). They go
// through silenceper/wechat/v2's util HTTP plumbing, so util.SetURIModifier
// points them at a fake in tests.
const (
	tokenURL = "https://qyapi.weixin.qq.com/cgi-bin/gettoken"
	sendURL  = "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token="
)

// WeComOptions configure WeCom.
type WeComOptions struct {
	// Rate and Burst bound message/send calls per second across all apps
	// (default 20/s, burst 10). WeCom caps each corp's calls to one API and
	// answers errcode 45009 beyond the cap.
	Rate  rate.Limit
	Burst int
}

// WeCom is the production Sender. It uses silenceper/wechat/v2's util HTTP
// plumbing (util.HTTPGetContext/HTTPPostContext) with its own access-token
// cache: silenceper's work client and credential packages import its cache
// package, which needs gomemcache and go-redis/v8 that this module's go.sum
// does not have.
type WeCom struct {
	limiter *rate.Limiter
	apps    map[appKey]*appToken
}

type appKey struct {
	corpID  string
	agentID int64
}

// appToken is one app's credentials and cached access token; mu also makes
// concurrent senders fetch a token once.
type appToken struct {
	app     config.App
	mu      sync.Mutex
	token   string
	expires time.Time
}

// NewWeCom returns a Sender for apps (their corp_id, agent_id and secret).
func NewWeCom(apps []config.App, opts WeComOptions) *WeCom {
	if opts.Rate <= 0 {
		opts.Rate = 20
	}
	if opts.Burst <= 0 {
		opts.Burst = 10
	}
	w := &WeCom{limiter: rate.NewLimiter(opts.Rate, opts.Burst), apps: map[appKey]*appToken{}}
	for _, a := range apps {
		w.apps[appKey{a.CorpID, a.AgentID}] = &appToken{app: a}
	}
	return w
}

// WeCom error codes that mean the access token was refused (global error
// codes, path 90313): drop it and fetch another.
const (
	errInvalidToken = 40014
	errTokenExpired = 42001
)

type wecomStatus struct {
	ErrCode int64  `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// accessToken returns the app's cached token or fetches one (gettoken,
// path 91039). WeCom tokens live expires_in (7200) seconds; one is kept for
// expires_in minus a margin.
func (a *appToken) accessToken(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token != "" && time.Now().Before(a.expires) {
		return a.token, nil
	}
	q := url.Values{"corpid": {a.app.CorpID}, "corpsecret": {a.app.Secret}}
	raw, err := util.HTTPGetContext(ctx, tokenURL+"?"+q.Encode())
	if err != nil {
		return "", fmt.Errorf("gettoken: %s", scrub(err))
	}
	var resp struct {
		wecomStatus
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return "", fmt.Errorf("gettoken: bad answer: %w", err)
	}
	if resp.ErrCode != 0 || resp.AccessToken == "" {
		return "", fmt.Errorf("gettoken: errcode %d: %s", resp.ErrCode, resp.ErrMsg)
	}
	life := time.Duration(resp.ExpiresIn)*time.Second - 5*time.Minute
	a.token, a.expires = resp.AccessToken, time.Now().Add(max(life, time.Minute))
	return a.token, nil
}

func (a *appToken) drop(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.token == token {
		a.token = ""
	}
}

// SendMessage posts body to message/send. Failures are scrubbed of URLs:
// they carry the access token (and gettoken's the corp secret).
func (w *WeCom) SendMessage(ctx context.Context, corpID string, agentID int64, body []byte) (SendResult, error) {
	a, ok := w.apps[appKey{corpID, agentID}]
	if !ok {
		return SendResult{}, fmt.Errorf("%w: no app with corp %s agent %d", ErrNotSent, corpID, agentID)
	}
	if err := w.limiter.Wait(ctx); err != nil {
		return SendResult{}, fmt.Errorf("%w: rate limiter: %w", ErrNotSent, err)
	}
	token, err := a.accessToken(ctx)
	if err != nil {
		return SendResult{}, fmt.Errorf("%w: %w", ErrNotSent, err)
	}

	// A request counts as sent once net/http wrote it; only a failure before
	// that may be retried (net/http itself retries a POST only when nothing
	// was written).
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	raw, err := util.HTTPPostContext(tctx, sendURL+url.QueryEscape(token), body,
		map[string]string{"Content-Type": "application/json; charset=utf-8"})
	if err != nil {
		if !wrote.Load() {
			return SendResult{}, fmt.Errorf("%w: message/send: %s", ErrNotSent, scrub(err))
		}
		return SendResult{}, fmt.Errorf("tracker: message/send outcome unknown: %s", scrub(err))
	}
	var resp struct {
		wecomStatus
		InvalidUser string `json:"invaliduser"`
		MsgID       string `json:"msgid"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return SendResult{}, fmt.Errorf("tracker: message/send outcome unknown: bad answer: %w", err)
	}
	if resp.ErrCode == errInvalidToken || resp.ErrCode == errTokenExpired {
		a.drop(token) // the retry fetches a fresh one
	}
	res := SendResult{ErrCode: resp.ErrCode, ErrMsg: resp.ErrMsg, MsgID: resp.MsgID}
	if resp.InvalidUser != "" {
		res.InvalidUsers = strings.Split(resp.InvalidUser, "|")
	}
	return res, nil
}

// scrub returns err's text without any URL (url.Error and silenceper's
// "uri=…" messages include the access token or corp secret).
func scrub(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + scrub(ue.Err)
	}
	s := err.Error()
	if i := strings.Index(s, "uri="); i >= 0 {
		rest := s[i:]
		s = s[:i] + "uri=<redacted>"
		if j := strings.Index(rest, "statusCode="); j >= 0 {
			s += " , " + rest[j:]
		}
	}
	return s
}
