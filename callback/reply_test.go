package callback

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/silenceper/wechat/v2/util"
)

// replyEnvelope is WeCom's passive reply envelope (doc path 90241).
type replyEnvelope struct {
	Encrypt      string `xml:"Encrypt"`
	MsgSignature string `xml:"MsgSignature"`
	TimeStamp    string `xml:"TimeStamp"`
	Nonce        string `xml:"Nonce"`
}

// updateButton is the decrypted 模板卡片更新消息 (update_button).
type updateButton struct {
	ToUserName   string `xml:"ToUserName"`
	FromUserName string `xml:"FromUserName"`
	CreateTime   int64  `xml:"CreateTime"`
	MsgType      string `xml:"MsgType"`
	ReplaceName  string `xml:"Button>ReplaceName"`
}

// openReply checks a passive reply as WeCom would, with silenceper's own
// crypto (util.Signature, util.DecryptMsg), not ours.
func openReply(t *testing.T, body []byte) updateButton {
	t.Helper()
	var env replyEnvelope
	if err := xml.Unmarshal(body, &env); err != nil {
		t.Fatalf("reply envelope %q: %v", body, err)
	}
	if env.Encrypt == "" || env.TimeStamp == "" || env.Nonce == "" {
		t.Fatalf("reply envelope %+v lacks a field", env)
	}
	if want := util.Signature(vecToken, env.TimeStamp, env.Nonce, env.Encrypt); env.MsgSignature != want {
		t.Errorf("MsgSignature = %s; want %s", env.MsgSignature, want)
	}
	_, plain, err := util.DecryptMsg(vecCorpID, env.Encrypt, vecAESKey)
	if err != nil {
		t.Fatalf("DecryptMsg: %v", err)
	}
	var ub updateButton
	if err := xml.Unmarshal(plain, &ub); err != nil {
		t.Fatalf("reply %q: %v", plain, err)
	}
	return ub
}

func TestPassiveReply(t *testing.T) {
	const replyText = "已读 ✓"
	withReply := func(o *Options) {
		o.Apps = append([]App(nil), testApps...)
		o.Apps[0].ReadReply = replyText
	}
	tests := []struct {
		name      string
		mod       func(*Options)
		readsErr  error
		plaintext string
		status    int
		reply     bool
	}{
		{name: "a press of a tracked card", mod: withReply, plaintext: card("zhangsan", 0, "notice-1@0", "read"), status: 200, reply: true},
		{name: "a reminder's card", mod: withReply, plaintext: card("zhangsan", 0, "notice-1@r2-0", "read"), status: 200, reply: true},
		{name: "a foreign card", mod: withReply, plaintext: card("zhangsan", 0, "@foreign", "read"), status: 200},
		{name: "enter_agent", mod: withReply, plaintext: enter("zhangsan", 0), status: 200},
		{name: "no reply text configured", plaintext: card("zhangsan", 0, "notice-1@0", "read"), status: 200},
		{name: "the read is not durable: 503, no reply", mod: withReply, readsErr: errors.New("kafka down"),
			plaintext: card("zhangsan", 0, "notice-1@0", "read"), status: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.mod)
			h.reads.err = tt.readsErr
			pt := strings.Replace(tt.plaintext, "<CreateTime>0<", "<CreateTime>"+strconv.FormatInt(h.now.Unix(), 10)+"<", 1)
			w := h.post(t, "hr", pt)
			if w.Code != tt.status {
				t.Fatalf("status %d %q; want %d", w.Code, w.Body, tt.status)
			}
			if !tt.reply {
				if tt.status == 200 && w.Body.Len() != 0 {
					t.Errorf("body %q; want empty (no passive reply)", w.Body)
				}
				return
			}
			ub := openReply(t, w.Body.Bytes())
			want := updateButton{ToUserName: "zhangsan", FromUserName: vecCorpID, CreateTime: h.now.Unix(), MsgType: "update_button", ReplaceName: replyText}
			if ub != want {
				t.Errorf("reply = %+v; want %+v", ub, want)
			}
			// WeCom retries, members press again: the same update.
			if again := openReply(t, h.post(t, "hr", pt).Body.Bytes()); again != want {
				t.Errorf("second reply = %+v; want %+v", again, want)
			}
		})
	}
}

// TestReplyKeepsCDATA: a reply text or UserID holding "]]>" cannot end
// the CDATA section early and inject elements.
func TestReplyKeepsCDATA(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.Apps = append([]App(nil), testApps...)
		o.Apps[0].ReadReply = "a]]><MsgType>x</MsgType>"
	})
	w := h.post(t, "hr", card("zhangsan", h.now.Unix(), "notice-1@0", "read"))
	ub := openReply(t, w.Body.Bytes())
	if ub.MsgType != "update_button" || ub.ReplaceName != "a]]><MsgType>x</MsgType>" {
		t.Errorf("reply = %+v; want the text kept whole inside ReplaceName", ub)
	}
}
