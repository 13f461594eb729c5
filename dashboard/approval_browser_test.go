package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
)

// newApprovalFixture is the campaign fixture with hr asking for approval
// of notices to more than 2 people, alice (a password user) its approver.
func newApprovalFixture(tb testing.TB) (*fixture, *store.Store) {
	tb.Helper()
	var st *store.Store
	f := newFixtureOpts(tb, false, func(o *deps) {
		o.Apps[0].Approval = &yidu.Approval{Over: 2, Approvers: []string{"alice"}}
		db := testenv.MySQL(tb)
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(tb, "store.New", err)
		st, o.Campaigns = s, s
		rec := audit.NewMySQL(db)
		o.Audit, o.AuditLog = rec, rec
	})
	withAudienceDirectory(tb, f)
	return f, st
}

// TestApprovalAPI: a token's notice to 3 people sent straight away is
// kept (202, 待审批) and nothing is registered; its author may not
// approve it; the approver's view has the exact count.
func TestApprovalAPI(t *testing.T) {
	f, _ := newApprovalFixture(t)
	before := f.count(t, "SELECT COUNT(*) FROM messages")
	code, j := f.api(t, "POST", "/messages", `{"msgid":"big-1","app":"hr","title":"年终奖发放通知","audience":{"userids":["alice","zhangsan","lisi"]},"send":true}`)
	if code != http.StatusAccepted || j["approval"] != "pending" || j["state"] != "draft" {
		t.Fatalf("send = %d %v; want 202, a draft pending approval", code, j)
	}
	registered := f.count(t, "SELECT COUNT(*) FROM messages")
	if registered != before {
		t.Fatalf("%d registered before approval", registered-before)
	}
	code, view := f.api(t, "GET", "/messages/big-1/approval", "")
	if code != 200 || view["recipients"] != float64(3) || view["state"] != "pending" || view["may_decide"] != false {
		t.Fatalf("approval view = %d %v; want 3 recipients, pending, the author may not decide", code, view)
	}
	code, j = f.api(t, "POST", "/messages/big-1/approval", `{"approve":true,"version_hash":"`+view["version_hash"].(string)+`"}`)
	if code != http.StatusForbidden {
		t.Fatalf("the author's approval = %d %v; want 403", code, j)
	}

	// Issue 49: the compose page learns before sending that approval is
	// needed and from whom; the approval view names the approvers; the
	// author may 催办 (once per 10 minutes) and 撤回申请 (a draft again).
	code, pv := f.api(t, "POST", "/audience/preview", `{"app":"hr","audience":{"userids":["alice","zhangsan","lisi"]}}`)
	if ap, _ := pv["approval"].(map[string]any); code != 200 || ap["needed"] != true || fmt.Sprint(ap["approvers"]) != "[Alice 张]" {
		t.Errorf("preview = %d %v; want approval needed by [Alice 张] (alice by her directory name)", code, pv)
	}
	code, pv = f.api(t, "POST", "/audience/preview", `{"app":"hr","audience":{"userids":["zhangsan"]}}`)
	if ap, _ := pv["approval"].(map[string]any); code != 200 || ap["needed"] != false {
		t.Errorf("preview of 1 = %d %v; want no approval needed", code, pv)
	}
	if fmt.Sprint(view["approvers"]) != "[Alice 张]" || view["mine"] != true {
		t.Errorf("approval view approvers %v, mine %v; want [Alice 张], true", view["approvers"], view["mine"])
	}
	if code, j := f.api(t, "POST", "/messages/big-1/approval/nudge", ""); code != http.StatusTooManyRequests {
		t.Errorf("催办 right after the request = %d %v; want 429", code, j)
	}
	f.clock.Add(campaign.NudgeEvery)
	if code, j := f.api(t, "POST", "/messages/big-1/approval/nudge", ""); code != 200 {
		t.Errorf("催办 = %d %v; want 200", code, j)
	}
	if code, j := f.api(t, "POST", "/messages/big-1/approval/nudge", ""); code != http.StatusTooManyRequests {
		t.Errorf("催办 again at once = %d %v; want 429", code, j)
	}
	code, j = f.api(t, "POST", "/messages/big-1/approval/withdraw", "")
	if code != 200 || j["state"] != "draft" || j["approval"] != "" && j["approval"] != nil {
		t.Errorf("撤回申请 = %d %v; want 200, a draft with no approval", code, j)
	}
	if code, j := f.api(t, "POST", "/messages/big-1/approval/nudge", ""); code != http.StatusConflict {
		t.Errorf("催办 after 撤回申请 = %d %v; want 409", code, j)
	}
	_, view = f.api(t, "GET", "/messages/big-1/approval", "")
	var steps []string
	for _, st := range view["trail"].([]any) {
		steps = append(steps, st.(map[string]any)["step"].(string))
	}
	if fmt.Sprint(steps) != "[requested nudged withdrawn]" {
		t.Errorf("trail %v; want requested, nudged, withdrawn", steps)
	}
}

