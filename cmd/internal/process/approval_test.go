package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
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

// approvalPress is a template_card_event of an approval card's button.
func approvalPress(user, taskID, key string, at int64) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[%s]]></EventKey><TaskId><![CDATA[%s]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc]]></ResponseCode><AgentID>%d</AgentID></xml>`,
		testCorp, user, at, key, taskID, testAgent)
}

// mustRunReceiverReplica starts a second receiver on m's MySQL, Redis,
// Kafka and configuration: the other replica a WeCom callback may reach.
func mustRunReceiverReplica(tb testing.TB, m *Main) *Main {
	tb.Helper()
	cfg := m.Config
	cfg.Receiver.Listen = "127.0.0.1:0"
	r := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := r.Run(context.Background(), Roles{Receiver: true}); err != nil {
		r.Close()
		tb.Fatalf("receiver replica Run: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Errorf("receiver replica Close: %v", err)
		}
	})
	return r
}

// approvalCardsTo returns the task_ids of the approval cards of msgID
// the fake WeCom received for user, in order.
func approvalCardsTo(fake *fakewecom.Server, msgID, user string) []string {
	var out []string
	for _, s := range fake.Sent() {
		card, _ := s.Body["template_card"].(map[string]any)
		task, _ := card["task_id"].(string)
		to, _ := s.Body["touser"].(string)
		if strings.HasPrefix(task, msgID+"@a") && slices.Contains(strings.Split(to, "|"), user) {
			out = append(out, task)
		}
	}
	return out
}

// TestApprovalEndToEnd is issue 41's done-when on the real processes
// (MariaDB, Redis, Kafka, the fake WeCom, a second receiver): a notice
// to 研发's 2,400 people (over approval.over 1,000) is held and nothing
// is sent; the approver named
// in apps[].approval gets the 批准 / 驳回 card from the app; its author
// may not approve it; 驳回 (on the page, with a reason) blocks it and a
// press on that card afterwards changes nothing; after an edit, 批准
// pressed on the new card, the signed callback delivered twice to each
// of two receivers, sends it once to each recipient, and the audit
// has one approval. A scheduled one not approved by its time is held
// (待审批) and never sent.
func TestApprovalEndToEnd(t *testing.T) {
	const reviewerTok = "reviewer-token-0123456789abcdef"
	// 研发 (department 2) grows to 2,400 members: lisi, wangwu and 2,398 more.
	corp := campaignCorp()
	for i := range 2398 {
		corp.Users = append(corp.Users, fakewecom.User{UserID: fmt.Sprintf("rd%04d", i), Name: fmt.Sprintf("研发%d", i), Departments: []int{2}})
	}
	fake := fakewecom.New(corp)
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = campaignSecret
		c.Apps[0].Approval = &config.Approval{Over: 1000, Approvers: []string{"wangwu", "reviewer"}}
		c.Dashboard.PublicURL = "https://yidu.example.com"
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "reviewer", Token: reviewerTok, Grant: config.Grant{Role: "viewer", Corp: testCorp, Departments: []int64{1}}})
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "directory sync", err)
	other := mustRunReceiverReplica(t, m)
	decide := func(tok string, approve bool, hash, reason string) int {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"approve": approve, "version_hash": hash, "reason": reason})
		req, _ := http.NewRequest("POST", "http://"+m.DashboardAddr+"/api/v1/messages/ap-1/approval", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		testenv.Check(t, "POST approval", err)
		resp.Body.Close()
		return resp.StatusCode
	}
	var n struct {
		State    string `json:"state"`
		Approval string `json:"approval"`
	}
	var view struct {
		VersionHash string `json:"version_hash"`
		Recipients  int    `json:"recipients"`
	}

	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "ap-1", "app": "hr", "title": "年终奖发放通知",
		"audience": map[string]any{"departments": []int64{2}}, "send": true}, &n); code != http.StatusAccepted || n.Approval != "pending" {
		t.Fatalf("send to 研发 = %d %+v; want 202, pending", code, n)
	}
	if code := api(t, m, "GET", "/messages/ap-1/approval", nil, &view); code != 200 || view.Recipients != 2400 {
		t.Fatalf("approval view = %d %+v; want 2,400 recipients", code, view)
	}
	first := approvalCardsTo(fake, "ap-1", "wangwu")
	if len(first) != 1 {
		t.Fatalf("approval cards to wangwu: %v; want one", first)
	}
	for _, s := range fake.Sent() {
		if card, _ := s.Body["template_card"].(map[string]any); card != nil && card["task_id"] == first[0] {
			if desc := card["main_title"].(map[string]any)["desc"]; desc != "发给 2,400 人" {
				t.Errorf("the approval card says %v; want 发给 2,400 人", desc)
			}
		}
	}
	if code := decide(apiToken, true, view.VersionHash, ""); code != http.StatusForbidden {
		t.Fatalf("the author's 批准 = %d; want 403", code)
	}
	if code := decide(reviewerTok, false, view.VersionHash, "截止日期写错了"); code != 200 {
		t.Fatalf("驳回 = %d; want 200", code)
	}
	// The card of the rejected version pressed afterwards: nothing.
	if code := deliver(t, m, approvalPress("wangwu", first[0], "approve", time.Now().Unix())); code != 200 {
		t.Fatalf("callback = %d", code)
	}
	time.Sleep(2 * time.Second) // a poll of the Runner or two
	if got := cardsTo(fake, "ap-1", ""); len(got) != 0 {
		t.Fatalf("sent after 驳回: %v", got)
	}

	if code := api(t, m, "PATCH", "/messages/ap-1", map[string]any{"body": "请于下周一前确认"}, nil); code != 200 {
		t.Fatalf("PATCH = %d", code)
	}
	if code := api(t, m, "POST", "/messages/ap-1/send", nil, &n); code/100 != 2 || n.Approval != "pending" {
		t.Fatalf("send again = %d %+v; want pending", code, n)
	}
	cards := approvalCardsTo(fake, "ap-1", "wangwu")
	if len(cards) != 2 {
		t.Fatalf("approval cards to wangwu after the edit: %v; want a second one", cards)
	}
	at := time.Now().Unix()
	for _, r := range []*Main{m, other, m, other} {
		if code := deliver(t, r, approvalPress("wangwu", cards[1], "approve", at)); code != 200 {
			t.Fatalf("callback = %d", code)
		}
	}
	defer func() {
		if t.Failed() {
			evs, _, _ := audit.NewMySQL(m.DB).List(context.Background(), audit.Query{MsgID: "ap-1", Limit: 50})
			for _, e := range evs {
				t.Logf("audit: %s %s %s %s", e.Action, e.Actor, e.Outcome, e.Detail)
			}
			var st, reason, appr string
			_ = m.DB.QueryRow("SELECT state, state_reason, approval FROM campaigns WHERE msgid = 'ap-1'").Scan(&st, &reason, &appr)
			t.Logf("campaign: %s %q %s", st, reason, appr)
		}
	}()
	testenv.WaitFor(t, 20*time.Second, "the approved notice sent", func() bool {
		return api(t, m, "GET", "/messages/ap-1", nil, &n) == http.StatusOK && n.State == "sent"
	})
	time.Sleep(2 * time.Second) // a second send would come within a poll
	got := cardsTo(fake, "ap-1", "")
	if len(got) != 2400 {
		t.Errorf("cards went to %d people; want the 2,400 of 研发", len(got))
	}
	for u, k := range got {
		if k != 1 {
			t.Errorf("cards to %s: %d; want exactly 1", u, k)
		}
	}
	// A scheduled notice not approved by its time: held (待审批), never sent.
	soon := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "ap-2", "app": "hr", "title": "全员大会", "audience": map[string]any{"departments": []int64{2}},
		"send": true, "send_at": soon}, &n); code != http.StatusCreated || n.Approval != "pending" {
		t.Fatalf("schedule = %d %+v; want 201, pending", code, n)
	}
	var held struct {
		State  string `json:"state"`
		Reason string `json:"state_reason"`
	}
	testenv.WaitFor(t, 20*time.Second, "the unapproved notice held at its time", func() bool {
		return api(t, m, "GET", "/messages/ap-2", nil, &held) == http.StatusOK && held.State == "held"
	})
	time.Sleep(2 * time.Second) // a send would come within a poll
	if got := cardsTo(fake, "ap-2", ""); len(got) != 0 || !strings.Contains(held.Reason, "待审批") {
		t.Errorf("unapproved at its time: reason %q, sent to %d; want held 待审批, never sent", held.Reason, len(got))
	}

	evs, _, err := audit.NewMySQL(m.DB).List(context.Background(), audit.Query{MsgID: "ap-1", Action: "approve", Limit: 50})
	testenv.Check(t, "audit", err)
	var ok, refused int
	for _, e := range evs {
		switch {
		case e.Outcome == "ok" && e.Actor == "wangwu" && strings.Contains(e.Detail, "via=card"):
			ok++
		case e.Outcome == "refused":
			refused++
		}
	}
	if ok != 1 || refused != 2 {
		t.Errorf("approve rows: %d ok by wangwu via the card, %d refused; want 1 and 2 (the author's, the rejected card's): %+v", ok, refused, evs)
	}

	// The approval trail is in the evidence log (issue 48), each step
	// with its version hash: verify finds every row's entry; an approval
	// forged in MySQL, and a rejection deleted from it, are named.
	approvalProblems := func() []string {
		rep, err := m.Ledger.Verify(context.Background(), testCorp, "")
		testenv.Check(t, "verify", err)
		var out []string
		for _, p := range rep.Problems {
			if strings.Contains(p.Detail, "approval") {
				out = append(out, p.String())
			}
		}
		return out
	}
	if clean := approvalProblems(); len(clean) != 0 {
		t.Fatalf("verify of the approval trail: %q; want clean", clean)
	}
	steps := testenv.Column[string](t, m.DB, "SELECT step FROM notice_approvals WHERE corp_id = ? AND msgid = 'ap-1' ORDER BY id", testCorp)
	if !slices.Contains(steps, "approved") || !slices.Contains(steps, "rejected") {
		t.Fatalf("ap-1's trail = %v; want an approval and a rejection", steps)
	}
	_, err = m.DB.Exec("INSERT INTO notice_approvals (corp_id, msgid, version_hash, step, actor, at) SELECT corp_id, msgid, version_hash, 'approved', 'mallory', at FROM notice_approvals WHERE corp_id = ? AND msgid = 'ap-1' AND step = 'approved'", testCorp)
	testenv.Check(t, "forge an approval", err)
	_, err = m.DB.Exec("DELETE FROM notice_approvals WHERE corp_id = ? AND msgid = 'ap-1' AND step = 'rejected'", testCorp)
	testenv.Check(t, "delete a rejection", err)
	named := strings.Join(approvalProblems(), "\n")
	if !strings.Contains(named, "inserted: notice_approvals row") || !strings.Contains(named, "by mallory") || !strings.Contains(named, "approval rejected") {
		t.Errorf("verify after forging an approval and deleting a rejection:\n%s\nwant both named", named)
	}
}

// runDashboard starts the dashboard role alone with cfg; the caller
// closes it.
func runDashboard(tb testing.TB, cfg config.Config) *Main {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("config: %v", err)
	}
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := m.Run(context.Background(), Roles{Dashboard: true}); err != nil {
		m.Close()
		tb.Fatalf("Run: %v", err)
	}
	return m
}

// TestScheduledNarrowedAudienceHeld is issue 41's check at a scheduled
// notice's time on the real processes: a sender kept to 研发 (department
// 2) schedules a notice to 研发; yidu restarts with a configuration that
// keeps them to 销售 (3) only; at its time the notice is held with the
// field in its reason, never sent, its author (a token: no WeCom text)
// recorded as told, and the hold is an audit row.
func TestScheduledNarrowedAudienceHeld(t *testing.T) {
	const senderTok = "sender-token-0123456789abcdef"
	fake := fakewecom.New(campaignCorp())
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = campaignSecret
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "directory sync", err)
	// The sender's own dashboard; m's Runner is stopped so that only the
	// restarted configuration decides at its time.
	m.campaignCancel()
	<-m.campaignDone
	keptTo := func(dept int64) config.Config {
		cfg := m.Config
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Tokens = append(slices.Clone(cfg.Dashboard.Tokens), config.Token{Name: "hr-sender", Token: senderTok, Grant: config.Grant{Role: "sender", Corp: testCorp, Apps: []string{"hr"}, Audience: config.SenderAudience{Departments: []int64{dept}}}})
		return cfg
	}
	before := runDashboard(t, keptTo(2))
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339Nano)
	b, _ := json.Marshal(map[string]any{"msgid": "narrow-1", "app": "hr", "title": "研发部通知",
		"audience": map[string]any{"departments": []int64{2}}, "send": true, "send_at": at})
	req, _ := http.NewRequest("POST", "http://"+before.DashboardAddr+"/api/v1/messages", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+senderTok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	testenv.Check(t, "POST /messages", err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("schedule within the sender's audience = %d; want 201", resp.StatusCode)
	}
	testenv.Check(t, "Close", before.Close())

	after := runDashboard(t, keptTo(3))
	t.Cleanup(func() { _ = after.Close() })
	var n struct {
		State  string `json:"state"`
		Reason string `json:"state_reason"`
	}
	testenv.WaitFor(t, 20*time.Second, "the notice held at its time", func() bool {
		return api(t, m, "GET", "/messages/narrow-1", nil, &n) == http.StatusOK && n.State == "held"
	})
	if !strings.Contains(n.Reason, "audience.departments") {
		t.Errorf("held with reason %q; want the field audience.departments", n.Reason)
	}
	time.Sleep(2 * time.Second) // a send would come within a poll
	if got := cardsTo(fake, "narrow-1", ""); len(got) != 0 {
		t.Errorf("sent to %v although outside the sender's audience now", got)
	}
	evs, _, err := audit.NewMySQL(m.DB).List(context.Background(), audit.Query{MsgID: "narrow-1", Limit: 50})
	testenv.Check(t, "audit", err)
	var hold bool
	for _, e := range evs {
		hold = hold || e.Action == "hold" && e.Actor == "yidu" && strings.Contains(e.Detail, "audience.departments")
	}
	if !hold {
		t.Errorf("no hold row in the audit: %+v", evs)
	}
}

// TestSenderOutsideAudienceRefused is issue 41's "a sender limited to a
// department gets 403 … and the database is unchanged" on the real
// processes: a token kept to 研发 (department 2) sending now or later
// to 销售 (3), to tag 9 (not theirs) or to 全员 gets 403 naming the
// field; no notice, message, send, version, policy or msgid row is
// written and WeCom gets nothing; 研发 itself is sent.
func TestSenderOutsideAudienceRefused(t *testing.T) {
	const senderTok = "sender-token-0123456789abcdef"
	fake := fakewecom.New(campaignCorp())
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = campaignSecret
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "hr-sender", Token: senderTok, Grant: config.Grant{Role: "sender", Corp: testCorp, Apps: []string{"hr"}, Audience: config.SenderAudience{Departments: []int64{2}}}})
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "directory sync", err)

	tables := []string{"campaigns", "messages", "message_sends", "notice_versions", "follow_ups", "msgids", "notice_approvals"}
	sums := func() map[string]string {
		out := map[string]string{}
		for _, tb := range tables {
			var name, sum string
			var n int
			testenv.Check(t, "checksum", m.DB.QueryRow("CHECKSUM TABLE "+tb).Scan(&name, &sum))
			testenv.Check(t, "count", m.DB.QueryRow("SELECT COUNT(*) FROM "+tb).Scan(&n))
			out[tb] = fmt.Sprintf("%s/%d", sum, n)
		}
		return out
	}
	post := func(body map[string]any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", "http://"+m.DashboardAddr+"/api/v1/messages", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+senderTok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		testenv.Check(t, "POST /messages", err)
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	before, sent := sums(), len(fake.Sent())
	later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for i, tc := range []struct {
		name     string
		audience map[string]any
		field    string
	}{
		{"department 3", map[string]any{"departments": []int64{3}}, "audience.departments"},
		{"a tag outside", map[string]any{"tags": []int64{9}}, "audience.tags"},
		{"全员", map[string]any{"all": true}, "audience.all"},
	} {
		for _, when := range []string{"", later} {
			body := map[string]any{"msgid": fmt.Sprintf("out-%d-%t", i, when != ""), "app": "hr", "title": "越权通知", "audience": tc.audience, "send": true}
			if when != "" {
				body["send_at"] = when
			}
			if code, j := post(body); code != http.StatusForbidden || j["field"] != tc.field {
				t.Errorf("%s (send_at %q) = %d %v; want 403 at %s", tc.name, when, code, j, tc.field)
			}
		}
	}
	if after := sums(); !maps.Equal(before, after) {
		t.Errorf("tables changed by refused sends:\nbefore %v\n after %v", before, after)
	}
	if got := len(fake.Sent()); got != sent {
		t.Errorf("WeCom got %d messages from refused sends", got-sent)
	}
	if code, j := post(map[string]any{"msgid": "in-2", "app": "hr", "title": "研发部通知", "audience": map[string]any{"departments": []int64{2}}, "send": true}); code != http.StatusCreated {
		t.Errorf("研发 itself = %d %v; want 201", code, j)
	}
}

// TestApprovalCardRefusedIsRetried (issue 46): WeCom answers the approval
// card's message/send with an errcode (45009, over the call limit). The
// ask is an audit row "failed", not "ok", and the card is sent again by
// the retry loop (claimed in MySQL) once its backoff ended: the approver
// gets it, and that try is an audit row "ok". On the old code the
// errcode was audited ok and the card never sent again.
func TestApprovalCardRefusedIsRetried(t *testing.T) {
	fake := fakewecom.New(campaignCorp())
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = campaignSecret
		c.Apps[0].Approval = &config.Approval{Over: 1, Approvers: []string{"wecom:wangwu"}}
		c.Dashboard.PublicURL = "https://yidu.example.com"
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: campaignSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "directory sync", err)
	outcomes := func() []string {
		return testenv.Column[string](t, m.DB, `SELECT outcome FROM audit_events WHERE msgid = 'ap-r' AND action = 'notify' ORDER BY id`)
	}

	fake.FailNext("/cgi-bin/message/send", 45009, 1)
	var n struct {
		Approval string `json:"approval"`
	}
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "ap-r", "app": "hr", "title": "年终奖发放通知",
		"audience": map[string]any{"departments": []int64{2}}, "send": true}, &n); code != http.StatusAccepted || n.Approval != "pending" {
		t.Fatalf("send to 研发 = %d %+v; want 202, pending", code, n)
	}
	if got := outcomes(); !slices.Equal(got, []string{"failed"}) {
		t.Fatalf("notify audit rows %v; want one failed (WeCom answered errcode 45009)", got)
	}
	if got := approvalCardsTo(fake, "ap-r", "wangwu"); len(got) != 0 {
		t.Fatalf("cards WeCom took: %v; want none yet", got)
	}
	// Its backoff over (30 s): the next turn of the retry loop sends it.
	_, err = m.DB.Exec(`UPDATE approval_card_retries SET next_at = '2000-01-01' WHERE msgid = 'ap-r'`)
	testenv.Check(t, "end the backoff", err)
	testenv.WaitFor(t, 20*time.Second, "the approval card sent again", func() bool {
		return len(approvalCardsTo(fake, "ap-r", "wangwu")) == 1
	})
	testenv.WaitFor(t, 5*time.Second, "the retry audited", func() bool { return slices.Equal(outcomes(), []string{"failed", "ok"}) })
	// The try is audited before its claim ends: the row is "sent" a moment later.
	retryRows := func() []string {
		return testenv.Column[string](t, m.DB, `SELECT state FROM approval_card_retries WHERE msgid = 'ap-r'`)
	}
	testenv.WaitFor(t, 5*time.Second, "the retry row sent", func() bool { return slices.Equal(retryRows(), []string{"sent"}) })
	time.Sleep(6 * time.Second) // another turn: nothing more
	if got := approvalCardsTo(fake, "ap-r", "wangwu"); len(got) != 1 {
		t.Errorf("cards %v; want exactly one", got)
	}
}
