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
	// UnlicensedUsers are the UserIDs WeCom listed in unlicenseduser:
	// members without a basic licence (没有基础接口许可, expired included),
	// doc path 90236.
	UnlicensedUsers []string
	// MsgID is WeCom's message id (only good for recalling the message,
	// message/recall, doc path 96460).
	MsgID string
	// ResponseCode lets the app update an interactive card once, within
	// 72 h (message/update_template_card, doc path 94945).
	ResponseCode string
}

// RecallResult is WeCom's answer to one message/recall call (doc path
// 96460).
type RecallResult struct {
	ErrCode int64
	ErrMsg  string
}

// sendURL is message/send (path 90236), recallURL message/recall (path
// 96460). They go through silenceper/wechat/v2's util HTTP plumbing, so
// util.SetURIModifier points them at a fake in tests.
const (
	sendURL   = "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token="
	recallURL = "https://qyapi.weixin.qq.com/cgi-bin/message/recall?access_token="
)

// SenderOptions configure a Sender.
type SenderOptions struct {
	// Rate and Burst bound message/send calls per second across all apps
	// (default 20/s, burst 10). WeCom caps each corp's calls to one API and
	// answers errcode 45009 beyond the cap.
	Rate  rate.Limit
	Burst int
}

// Sender posts message/send (doc path 90236) and message/recall (doc path
// 96460) for the apps it was given.
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
	var resp struct {
		wecomStatus
		InvalidUser    string `json:"invaliduser"`
		UnlicensedUser string `json:"unlicenseduser"`
		MsgID          string `json:"msgid"`
		ResponseCode   string `json:"response_code"`
	}
	if err := w.post(ctx, corpID, agentID, "message/send", sendURL, body, &resp, &resp.wecomStatus); err != nil {
		return SendResult{}, err
	}
	res := SendResult{ErrCode: resp.ErrCode, ErrMsg: resp.ErrMsg, MsgID: resp.MsgID, ResponseCode: resp.ResponseCode}
	if resp.InvalidUser != "" {
		res.InvalidUsers = strings.Split(resp.InvalidUser, "|")
	}
	if resp.UnlicensedUser != "" {
		res.UnlicensedUsers = strings.Split(resp.UnlicensedUser, "|")
	}
	return res, nil
}

// RecallMessage recalls the message WeCom named msgID (message/send's
// msgid) through message/recall (doc path 96460), which works for 24 h
// after the send. Errors are classified as SendMessage's: ErrNotSent, or
// an unknown outcome.
func (w *Sender) RecallMessage(ctx context.Context, corpID string, agentID int64, msgID string) (RecallResult, error) {
	body, err := json.Marshal(map[string]string{"msgid": msgID})
	if err != nil {
		return RecallResult{}, fmt.Errorf("%w: message/recall: %w", ErrNotSent, err)
	}
	var resp wecomStatus
	if err := w.post(ctx, corpID, agentID, "message/recall", recallURL, body, &resp, &resp); err != nil {
		return RecallResult{}, err
	}
	return RecallResult(resp), nil
}

// post posts body to api (base URL apiURL) with the app's access token
// and decodes the answer into out, whose status is st. A token WeCom
// refuses (40014, 42001) is dropped so the caller's retry fetches a fresh
// one.
func (w *Sender) post(ctx context.Context, corpID string, agentID int64, api, apiURL string, body []byte, out any, st *wecomStatus) error {
	a, ok := w.apps[appKey{corpID, agentID}]
	if !ok {
		return fmt.Errorf("%w: no app with corp %s agent %d", ErrNotSent, corpID, agentID)
	}
	if err := w.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("%w: rate limiter: %w", ErrNotSent, err)
	}
	sess := a.Session(nil)
	token, err := sess.Token.GetAccessTokenContext(ctx)
	if err != nil {
		return fmt.Errorf("%w: gettoken: %v", ErrNotSent, a.Clean(err))
	}

	// A request counts as sent once net/http wrote it; only a failure before
	// that may be retried (net/http itself retries a POST only when nothing
	// was written).
	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	raw, err := util.HTTPPostContext(tctx, apiURL+url.QueryEscape(token), body,
		map[string]string{"Content-Type": "application/json; charset=utf-8"})
	if err != nil {
		if !wrote.Load() {
			return fmt.Errorf("%w: %s: %v", ErrNotSent, api, a.Clean(err))
		}
		return fmt.Errorf("wecom: %s outcome unknown: %v", api, a.Clean(err))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("wecom: %s outcome unknown: bad answer: %w", api, err)
	}
	if st.ErrCode == ErrInvalidToken || st.ErrCode == ErrExpiredToken {
		a.Session(sess) // drops the refused token: the retry fetches a fresh one
	}
	return nil
}
