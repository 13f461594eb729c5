package wecom

import (
	"context"
	"errors"
	"fmt"

	"github.com/silenceper/wechat/v2/util"
)

// APIError is WeCom's refusal of a call (errcode ≠ 0, doc path 90313),
// e.g. 40029 from auth/getuserinfo for a code invalid, expired or used, or
// 48002 from user/list_id called with an app's secret. Every client of
// this package returns it for a refusal; callers tell refusals from
// failures with errors.As.
type APIError struct {
	// API is the call refused ("gettoken", "user/list_id", …).
	API  string
	Code int64
	// Msg is WeCom's errmsg, scrubbed of credentials.
	Msg string
	// Hint says what to fix, when yidu knows ("" otherwise).
	Hint string
}

// Error names the API, WeCom's errcode and errmsg, and the hint.
func (e *APIError) Error() string {
	s := fmt.Sprintf("wecom: %s: errcode %d: %s", e.API, e.Code, e.Msg)
	if e.Hint != "" {
		s += ": " + e.Hint
	}
	return s
}

// WeCom errcodes yidu reacts to (global error codes, doc path 90313).
const (
	ErrInvalidCredential = 40001 // gettoken: wrong secret
	ErrNoPermission      = 48002 // api forbidden: this secret may not call this API
	ErrNoPrivilege       = 60011 // outside the app's visible range (可见范围)
	ErrUntrustedIP       = 60020 // the server's IP is not among the app's trusted IPs
	ErrInvalidTagID      = 40068 // tag/get: invalid tagid (doc path 90213)
)

// call fetches c's access token with ctx, makes one request with it (do)
// and decodes the answer into out, a struct embedding util.CommonError; an
// errcode ≠ 0 becomes an *APIError. A token WeCom rejects (40014, 42001)
// is dropped and the request made once more with a fresh one. Errors carry
// no URL or credential: the token and secret travel in URL queries, and
// silenceper writes URLs into its errors.
func call(ctx context.Context, c *Credentials, api string, out any, do func(ctx context.Context, token string) ([]byte, error)) error {
	var stale *Session
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		sess := c.Session(stale)
		tok, err := sess.Token.GetAccessTokenContext(ctx)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return wrap(c, "gettoken", err)
		}
		body, err := do(ctx, tok)
		if err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return ctxErr
			}
			return wrap(c, api, err)
		}
		err = util.DecodeWithError(body, out, api)
		if attempt == 0 && StaleToken(err) {
			stale = sess
			continue
		}
		if err != nil {
			return wrap(c, api, err)
		}
		return nil
	}
}

// wrap turns silenceper's errors into ours, without URLs or credentials:
// WeCom's refusals (gettoken's included) become *APIError.
func wrap(c *Credentials, api string, err error) error {
	var ce *util.CommonError
	if errors.As(err, &ce) {
		return &APIError{API: api, Code: ce.ErrCode, Msg: c.Scrub(ce.ErrMsg)}
	}
	if code, msg, ok := c.TokenError(err); ok {
		return &APIError{API: "gettoken", Code: code, Msg: msg}
	}
	return fmt.Errorf("wecom: %s: %s", api, c.Clean(err))
}