// TestBrowserApproval is the approver's page in chromium at a laptop's
// and a phone's width: the count, the card, 驳回 needs a reason, then
// after an edit 批准 approves the new version.
func TestBrowserApproval(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	f, _ := newApprovalFixture(t)
	if code, j := f.api(t, "POST", "/messages", `{"msgid":"big-1","app":"hr","title":"年终奖发放通知","body":"请于本周五前确认","audience":{"userids":["alice","zhangsan","lisi"]},"send":true}`); code != http.StatusAccepted {
		t.Fatalf("send = %d %v", code, j)
	}
	ts := httptest.NewServer(f.h)
	t.Cleanup(ts.Close)
	b := startComposeBrowser(t)
	b.do(t, "Chinese first", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}})
		return err
	}))
	b.do(t, "sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "the approval page", chromedp.Navigate(ts.URL+"/approve/big-1"), chromedp.WaitVisible(chromedp.ID("approval")))
	if got := evalJS[string](t, b, textOf+`("approval-recipients")`); !strings.Contains(got, "3") || !strings.Contains(got, "接收人") {
		t.Errorf("recipients = %q; want 接收人 3 人", got)
	}
	if got := evalJS[string](t, b, textOf+`("approval-card")`); !strings.Contains(got, "年终奖发放通知") || !strings.Contains(got, "请于本周五前确认") {
		t.Errorf("card = %q; want the title and body members see", got)
	}
	b.shot(t, "approval-1280")

	b.do(t, "驳回 without a reason", chromedp.Click(chromedp.ID("reject")))
	b.wait(t, "a reason asked for", `document.getElementById("approval-error").textContent.includes("原因")`)
	b.do(t, "驳回 with a reason", chromedp.SendKeys(chromedp.ID("reject-reason"), "截止日期写错了"), chromedp.Click(chromedp.ID("reject")))
	b.wait(t, "rejected", `document.getElementById("approval")?.dataset.state === "rejected" && document.getElementById("approval-actions") === null`)

	// The author fixes it and sends again: a new version to approve.
	if code, j := f.api(t, "PATCH", "/messages/big-1", `{"body":"请于下周一前确认"}`); code != 200 {
		t.Fatalf("PATCH = %d %v", code, j)
	}
	if code, j := f.api(t, "POST", "/messages/big-1/send", ""); code/100 != 2 || j["approval"] != "pending" {
		t.Fatalf("send again = %d %v; want pending", code, j)
	}
	b.do(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)), chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("approve")))
	if w := evalJS[float64](t, b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); w > 0 {
		t.Errorf("the approval page scrolls sideways by %.0f px at 390 px", w)
	}
	b.shot(t, "approval-390")
	b.do(t, "批准", chromedp.Click(chromedp.ID("approve")))
	b.wait(t, "approved", `document.getElementById("approval")?.dataset.state === "approved"`)
	if got := evalJS[float64](t, b, `document.querySelectorAll("#approval-trail li").length`); got != 4 {
		t.Errorf("trail has %v steps; want requested, rejected, requested, approved", got)
	}
	code, j := f.api(t, "GET", "/messages/big-1", "")
	if code != 200 || j["approval"] != "approved" || j["state"] != "scheduled" {
		t.Errorf("after 批准: %d %v; want approved and due (scheduled, sent now by the Runner)", code, j)
	}
	if p := b.console(); len(p) > 0 {
		t.Errorf("console errors: %q", p)
	}
}

