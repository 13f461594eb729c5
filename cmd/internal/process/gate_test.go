package process

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// Issue 46's gate on the real processes (MariaDB, Redis, Kafka, the fake
// WeCom): findings 2, 3 and 4, each as an operator or an attacker would
// play it through the dashboard's API.

const (
	gateReviewerTok = "gate-reviewer-0123456789abcdef"
	gateSenderTok   = "gate-sender-0123456789abcdefgh"
)

// mustRunGate runs yidu against campaignCorp (研发 2: lisi, wangwu; 销售
// 3: mallory; 公司 1: zhangsan) with edit applied, the directory synced.
func mustRunGate(t *testing.T, edit func(*config.Config)) (*Main, *fakewecom.Server) {
	t.Helper()
	return mustRunSynced(t, campaignCorp(), edit)
}

// syncDirectory syncs m's corp from the fake WeCom its configuration
// names, as `yidu directory sync` does.
func syncDirectory(t *testing.T, m *Main) {
	t.Helper()
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "directory sync", err)
}

// apiAs is api with another bearer token; it answers the status and the
// body.
func apiAs(t *testing.T, m *Main, tok, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+m.DashboardAddr+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	testenv.Check(t, method+" "+path, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// auditRows are the audit rows of msgID as "action/outcome".
func auditRows(t *testing.T, m *Main, msgID string) []string {
	t.Helper()
	evs, _, err := audit.NewMySQL(m.DB).List(context.Background(), audit.Query{MsgID: msgID, Limit: 100})
	testenv.Check(t, "audit", err)
	var out []string
	for _, e := range evs {
		out = append(out, string(e.Action)+"/"+e.Outcome)
	}
	return out
}

// TestGateDraftNotReminded is finding 2: a notice registered without
// send (a draft) to more than approval.over people was never approved;
// POST …/remind is 409 naming why and sends no card, and a follow-up
// policy on it waits: its round, due in seconds, sends nothing.
func TestGateDraftNotReminded(t *testing.T) {
	m, fake := mustRunGate(t, func(c *config.Config) {
		c.Apps[0].Approval = &config.Approval{Over: 2, Approvers: []string{"wangwu"}}
		c.Dashboard.PublicURL = "https://yidu.example.com"
		c.Dashboard.MinReminderDelay = config.Duration(time.Second)
	})
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "draft-1", "app": "hr", "title": "全体通知",
		"audience": map[string]any{"departments": []int64{1}}, "send": false,
		"follow_up": map[string]any{"reminders": []string{"2s"}}}, nil); code != http.StatusCreated {
		t.Fatalf("register without send = %d; want 201", code)
	}
	code, body := apiAs(t, m, apiToken, "POST", "/messages/draft-1/remind", nil)
	if msg, _ := body["error"].(string); code != http.StatusConflict || !strings.Contains(msg, "draft") || !strings.Contains(msg, "approval") {
		t.Errorf("remind a draft needing approval = %d %v; want 409 naming the draft and approval", code, body)
	}
	time.Sleep(6 * time.Second) // the round was due after 2 s; the rounds tick every 2 s
	for _, kind := range []string{"", "r", "f", "d"} {
		if got := cardsTo(fake, "draft-1", kind); len(got) != 0 {
			t.Errorf("cards of kind %q sent to %v; want none (never approved)", kind, got)
		}
	}
	if rows := auditRows(t, m, "draft-1"); !strings.Contains(strings.Join(rows, ","), "remind/refused") {
		t.Errorf("audit rows %v; want the refused reminder", rows)
	}
	// The same notice on an app without approval is reminded as before.
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "draft-2", "app": "hr", "title": "小范围通知",
		"audience": map[string]any{"userids": []string{"lisi"}}, "send": false}, nil); code != http.StatusCreated {
		t.Fatalf("register a small one without send = %d", code)
	}
	if code, body := apiAs(t, m, apiToken, "POST", "/messages/draft-2/remind", nil); code != http.StatusOK {
		t.Errorf("remind a draft its app asks no approval for = %d %v; want 200", code, body)
	}
}

