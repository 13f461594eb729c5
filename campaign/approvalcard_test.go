package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/cards"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/testenv"
)

// wecomSend posts message/send bodies to the fake WeCom as the app
// (gettoken with its secret, then message/send); a non-zero errcode is
// an error, as wecom.Sender makes it.
func wecomSend(t *testing.T, base string) func(ctx context.Context, corpID string, agentID int64, body []byte) error {
	t.Helper()
	call := func(req *http.Request) (map[string]any, error) {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		if code, _ := out["errcode"].(float64); code != 0 {
			return nil, fmt.Errorf("wecom errcode %v: %v", code, out["errmsg"])
		}
		return out, nil
	}
	return func(ctx context.Context, corpID string, _ int64, body []byte) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/cgi-bin/gettoken?corpid="+corpID+"&corpsecret=app-secret", nil)
		tok, err := call(req)
		if err != nil {
			return err
		}
		req, _ = http.NewRequestWithContext(ctx, "POST", base+"/cgi-bin/message/send?access_token="+tok["access_token"].(string), strings.NewReader(string(body)))
		_, err = call(req)
		return err
	}
}

// TestApprovalCardPressedTwiceOnTwoReplicas is issue 41's WeCom side on
// MariaDB and the fake WeCom (as strict as WeCom about template cards:
// task_id, button_list, lengths, 42014 on a reused task_id): the
// approvers other than the author get a 批准 / 驳回 card; the author's
// press is refused; 批准 pressed twice on each of two replicas sends the
// notice once and tells its author once; a card of an older version
// approves nothing.
func TestApprovalCardPressedTwiceOnTwoReplicas(t *testing.T) {
	fake := fakewecom.New(fakewecom.Corp{CorpID: approvalApp.CorpID, Apps: []fakewecom.App{{AgentID: approvalApp.AgentID, Secret: "app-secret"}}})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	reg := &registrar{}
	wecomCards := &cards.Notifier{Send: wecomSend(t, srv.URL), Page: func(app, msgID string) string {
		return "https://yidu.example.com/m/" + msgID + "?approve=1"
	}}
	a, b := newReplica(t, db, c, reg, &notifier{}, "replica-a"), newReplica(t, db, c, reg, &notifier{}, "replica-b")
	a.svc.o.Notify, b.svc.o.Notify = wecomCards, wecomCards
	lisi, wangwu := sender("lisi"), sender("wangwu")

	n, err := a.svc.Compose(ctx, lisi, Compose{Draft: yidu.Draft{App: approvalApp, Title: "年终奖发放通知", Body: "请阅读",
		Audience: yidu.Audience{Departments: []int64{10}}, Schedule: yidu.Schedule{Draft: true}}})
	testenv.Check(t, "Compose", err)
	n, _, err = a.svc.SendNow(ctx, lisi, n)
	testenv.Check(t, "SendNow", err)
	task := func(i int) string {
		t.Helper()
		sent := fake.Sent()
		if len(sent) <= i {
			t.Fatalf("%d messages sent to WeCom, want a card at %d", len(sent), i)
		}
		card, _ := sent[i].Body["template_card"].(map[string]any)
		if to := sent[i].Body["touser"]; to != "wangwu" || card == nil {
			t.Fatalf("message %d to %v: %s; want the approval card to wangwu alone", i, to, sent[i].Raw)
		}
		if desc := card["main_title"].(map[string]any)["desc"]; desc != "发给 2,400 人" {
			t.Errorf("card says %v, want 发给 2,400 人", desc)
		}
		return card["task_id"].(string)
	}
	old := task(0)

	// An edit asks again, with a new card; the old card approves nothing.
	body := "请于 12 月 10 日前阅读"
	n, _, err = a.svc.Edit(ctx, lisi, n, yidu.Patch{Body: &body}, nil)
	testenv.Check(t, "Edit", err)
	n, _, err = a.svc.SendNow(ctx, lisi, n)
	testenv.Check(t, "SendNow", err)
	current := task(1)
	if _, _, err := b.svc.Press(ctx, wangwu, approvalApp.CorpID, approvalApp.Name, old, cards.ApproveKey); !errors.Is(err, ErrApproval) {
		t.Fatalf("press on the old card = %v, want ErrApproval", err)
	}
	if _, _, err := a.svc.Press(ctx, lisi, approvalApp.CorpID, approvalApp.Name, current, cards.ApproveKey); !errors.Is(err, ErrOwnNotice) {
		t.Fatalf("the author's press = %v, want ErrOwnNotice", err)
	}

	var wg sync.WaitGroup
	var mu sync.Mutex
	decided := 0
	for i := range 4 {
		r := []replica{a, b}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, again, err := r.svc.Press(ctx, wangwu, approvalApp.CorpID, approvalApp.Name, current, cards.ApproveKey)
			if err != nil {
				t.Errorf("Press = %v", err)
				return
			}
			if !again {
				mu.Lock()
				decided++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for range 2 {
		for _, r := range []replica{a, b} {
			_, err := r.run.Tick(ctx)
			testenv.Check(t, "Tick", err)
		}
	}
	if decided != 1 || reg.count(n.MsgID) != 1 {
		t.Fatalf("%d presses decided, sent %d times; want 1 and exactly once", decided, reg.count(n.MsgID))
	}
	var told int
	for _, s := range fake.Sent() {
		if s.Body["touser"] == "lisi" && s.Body["msgtype"] == "text" {
			told++
		}
	}
	if told != 1 {
		t.Errorf("the author was told %d times, want once", told)
	}

	t.Run("发给我预览", func(t *testing.T) {
		acc, err := access.New(access.Config{Roles: []access.RoleGrant{{UserID: "lisi", Grant: access.Grant{Role: yidu.RoleSender,
			Scope: yidu.Scope{Corp: approvalApp.CorpID, Apps: []string{approvalApp.Name}}}}}}, limitDir{}, c.now)
		testenv.Check(t, "access.New", err)
		me, err := acc.WeCom(ctx, approvalApp.CorpID, "lisi")
		testenv.Check(t, "WeCom(lisi)", err)
		before := len(fake.Sent())
		to, err := a.svc.PreviewToMe(ctx, me, n)
		testenv.Check(t, "PreviewToMe", err)
		sent := fake.Sent()
		if to != "lisi" || len(sent) != before+1 || sent[before].Body["touser"] != "lisi" {
			t.Fatalf("preview to %q: %d sent, want one card to lisi", to, len(sent)-before)
		}
		card := sent[before].Body["template_card"].(map[string]any)
		for _, b := range card["button_list"].([]any) {
			if b.(map[string]any)["type"] != float64(1) {
				t.Errorf("a preview button calls back (a read): %v", b)
			}
		}
		// A notice keeping its full text: the card opens the approval
		// page (its reading page serves recipients of what was sent).
		withText := n
		withText.MsgID += "-text" // a task_id of its own
		withText.URL = "https://read.example.com/r/hr/" + withText.MsgID
		withText.Content = &yidu.NoticeContent{Markdown: "# 第四条"}
		_, err = a.svc.PreviewToMe(ctx, me, withText)
		testenv.Check(t, "PreviewToMe(with text)", err)
		sent = fake.Sent()
		if u := sent[len(sent)-1].Body["template_card"].(map[string]any)["card_action"].(map[string]any)["url"].(string); !strings.Contains(u, "approve=1") || strings.Contains(u, "read.example.com") {
			t.Errorf("the preview card of a notice with its text opens %s; want the approval page", u)
		}
		if _, err := a.svc.PreviewToMe(ctx, sender("zhaoliu"), n); !errors.Is(err, ErrForbidden) {
			t.Errorf("a non-approver's preview = %v, want ErrForbidden", err)
		}
	})
}

// TestApprovalCardRetried (issue 46): WeCom refuses the approval card
// (errcode 45009). The ask is audited failed and tried again after a
// growing backoff by whichever of two replicas claims it first, never
// both; once WeCom takes it, it is sent once and no more. A card WeCom
// keeps refusing is given up after MaxCardAttempts tries.
func TestApprovalCardRetried(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		cards    int    // delivered in the end
		state    string // of the retry row
	}{
		{"taken on the third try", 2, 1, "sent"},
		{"refused every time", 100, 0, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakewecom.New(fakewecom.Corp{CorpID: approvalApp.CorpID, Apps: []fakewecom.App{{AgentID: approvalApp.AgentID, Secret: "app-secret"}}})
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			db := testenv.MySQL(t)
			ctx := context.Background()
			c := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
			wecomCards := &cards.Notifier{Send: wecomSend(t, srv.URL), Page: func(_, msgID string) string { return "https://yidu.example.com/m/" + msgID }}
			reg := &registrar{}
			a, b := newReplica(t, db, c, reg, &notifier{}, "replica-a"), newReplica(t, db, c, reg, &notifier{}, "replica-b")
			a.svc.o.Notify, b.svc.o.Notify = wecomCards, wecomCards
			fake.FailNext("/cgi-bin/message/send", 45009, tc.failures)
			n, err := a.svc.Compose(ctx, sender("lisi"), Compose{Draft: yidu.Draft{App: approvalApp, Title: "年终奖发放通知", Body: "请阅读",
				Audience: yidu.Audience{Departments: []int64{10}}, Schedule: yidu.Schedule{Draft: true}}})
			testenv.Check(t, "Compose", err)
			_, _, err = a.svc.SendNow(ctx, sender("lisi"), n)
			testenv.Check(t, "SendNow", err)
			outcomes := func() []string {
				return testenv.Column[string](t, db, `SELECT outcome FROM audit_events WHERE msgid = ? AND action = 'notify' ORDER BY id`, n.MsgID)
			}
			if got := outcomes(); len(got) != 1 || got[0] != "failed" {
				t.Fatalf("notify audit %v; want one failed", got)
			}
			ga, _ := loop.New("a", loop.Options{Now: c.now})
			gb, _ := loop.New("b", loop.Options{Now: c.now})
			guards := []*loop.Guard{ga, gb}
			// Before its backoff: nothing.
			c.add(CardRetryBackoff - time.Second)
			if k, err := a.svc.RetryApprovalCards(ctx, guards[0]); err != nil || k != 0 {
				t.Fatalf("RetryApprovalCards within the backoff = %d, %v; want 0", k, err)
			}
			for range MaxCardAttempts + 2 {
				c.add(CardRetryMax)
				var wg sync.WaitGroup
				for i, r := range []replica{a, b} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = r.svc.RetryApprovalCards(ctx, guards[i])
					}()
				}
				wg.Wait()
			}
			delivered := 0
			for _, s := range fake.Sent() {
				if card, _ := s.Body["template_card"].(map[string]any); card != nil && strings.HasPrefix(fmt.Sprint(card["task_id"]), n.MsgID+"@a") {
					delivered++
				}
			}
			state := testenv.Column[string](t, db, `SELECT state FROM approval_card_retries WHERE msgid = ?`, n.MsgID)
			got := outcomes()
			tries := min(tc.failures+1, MaxCardAttempts)
			if delivered != tc.cards || len(state) != 1 || state[0] != tc.state || len(got) != tries {
				t.Errorf("delivered %d, retry row %v, %d notify rows %v; want %d, %s, %d (one per try)", delivered, state, len(got), got, tc.cards, tc.state, tries)
			}
		})
	}
}