// TestBrowserFromTemplate: 从模板新建 on the compose page fills the
// notice from the app's template (title, body, audience, full text, read
// rule).
func TestBrowserFromTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	f, _ := newApprovalFixture(t)
	db := testenv.MySQL(t)
	atts, err := attachment.New(db, attachment.Options{Now: f.clock.Now})
	testenv.Check(t, "attachment.New", err)
	a, err := atts.Put(t.Context(), "acme", "hr", "考勤表.pdf", strings.NewReader("%PDF-1.7\nattendance"))
	testenv.Check(t, "Put", err)
	tpls := store.NewTemplates(db, []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1000002}}, f.clock.Now)
	f.rewire(t, func(d *deps) { d.Templates, d.Files = tpls, atts })
	if code, j := f.api(t, "POST", "/templates", `{"app":"hr","name":"月度考勤","title":"请确认本月考勤","body":"截止 25 日","audience":{"departments":[2]},"markdown":"# 考勤\n\n请确认。","attachments":["`+a.ID+`"],"read_rule":"acknowledged"}`); code != 201 {
		t.Fatalf("save a template = %d %v", code, j)
	}
	ts := httptest.NewServer(f.h)
	t.Cleanup(ts.Close)
	b := startComposeBrowser(t)
	b.do(t, "sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "compose", chromedp.Navigate(ts.URL+"/new"), chromedp.WaitVisible(chromedp.ID("compose")))
	b.wait(t, "the template offered", `document.querySelectorAll("#template-pick option").length === 2`)
	// Picking a template opens /new?template=ID (SetValue fires change).
	b.do(t, "从模板新建", chromedp.SetValue(chromedp.ID("template-pick"), "1"))
	b.wait(t, "filled from the template", `location.search === "?template=1" && document.getElementById("title").value === "请确认本月考勤" && document.getElementById("body").value === "截止 25 日" && document.getElementById("markdown").value.includes("请确认。") && document.getElementById("read-rule").value === "acknowledged"`)
	// The template's attachment, attached again and shown in the reading
	// page's preview.
	b.wait(t, "its attachment attached", `document.getElementById("attachment-list").textContent.includes("考勤表.pdf") && document.getElementById("pv-attachments").textContent.includes("考勤表.pdf")`)
	b.shot(t, "compose-from-template-1280")
}

// TestApprovalByNamedApprover: an approver named in approval.approvers
// who is no sender of the app (here a viewer token) opens the approval
// and may decide; a viewer not named gets 404, as for any unsent notice.
func TestApprovalByNamedApprover(t *testing.T) {
	const reviewerTok, otherTok = "reviewer-token-0123456789", "other-viewer-0123456789"
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps[0].Approval = &yidu.Approval{Over: 2, Approvers: []string{"reviewer"}}
		o.Tokens = append(o.Tokens,
			access.Token{Name: "reviewer", Token: reviewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}},
			access.Token{Name: "viewer-4", Token: otherTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}})
		db := testenv.MySQL(t)
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		o.Campaigns = s
		rec := audit.NewMySQL(db)
		o.Audit, o.AuditLog = rec, rec
	})
	withAudienceDirectory(t, f)
	if code, j := f.api(t, "POST", "/messages", `{"msgid":"big-2","app":"hr","title":"年终奖发放通知","audience":{"userids":["alice","zhangsan","lisi"]},"send":true}`); code != http.StatusAccepted {
		t.Fatalf("send = %d %v; want 202 pending", code, j)
	}
	w := f.do(t, "GET", "/api/v1/messages/big-2/approval", reviewerTok, nil)
	var view map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &view)
	if w.Code != http.StatusOK || view["may_decide"] != true || view["recipients"] != float64(3) {
		t.Fatalf("the named approver's view = %d %s; want 200, 3 recipients, may decide", w.Code, w.Body)
	}
	if w := f.do(t, "GET", "/api/v1/messages/big-2/approval", otherTok, nil); w.Code != http.StatusNotFound {
		t.Fatalf("a viewer not named = %d %s; want 404", w.Code, w.Body)
	}
	body := `{"approve":true,"version_hash":"` + view["version_hash"].(string) + `"}`
	if w := f.do(t, "POST", "/api/v1/messages/big-2/approval", otherTok, strings.NewReader(body)); w.Code != http.StatusNotFound {
		t.Fatalf("a viewer not named approves = %d %s; want 404", w.Code, w.Body)
	}
	if w := f.do(t, "POST", "/api/v1/messages/big-2/approval", reviewerTok, strings.NewReader(body)); w.Code != http.StatusOK {
		t.Fatalf("the named approver approves = %d %s; want 200", w.Code, w.Body)
	}
}

// recordingRegistrar is the fixture's tracker as the Runner sees it,
// keeping what it was asked to register.
type recordingRegistrar struct {
	messages
	mu   sync.Mutex
	regs []yidu.Registration
}

