package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/silenceper/wechat/v2/util"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu/config"
	"github.com/yidu-io/yidu/internal/wecomapi"
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

// sendURL is message/send (path 90236). It goes through silenceper/wechat/v2's
// util HTTP plumbing, so util.SetURIModifier points it at a fake in tests.
const sendURL = "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token="

// WeComOptions configure WeCom.
type WeComOptions struct {
	// Rate and Burst bound message/send calls per second across all apps
	// (default 20/s, burst 10). WeCom caps each corp's calls to one API and
	// answers errcode 45009 beyond the cap.
	Rate  rate.Limit
	Burst int
}

// WeCom is the production Sender. The access token comes from silenceper's
// credential handle (internal/wecomapi); message/send itself is posted with
// silenceper's util.HTTPPostContext rather than work/message's Send, which
// takes no context and cannot tell a request never written (safe to send
// again) from one whose answer was lost (never to be sent again).
type WeCom struct {
	limiter *rate.Limiter
	apps    map[appKey]*wecomapi.Credentials
}

type appKey struct {
	corpID  string
	agentID int64
}

// NewWeCom returns a Sender for apps (their corp_id, agent_id and secret).
func NewWeCom(apps []config.App, opts WeComOptions) *WeCom {
	if opts.Rate <= 0 {
		opts.Rate = 20
	}
	if opts.Burst <= 0 {
		opts.Burst = 10
	}
	w := &WeCom{limiter: rate.NewLimiter(opts.Rate, opts.Burst), apps: map[appKey]*wecomapi.Credentials{}}
	for _, a := range apps {
		w.apps[appKey{a.CorpID, a.AgentID}] = wecomapi.New(a.CorpID, a.Secret)
	}
	return w
}

type wecomStatus struct {
	ErrCode int64  `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
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
	sess := a.Session(nil)
	token, err := sess.Token.GetAccessTokenContext(ctx)
	if err != nil {
		return SendResult{}, fmt.Errorf("%w: gettoken: %s", ErrNotSent, scrub(a.Clean(err)))
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
	if resp.ErrCode == wecomapi.ErrInvalidToken || resp.ErrCode == wecomapi.ErrExpiredToken {
		a.Session(sess) // drops the refused token: the retry fetches a fresh one
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
