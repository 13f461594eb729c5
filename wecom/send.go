package wecom

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
)

// ErrNotSent marks a send that failed before the request was written: it
// is safe to send again. Any other error of SendMessage means the outcome
// is unknown (the request was written, the answer was lost).
var ErrNotSent = errors.New("wecom: request not sent")

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

// SenderOptions configure a Sender.
type SenderOptions struct {
	// Rate and Burst bound message/send calls per second across all apps
	// (default 20/s, burst 10). WeCom caps each corp's calls to one API and
	// answers errcode 45009 beyond the cap.
	Rate  rate.Limit
	Burst int
}

// Sender posts message/send (doc path 90236) for the apps it was given.
// The access token comes from silenceper's credential handle
// (Credentials); message/send itself is posted with
// silenceper's util.HTTPPostContext rather than work/message's Send, which
// takes no context and cannot tell a request never written (safe to send
// again) from one whose answer was lost (never to be sent again).
type Sender struct {
	limiter *rate.Limiter
	apps    map[appKey]*Credentials
}

// NewSender returns a Sender for apps (their corp_id, agent_id and secret).
func NewSender(apps []App, opts SenderOptions) *Sender {
	if opts.Rate <= 0 {
		opts.Rate = 20
	}
	if opts.Burst <= 0 {
		opts.Burst = 10
	}
	w := &Sender{limiter: rate.NewLimiter(opts.Rate, opts.Burst), apps: map[appKey]*Credentials{}}
	for _, a := range apps {
		w.apps[appKey{a.CorpID, a.AgentID}] = NewCredentials(a.CorpID, a.Secret)
	}
	return w
}

type wecomStatus struct {
	ErrCode int64  `json:"errcode"`
	ErrMsg  string `json:"errmsg"`
}

// SendMessage posts body to message/send. Failures are scrubbed of URLs:
// they carry the access token (and gettoken's the corp secret).
func (w *Sender) SendMessage(ctx context.Context, corpID string, agentID int64, body []byte) (SendResult, error) {
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
		return SendResult{}, fmt.Errorf("%w: gettoken: %v", ErrNotSent, a.Clean(err))
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
			return SendResult{}, fmt.Errorf("%w: message/send: %v", ErrNotSent, a.Clean(err))
		}
		return SendResult{}, fmt.Errorf("wecom: message/send outcome unknown: %v", a.Clean(err))
	}
	var resp struct {
		wecomStatus
		InvalidUser string `json:"invaliduser"`
		MsgID       string `json:"msgid"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		return SendResult{}, fmt.Errorf("wecom: message/send outcome unknown: bad answer: %w", err)
	}
	if resp.ErrCode == ErrInvalidToken || resp.ErrCode == ErrExpiredToken {
		a.Session(sess) // drops the refused token: the retry fetches a fresh one
	}
	res := SendResult{ErrCode: resp.ErrCode, ErrMsg: resp.ErrMsg, MsgID: resp.MsgID}
	if resp.InvalidUser != "" {
		res.InvalidUsers = strings.Split(resp.InvalidUser, "|")
	}
	return res, nil
}
