package wecom

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestSendErrorsHideSecrets(t *testing.T) {
	c := NewCredentials("ww", "SECRETTOKEN")
	errs := []error{
		&url.Error{Op: "Post", URL: "https://qyapi.weixin.qq.com/cgi-bin/message/send?access_token=SECRETTOKEN", Err: errors.New("dial tcp: connection refused")},
		errors.New("http get error : uri=https://x/cgi-bin/gettoken?corpid=c&corpsecret=SECRETTOKEN , statusCode=502"),
	}
	for _, err := range errs {
		if s := c.Clean(err).Error(); strings.Contains(s, "SECRETTOKEN") {
			t.Errorf("Clean(%v) = %q leaks the secret", err, s)
		}
	}
}

func TestSenderUnknownAppNotSent(t *testing.T) {
	w := NewSender(nil, SenderOptions{})
	if _, err := w.SendMessage(context.Background(), "nocorp", 1, []byte("{}")); !errors.Is(err, ErrNotSent) {
		t.Errorf("SendMessage for an unknown app = %v; want ErrNotSent", err)
	}
}