// TestGateRevisionWaitsForApproval is finding 3: an approved, sent
// notice's material revision (PATCH content + reacknowledge) is held as
// a new version asking approval again (202, pending, a new hash, the
// approvers' card), not published and nobody told; approved, it is
// published as version 2.
func TestGateRevisionWaitsForApproval(t *testing.T) {
	m, fake := mustRunGate(t, func(c *config.Config) {
		c.Apps[0].Approval = &config.Approval{Over: 2, Approvers: []string{"wangwu", "reviewer"}}
		c.Dashboard.PublicURL = "https://yidu.example.com"
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "reviewer", Token: gateReviewerTok, Grant: config.Grant{Role: "viewer", Corp: testCorp, Departments: []int64{1}}})
	})
	var n struct {
		State        string `json:"state"`
		Approval     string `json:"approval"`
		ApprovalHash string `json:"approval_hash"`
	}
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "rev-1", "app": "hr", "title": "考勤制度",
		"audience": map[string]any{"departments": []int64{1}}, "send": true, "read_rule": "acknowledged",
		"content": map[string]any{"markdown": "# 第一条\n\n九点上班。"}}, &n); code != http.StatusAccepted || n.Approval != "pending" {
		t.Fatalf("send to everyone = %d %+v; want 202 pending", code, n)
	}
	approve := func(what string) {
		t.Helper()
		var view struct {
			VersionHash string `json:"version_hash"`
		}
		if code := api(t, m, "GET", "/messages/rev-1/approval", nil, &view); code != http.StatusOK {
			t.Fatalf("%s: approval view = %d", what, code)
		}
		if code, body := apiAs(t, m, gateReviewerTok, "POST", "/messages/rev-1/approval", map[string]any{"approve": true, "version_hash": view.VersionHash}); code != http.StatusOK {
			t.Fatalf("%s: approve = %d %v", what, code, body)
		}
	}
	approve("first send")
	testenv.WaitFor(t, 20*time.Second, "the approved notice sent to its 4 people", func() bool {
		return len(cardsTo(fake, "rev-1", "")) == 4
	})
	// The Runner marks it sent once its batches are done (a revision
	// while it is still sending is 409).
	testenv.WaitFor(t, 20*time.Second, "the notice marked sent", func() bool {
		return api(t, m, "GET", "/messages/rev-1", nil, &n) == http.StatusOK && n.State == "sent"
	})
	if n.Approval != "approved" {
		t.Fatalf("after send = %+v; want approved", n)
	}
	approved := n.ApprovalHash
	asked := len(approvalCardsTo(fake, "rev-1", "wangwu"))
	sent := len(fake.Sent())

	code, body := apiAs(t, m, apiToken, "PATCH", "/messages/rev-1", map[string]any{"content": map[string]any{"markdown": "# 第一条\n\n八点上班。"}, "reacknowledge": true})
	if code != http.StatusAccepted || body["approval"] != "pending" {
		t.Fatalf("material revision of an approved notice = %d %v; want 202 pending", code, body)
	}
	var c struct {
		Version  int    `json:"version"`
		Versions int    `json:"versions"`
		Markdown string `json:"markdown"`
	}
	if code := api(t, m, "GET", "/messages/rev-1/content", nil, &c); code != http.StatusOK || c.Versions != 1 || strings.Contains(c.Markdown, "八点") {
		t.Errorf("content while the revision waits = %d %+v; want version 1 alone, unchanged", code, c)
	}
	if code := api(t, m, "GET", "/messages/rev-1", nil, &n); code != http.StatusOK || n.Approval != "pending" || n.ApprovalHash == approved {
		t.Errorf("notice while the revision waits = %+v; want pending with a new hash (approved was %s)", n, approved)
	}
	if got := approvalCardsTo(fake, "rev-1", "wangwu"); len(got) != asked+1 {
		t.Errorf("approval cards to wangwu = %v; want one more for the revision", got)
	}
	for _, s := range fake.Sent()[sent:] {
		if card, _ := s.Body["template_card"].(map[string]any); card != nil {
			if task, _ := card["task_id"].(string); strings.HasPrefix(task, "rev-1@a") {
				continue
			}
		}
		t.Errorf("sent while the revision waits: %s", s.Raw)
	}
	// A second material revision while it waits is held too.
	if code, body := apiAs(t, m, apiToken, "PATCH", "/messages/rev-1", map[string]any{"content": map[string]any{"markdown": "# 第一条\n\n八点半上班。"}, "reacknowledge": true}); code != http.StatusAccepted {
		t.Fatalf("second material revision = %d %v; want 202", code, body)
	}
	if code := api(t, m, "GET", "/messages/rev-1/content", nil, &c); code != http.StatusOK || c.Versions != 1 {
		t.Errorf("content after two held revisions = %+v; want version 1 alone", c)
	}

	// 批准 pressed on the latest card (the receiver's process decides
	// and publishes), delivered twice.
	cards := approvalCardsTo(fake, "rev-1", "wangwu")
	if len(cards) != asked+2 {
		t.Fatalf("approval cards to wangwu = %v; want one per held revision", cards)
	}
	at := time.Now().Unix()
	for range 2 {
		if code := deliver(t, m, approvalPress("wangwu", cards[len(cards)-1], "approve", at)); code != http.StatusOK {
			t.Fatalf("callback = %d", code)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the approved revision published", func() bool {
		return api(t, m, "GET", "/messages/rev-1/content", nil, &c) == http.StatusOK && c.Versions == 2
	})
	if c.Version != 2 || !strings.Contains(c.Markdown, "八点半") {
		t.Errorf("content once approved = %+v; want version 2, the approved text", c)
	}
	if rows := strings.Join(auditRows(t, m, "rev-1"), ","); !strings.Contains(rows, "approval_request/ok") || !strings.Contains(rows, "edit/ok") {
		t.Errorf("audit rows %s; want the revision's approval request and edit", rows)
	}
}

