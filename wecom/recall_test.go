package wecom_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/wecom"
)

// TestSendAndRecall: message/send answers WeCom's msgid and response_code;
// message/recall takes the msgid back, once, on the app's own token.
func TestSendAndRecall(t *testing.T) {
	fake.SetCorp(fakewecom.Corp{CorpID: "wwauth", Apps: []fakewecom.App{{AgentID: 1000002, Secret: secret}}})
	s := wecom.NewSender(apps, wecom.SenderOptions{Rate: 1000, Burst: 10})
	ctx := context.Background()
	body := `{"touser":"zhangsan","msgtype":"template_card","agentid":1000002,"template_card":{"card_type":"button_interaction",` +
		`"task_id":"recall-t1@0","main_title":{"title":"T"},"button_list":[{"text":"已读","style":1,"key":"k"}]}}`
	res, err := s.SendMessage(ctx, "wwauth", 1000002, []byte(body))
	if err != nil || res.ErrCode != 0 || res.MsgID == "" || res.ResponseCode == "" {
		t.Fatalf("SendMessage = %+v, %v; want a msgid and a response_code", res, err)
	}

	fake.RevokeTokens() // 40014 once: the session is dropped, the next call gets a token
	rec, err := s.RecallMessage(ctx, "wwauth", 1000002, res.MsgID)
	if err != nil || rec.ErrCode != wecom.ErrInvalidToken {
		t.Fatalf("RecallMessage with a revoked token = %+v, %v; want errcode 40014", rec, err)
	}
	tests := []struct {
		name  string
		agent int64
		msgID string
		code  int64
		err   error
	}{
		{"recall", 1000002, res.MsgID, 0, nil},
		{"recall twice", 1000002, res.MsgID, fakewecom.ErrCannotRecall, nil},
		{"unknown msgid", 1000002, "nope", fakewecom.ErrCannotRecall, nil},
		{"app without secret", 1000003, res.MsgID, 0, wecom.ErrNotSent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := s.RecallMessage(ctx, "wwauth", tt.agent, tt.msgID)
			if !errors.Is(err, tt.err) || rec.ErrCode != tt.code {
				t.Errorf("RecallMessage(%q) = %+v, %v; want errcode %d, error %v", tt.msgID, rec, err, tt.code, tt.err)
			}
		})
	}
}

func TestRecallErrorsCarryNoCredentials(t *testing.T) {
	fake.SetCorp(fakewecom.Corp{CorpID: "wwauth", Apps: []fakewecom.App{{AgentID: 1000002, Secret: secret}}})
	s := wecom.NewSender(apps, wecom.SenderOptions{Rate: 1000, Burst: 10})
	server.Set(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/gettoken") {
			fake.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	_, err := s.RecallMessage(context.Background(), "wwauth", 1000002, "m1")
	if err == nil {
		t.Fatal("RecallMessage succeeded; want an error")
	}
	if errors.Is(err, wecom.ErrNotSent) {
		t.Errorf("error %v says not sent; the request was written (outcome unknown)", err)
	}
	for _, leak := range []string{secret, "access_token=", "fake-token"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q contains %q", err, leak)
		}
	}
}