func (r *recordingRegistrar) RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error) {
	r.mu.Lock()
	r.regs = append(r.regs, reg)
	r.mu.Unlock()
	return r.messages.RegisterAndSend(ctx, reg)
}

// TestApprovalWithContent: a notice with its full text that needs
// approval is held (202, a draft pending approval, nothing registered),
// the approver sees its text; an edit of the text alone makes another
// version hash, so the approval of the earlier one is refused; once the
// new one is approved the Runner sends it with its text as version 1,
// read rule and reading page included, exactly once although the
// approval is pressed twice and the Runner polls again.
func TestApprovalWithContent(t *testing.T) {
	const aliceTok = "alice-token-0123456789"
	var st *store.Store
	var ns *notice.Store
	var atts *attachment.Store
	page := func(app, msgID string) string { return "https://read.example.com/r/" + app + "/" + msgID }
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps[0].Approval = &yidu.Approval{Over: 2, Approvers: []string{"alice"}}
		o.Tokens = append(o.Tokens, access.Token{Name: "alice", Token: aliceTok, Corps: []string{"acme"}})
		db := testenv.MySQL(t)
		s, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		st, o.Campaigns = s, s
		atts, err = attachment.New(db, attachment.Options{Now: o.Now})
		testenv.Check(t, "attachment.New", err)
		ns, err = notice.New(db, atts, notice.Options{Now: o.Now})
		testenv.Check(t, "notice.New", err)
		o.Attachments, o.Notices, o.ReadingPage = atts, ns, page
		rec := audit.NewMySQL(db)
		o.Audit, o.AuditLog = rec, rec
	})
	withAudienceDirectory(t, f)
	a, err := atts.Put(t.Context(), "acme", "hr", "评分表.pdf", strings.NewReader("%PDF-1.7\nscores"))
	testenv.Check(t, "Put", err)
	reg := &recordingRegistrar{messages: f.arch}
	runner, err := loops.NewRunner(st, reg, loops.RunnerOptions{Publisher: ns})
	testenv.Check(t, "NewRunner", err)

	code, j := f.api(t, "POST", "/messages", `{"msgid":"big-3","app":"hr","title":"2026年度绩效考核办法","audience":{"userids":["alice","zhangsan","lisi"]},"send":true,
		"content":{"markdown":"# 第四条\n\n考核周期为一年。","attachments":["`+a.ID+`"]},"read_rule":"acknowledged","min_read_seconds":5}`)
	if code != http.StatusAccepted || j["approval"] != "pending" || j["state"] != "draft" || j["read_rule"] != "acknowledged" || j["url"] != page("hr", "big-3") {
		t.Fatalf("send with content needing approval = %d %v; want 202, a draft pending approval keeping its text, linked to its page", code, j)
	}
	if n, _ := runner.Tick(t.Context()); n != 0 || len(reg.regs) != 0 {
		t.Fatalf("the Runner claimed %d, registered %d before approval", n, len(reg.regs))
	}
	approve := func(hash string) (int, map[string]any) {
		t.Helper()
		w := f.do(t, "POST", "/api/v1/messages/big-3/approval", aliceTok, strings.NewReader(`{"approve":true,"version_hash":"`+hash+`"}`))
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	view := func() map[string]any {
		t.Helper()
		w := f.do(t, "GET", "/api/v1/messages/big-3/approval", aliceTok, nil)
		var v map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || w.Code != 200 {
			t.Fatalf("approval view = %d %s", w.Code, w.Body)
		}
		return v
	}
	v1 := view()
	if c, _ := v1["content"].(map[string]any); c == nil || !strings.Contains(c["html"].(string), "考核周期为一年。") || len(c["attachments"].([]any)) != 1 {
		t.Fatalf("the approver's view lacks the text: %v", v1["content"])
	}
	cookie, _ := f.login(t) // alice, the approver, signed in
	if w := f.page(cookie, "/approve/big-3"); w.Code != 200 || !strings.Contains(w.Body.String(), `id="approval-content"`) ||
		!strings.Contains(w.Body.String(), "<h1>第四条</h1>") || !strings.Contains(w.Body.String(), "评分表.pdf") {
		t.Errorf("the approval page = %d, without the rendered text and its attachment: %.400s", w.Code, w.Body)
	}
	// The author corrects the text alone: another version to approve.
	if code, j := f.api(t, "PATCH", "/messages/big-3", `{"content":{"markdown":"# 第四条\n\n考核周期为半年。","attachments":["`+a.ID+`"]}}`); code != 200 || j["content"] == nil {
		t.Fatalf("PATCH the draft's text = %d %v", code, j)
	}
	if code, j := f.api(t, "POST", "/messages/big-3/send", ""); code/100 != 2 || j["approval"] != "pending" {
		t.Fatalf("send again = %d %v; want pending", code, j)
	}
	v2 := view()
	if v2["version_hash"] == v1["version_hash"] {
		t.Fatal("the version hash did not change with the text")
	}
	if code, j := approve(v1["version_hash"].(string)); code != http.StatusConflict {
		t.Fatalf("approval of the text before the edit = %d %v; want 409", code, j)
	}
	if code, j := approve(v2["version_hash"].(string)); code != 200 || j["again"] != false {
		t.Fatalf("批准 = %d %v", code, j)
	}
	if code, j := approve(v2["version_hash"].(string)); code != 200 || j["again"] != true {
		t.Fatalf("批准 again = %d %v; want 200, again", code, j)
	}
	for range 2 {
		if _, err := runner.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if len(reg.regs) != 1 {
		t.Fatalf("registered %d times; want once", len(reg.regs))
	}
	if r := reg.regs[0]; r.ReadRule != yidu.ReadRuleAcknowledged || r.URL != page("hr", "big-3") || !r.FromNotice {
		t.Errorf("registration = rule %q, url %q; want acknowledged, the reading page", r.ReadRule, r.URL)
	}
	vs, err := ns.List(t.Context(), "acme", "big-3")
	testenv.Check(t, "List", err)
	if len(vs) != 1 || vs[0].N != 1 || !strings.Contains(vs[0].Markdown, "半年") || len(vs[0].Attachments) != 1 ||
		vs[0].Settings != (notice.Settings{ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 5}) || vs[0].Title != "2026年度绩效考核办法" {
		t.Fatalf("versions = %+v; want one, version 1, the approved text and its settings", vs)
	}
	n, err := st.Get(t.Context(), nil, "big-3")
	if err != nil || n.State != yidu.StateSent {
		t.Fatalf("notice = %v, %v; want sent", n.State, err)
	}
}

// TestApprovalOfStandingRule (issue 51): the approver of a standing
// notice sees the rule the approval binds: its joiners' deadline and
// its cycle, in the view's JSON and on the approval page in words.
func TestApprovalOfStandingRule(t *testing.T) {
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps[0].Approval = &yidu.Approval{Over: 2, Approvers: []string{"alice"}}
		db := testenv.MySQL(t)
		s, err := store.New(db, store.Options{Directory: o.Mapper, Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		o.Campaigns = s
		o.Standings = &loops.StandingLoop{DB: db, Now: o.Now}
		rec := audit.NewMySQL(db)
		o.Audit, o.AuditLog = rec, rec
	})
	withAudienceDirectory(t, f)
	code, j := f.api(t, "POST", "/messages", `{"msgid":"rules-1","app":"hr","title":"员工手册","audience":{"departments":[1]},"send":true,
		"standing":{"join_deadline":"14d"}}`)
	if code != http.StatusAccepted || j["approval"] != "pending" {
		t.Fatalf("standing notice needing approval = %d %v; want 202 pending", code, j)
	}
	code, view := f.api(t, "GET", "/messages/rules-1/approval", "")
	if st, _ := view["standing"].(map[string]any); code != 200 || st["join_deadline"] != "14d" {
		t.Fatalf("approval view = %d %v; want its standing rule (14d)", code, view)
	}
	cookie, _ := f.login(t)
	w := f.page(cookie, "/approve/rules-1")
	if body := w.Body.String(); w.Code != 200 || !strings.Contains(body, `id="approval-standing"`) || !strings.Contains(body, "14 天内确认") {
		t.Errorf("the approval page = %d, without the standing rule in words: %.600s", w.Code, body)
	}
	code, _ = f.api(t, "POST", "/messages", `{"msgid":"plain-1","app":"hr","title":"普通通知","audience":{"departments":[1]},"send":true}`)
	if code != http.StatusAccepted {
		t.Fatalf("plain notice = %d; want 202", code)
	}
	if w := f.page(cookie, "/approve/plain-1"); strings.Contains(w.Body.String(), `id="approval-standing"`) {
		t.Error("an ordinary notice's approval page shows a standing rule")
	}
}
