package process

import (
	"context"
	"encoding/json"
	"github.com/yidu-io/yidu/ledger"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
)

// TestSendAndRecallEndToEnd (issue 12, parts 2 and 5): HR registers a
// notice with its text, its document and send: true; the card WeCom gets
// shows the text and opens the document through yidu's tracked link;
// opening it from WeCom records a link read; the notice is recalled batch
// by batch with WeCom's msgids, and its numbers stop there.
func TestSendAndRecallEndToEnd(t *testing.T) {
	const (
		secret = "e2e-app-secret"
		public = "https://yidu.example.com/wecom"
		doc    = "https://intranet.example.com/p/42?lang=zh"
		body   = "请在周五前确认新的考勤制度。\nPlease confirm by Friday."
	)
	fake := fakewecom.New(fakewecom.Corp{
		CorpID: testCorp, Apps: []fakewecom.App{{AgentID: testAgent, Secret: secret}},
		Codes: map[string]string{"code-zhang": "zhangsan"},
	})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = secret
		c.Receiver.PublicURL = public
	})

	reg := map[string]any{
		"msgid": "notice-card", "app": "hr", "title": "新考勤制度 / Attendance",
		"body": body, "url": doc, "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan", "lisi", "wangwu"}},
	}
	var created struct {
		Body string `json:"body"`
		URL  string `json:"url"`
		Send struct {
			Result  string `json:"result"`
			Sent    int    `json:"sent"`
			Batches []struct {
				TaskID string `json:"task_id"`
				Status string `json:"status"`
			} `json:"batches"`
		} `json:"send"`
	}
	if code := api(t, m, "POST", "/messages", reg, &created); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	if created.Body != body || created.URL != doc || created.Send.Result != "sent" || created.Send.Sent != 3 ||
		len(created.Send.Batches) != 1 || created.Send.Batches[0].TaskID != "notice-card@0" {
		t.Fatalf("registered = %+v; want the body, url and one sent batch", created)
	}

	// The card WeCom received.
	sent := fake.Sent()
	if len(sent) != 1 {
		t.Fatalf("message/send deliveries = %d; want 1", len(sent))
	}
	var card struct {
		ToUser       string `json:"touser"`
		EnableDup    int    `json:"enable_duplicate_check"`
		TemplateCard struct {
			CardType     string `json:"card_type"`
			TaskID       string `json:"task_id"`
			SubTitleText string `json:"sub_title_text"`
			CardAction   struct {
				Type int    `json:"type"`
				URL  string `json:"url"`
			} `json:"card_action"`
			ButtonList []struct {
				Key string `json:"key"`
			} `json:"button_list"`
		} `json:"template_card"`
	}
	if err := json.Unmarshal(sent[0].Raw, &card); err != nil {
		t.Fatal(err)
	}
	tc := card.TemplateCard
	if tc.CardType != "button_interaction" || tc.TaskID != "notice-card@0" || tc.SubTitleText != body ||
		len(tc.ButtonList) != 1 || tc.ButtonList[0].Key != "yidu_read" || card.EnableDup != 1 {
		t.Errorf("card = %s", sent[0].Raw)
	}
	link, err := url.Parse(tc.CardAction.URL)
	if err != nil || tc.CardAction.Type != 1 || !strings.HasPrefix(tc.CardAction.URL, public+"/r/hr/notice-card?") ||
		link.Query().Get("to") != doc || len(link.Query().Get("sig")) != 32 {
		t.Fatalf("card_action = %+v; want the tracked link to %s", tc.CardAction, doc)
	}

	// zhangsan opens the notice from the card: the link goes to WeCom's
	// OAuth2, which sends him back to the landing with a code, which
	// records the read and sends him on to the document.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	receiver := "http://" + m.ReceiverAddr
	get := func(target string) *http.Response {
		t.Helper()
		resp, err := noFollow.Get(target)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	resp := get(receiver + strings.TrimPrefix(tc.CardAction.URL, public))
	authorize, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || authorize.Host != "open.weixin.qq.com" {
		t.Fatalf("open the card's link = %d to %q; want 302 to WeCom's OAuth2", resp.StatusCode, authorize)
	}
	landing, _ := url.Parse(authorize.Query().Get("redirect_uri"))
	resp = get(receiver + strings.TrimPrefix(landing.String(), public) + "&code=code-zhang&state=" + authorize.Query().Get("state"))
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != doc {
		t.Fatalf("landing = %d to %q; want 302 to the document", resp.StatusCode, resp.Header.Get("Location"))
	}
	var p progressJSON
	if code := api(t, m, "GET", "/messages/notice-card/progress", nil, &p); code != 200 || p.Read != 1 || p.Recipients != 3 {
		t.Errorf("progress after opening = %d %+v; want 1 of 3 read", code, p)
	}
	var source int
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		err := m.DB.QueryRow(`SELECT r.source FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
			WHERE r.corp_id = ? AND r.msgid = 'notice-card' AND u.userid = 'zhangsan' AND r.is_read = 1`, testCorp).Scan(&source)
		if err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if source != 3 {
		t.Errorf("zhangsan's read source = %d; want 3 (tracked link)", source)
	}

	// Recall: every batch through message/recall with WeCom's msgid.
	var rec struct {
		RecalledAt *time.Time `json:"recalled_at"`
		Read       int64      `json:"read"`
		Recalled   int        `json:"recalled"`
	}
	if code := api(t, m, "POST", "/messages/notice-card/recall", nil, &rec); code != http.StatusOK {
		t.Fatalf("recall = %d; want 200", code)
	}
	if rec.RecalledAt == nil || rec.Read != 1 || rec.Recalled != 1 {
		t.Errorf("recall = %+v; want one batch recalled, 1 read frozen", rec)
	}
	if got := fake.Recalled(); !slices.Equal(got, []string{sent[0].MsgID}) {
		t.Errorf("message/recall msgids = %v; want the batch's %q", got, sent[0].MsgID)
	}

	// A press that still arrives after the recall moves no number.
	if code := deliver(t, m, cardEvent("lisi", "notice-card@0", time.Now().Unix())); code != 200 {
		t.Errorf("card press after recall = %d", code)
	}
	var after struct {
		Read       *int64     `json:"read"`
		RecalledAt *time.Time `json:"recalled_at"`
	}
	if code := api(t, m, "GET", "/messages/notice-card", nil, &after); code != 200 || after.RecalledAt == nil || after.Read == nil || *after.Read != 1 {
		t.Errorf("GET after recall = %d %+v; want recalled with 1 read", code, after)
	}
	if code := api(t, m, "POST", "/messages/notice-card/remind", nil, nil); code != http.StatusConflict {
		t.Errorf("remind after recall = %d; want 409", code)
	}
	// The evidence ledger holds the send batch's entries (one per
	// recipient) and the recall's, each written with its fact (issue 40).
	kinds := map[ledger.Kind]int{}
	es, err := m.Ledger.EntriesFor(context.Background(), testCorp, "notice-card", "zhangsan")
	for _, e := range es {
		kinds[e.Kind]++
	}
	if err != nil || kinds[ledger.KindSend] != 1 || kinds[ledger.KindRecall] != 1 {
		t.Errorf("zhangsan's entries by kind = %v, %v; want one send, one recall", kinds, err)
	}
	if rep, err := m.Ledger.Verify(context.Background(), testCorp, ""); err != nil || len(rep.Problems) != 0 {
		t.Errorf("ledger verify = %v, %v; want clean", rep.Problems, err)
	}
}