// TestGateSenderAudienceOnEveryAct is finding 4: a sender kept to 研发
// (department 2) is refused with 403, and an audit row, every act on a
// notice to 销售 (department 3): remind, PUT follow_up, cancel-round,
// PATCH (a new version) and recall; nothing changes and WeCom gets
// nothing. A notice to 研发 is theirs to act on.
func TestGateSenderAudienceOnEveryAct(t *testing.T) {
	m, fake := mustRunGate(t, func(c *config.Config) {
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "rd-sender", Token: gateSenderTok, Grant: config.Grant{Role: "sender", Corp: testCorp, Apps: []string{"hr"}, Audience: config.SenderAudience{Departments: []int64{2}}}})
	})
	for _, id := range []string{"sales-1", "rd-1"} {
		dept := int64(3)
		if id == "rd-1" {
			dept = 2
		}
		if code := api(t, m, "POST", "/messages", map[string]any{"msgid": id, "app": "hr", "title": "部门通知",
			"audience": map[string]any{"departments": []int64{dept}}, "send": true,
			"content": map[string]any{"markdown": "第一版"}}, nil); code != http.StatusCreated {
			t.Fatalf("send %s = %d", id, code)
		}
	}
	sent := len(fake.Sent())
	acts := []struct {
		name, method, path string
		body               any
	}{
		{"remind", "POST", "/remind", nil},
		{"PUT follow_up", "PUT", "/follow_up", map[string]any{"reminders": []string{"1h"}}},
		{"cancel-round", "POST", "/follow_up/cancel-round", nil},
		{"PATCH a new version", "PATCH", "", map[string]any{"content": map[string]any{"markdown": "改写"}, "reacknowledge": true}},
		{"recall", "POST", "/recall", nil},
	}
	for _, a := range acts {
		code, body := apiAs(t, m, gateSenderTok, a.method, "/messages/sales-1"+a.path, a.body)
		if code != http.StatusForbidden {
			t.Errorf("%s of a 销售 notice by a sender kept to 研发 = %d %v; want 403", a.name, code, body)
		}
	}
	if got := len(fake.Sent()); got != sent {
		t.Errorf("WeCom got %d messages from refused acts", got-sent)
	}
	var c struct {
		Versions int `json:"versions"`
	}
	if code := api(t, m, "GET", "/messages/sales-1/content", nil, &c); code != http.StatusOK || c.Versions != 1 {
		t.Errorf("sales-1 content = %d %+v; want version 1 alone", code, c)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM follow_ups WHERE msgid = 'sales-1'")[0]; n != 0 {
		t.Errorf("follow_ups of sales-1 = %d; want none", n)
	}
	rows := strings.Join(auditRows(t, m, "sales-1"), ",")
	for _, want := range []string{"remind/refused", "follow_up_change/refused", "edit/refused", "recall/refused"} {
		if !strings.Contains(rows, want) {
			t.Errorf("audit rows of sales-1 %s; want %s", rows, want)
		}
	}
	// Inside their audience the same acts go through.
	if code, body := apiAs(t, m, gateSenderTok, "PUT", "/messages/rd-1/follow_up", map[string]any{"reminders": []string{"1h"}}); code != http.StatusOK {
		t.Errorf("PUT follow_up of a 研发 notice = %d %v; want 200", code, body)
	}
	if code, body := apiAs(t, m, gateSenderTok, "PATCH", "/messages/rd-1", map[string]any{"content": map[string]any{"markdown": "第二版"}, "reacknowledge": true}); code != http.StatusOK {
		t.Errorf("PATCH of a 研发 notice = %d %v; want 200", code, body)
	}
}
