package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu/internal/testenv"
)

// wecomPhoneUA is WeCom's in-app browser on a phone: the dashboard and
// the reading page send it through WeCom's OAuth2 (access.InWeCom).
const wecomPhoneUA = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 wxwork/4.1.20 MicroMessenger/7.0.1 Language/zh"

// persona is one person's browser: its own chromium (cookies), size,
// language and user agent, with the test's helpers.
type persona struct {
	t    *testing.T
	name string
	tab  context.Context
	stop func()
	dir  string
}

func newPersona(t *testing.T, ctx context.Context, chromium, name, lang, ua string, w, h int) *persona {
	t.Helper()
	tab, stop := startChromium(t, ctx, chromium)
	p := &persona{t: t, name: name, tab: tab, stop: stop, dir: artifacts(t)}
	al := "zh-CN,zh;q=0.9"
	if lang == "en" {
		al = "en-US,en;q=0.9"
	}
	setup := []chromedp.Action[chromedp.Void]{
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Shanghai"})
			return err
		}),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": al}})
			return err
		}),
	}
	if ua != "" {
		setup = append(setup, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: al})
			return err
		}))
	}
	if w < 600 {
		setup = append(setup, chromedp.EmulateViewport(int64(w), int64(h), chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	} else {
		setup = append(setup, chromedp.EmulateViewport(int64(w), int64(h)))
	}
	p.run("set up", setup...)
	return p
}

func artifacts(t *testing.T) string {
	dir := os.Getenv("YIDU_ARTIFACTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (p *persona) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.tab, actions...); err != nil {
		p.t.Fatalf("%s: %s: %v", p.name, what, err)
	}
}

// pdfsDrawn waits until the page's PDFs are drawn (or failed): pdf.js
// adds their pages after the page loads, which moves what is below them,
// so a click aimed before that can land where a link no longer is.
func (p *persona) pdfsDrawn() {
	p.t.Helper()
	if !p.poll(`[...document.querySelectorAll(".pdf-pages[data-src]")].every((b) => b.dataset.pages || b.dataset.error)`, 15*time.Second) {
		p.t.Fatalf("%s: the page's PDFs were not drawn in 15 s", p.name)
	}
}

func (p *persona) poll(cond string, d time.Duration) bool {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		_, err := chromedp.Run(p.tab, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		switch {
		case err == nil:
			return true
		case errors.Is(err, chromedp.ErrPollingTimeout):
			return false
		case time.Now().After(deadline):
			p.t.Fatalf("%s: poll %s: %v", p.name, cond, err)
		}
		// The page navigated while polling (a redirect after a save):
		// poll the new one.
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *persona) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.tab, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("%s: evaluate %s: %v", p.name, expr, err)
	}
	return v
}

func (p *persona) evalAsync(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.tab, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		p.t.Fatalf("%s: evaluate %s: %v", p.name, expr, err)
	}
	return v
}

func (p *persona) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.tab, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(p.dir, "issue49-"+name+".png"), png, 0o644)
	}
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
}

// sideways is "" when the page does not scroll sideways, else by how much.
func (p *persona) sideways() string {
	return p.eval(`document.documentElement.scrollWidth <= innerWidth ? "" : document.documentElement.scrollWidth + " > " + innerWidth`)
}

// signInWithWeCom opens target, which sends a browser without a session
// to WeCom's sign-in (the fake's member list), and picks userID there.
func (p *persona) signInWithWeCom(target, fakeHost, userID string) {
	p.t.Helper()
	p.run("open "+target, chromedp.Navigate(target))
	here := p.eval(`location.href`)
	u, err := url.Parse(here)
	if err != nil || u.Host != fakeHost {
		p.t.Fatalf("%s: %s ended at %s; want WeCom's sign-in at %s", p.name, target, here, fakeHost)
	}
	q := u.Query()
	q.Set("as", userID)
	u.RawQuery = q.Encode()
	p.run("sign in as "+userID, chromedp.Navigate(u.String()))
}

// TestIssue49Browser walks issue 49 on the embedded demo (the README's
// `go run ./cmd/yidu-demo`, 200 employees): HR (password, 1280 px, Chinese
// then English), the approver (WeCom sign-in on a phone, 390 px, from the
// approval card's links, Chinese and English), a department leader
// (WeCom, 1280 px, their subtree only, Chinese and English) and employees
// (the reading page and 我的记录 in WeCom on a phone; Chinese only, so an
// English phone gets them whole in Chinese). Each finding has an
// assertion; the screenshots go to $YIDU_ARTIFACTS as issue49-*.png.
func TestIssue49Browser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if testenv.Real() {
			t.Fatalf("chromium unavailable with YIDU_TEST_REAL=1: %v", err)
		}
		t.Skipf("chromium unavailable: %v", err)
	}
	out := &testenv.SyncBuffer{}
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(string) string { return "" }
	m.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m.EvidenceDir = t.TempDir()
	if err := m.ParseFlags([]string{"-employees", "200", "-speed", "50", "-exit-when-done", "-timeout", "60s", "-listen-dashboard", "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out)
		}
	})
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The demo's round: the hosted notice (read_rule acknowledged) read
	// and acknowledged by 4, opened by 1, reminded, its evidence taken;
	// the notice to 全员 approved and sent.
	if err := m.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	base := strings.TrimSuffix(m.DashboardURL, "/")
	reader := "http://" + m.App.ReceiverAddr
	fake := m.fakeSrv.Addr
	hosted := m.Round.MsgID
	approverName := m.company.Users[len(m.company.Users)-1].Name

	// ---- HR, Chinese, 1280 px.
	hr := newPersona(t, ctx, chromium, "HR", "zh", "", 1280, 900)
	defer hr.stop()
	hr.run("sign in", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), m.User), chromedp.SendKeys(chromedp.ID("password"), m.Password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	// Finding 10: the demo's status line speaks the page's language.
	if st := hr.eval(`document.getElementById("status-line")?.textContent || ""`); st != "" && !strings.Contains(st, "演示") {
		t.Errorf("finding 10: the demo's status line on a Chinese page is %q", st)
	}

	// Finding 2: a notice to 全员 needs approval; the dialog says so and
	// by whom; sending it is not 保存失败（HTTP 202）.
	hr.run("compose", chromedp.Navigate(base+"/new"), chromedp.WaitVisible(chromedp.ID("compose")))
	hr.poll(`document.getElementById("app").options.length > 0`, 10*time.Second)
	hr.run("fill", chromedp.SendKeys(chromedp.ID("title"), "年会安排通知"), chromedp.SendKeys(chromedp.ID("body"), "请各部门于周五前报名。"),
		chromedp.Click(chromedp.ID("all")))
	if !hr.poll(`/\d/.test(document.getElementById("recipient-count").textContent) && document.getElementById("count-state").textContent === ""`, 20*time.Second) {
		t.Fatalf("compose: no recipient count: %q", hr.eval(`document.getElementById("count-state").textContent`))
	}
	hr.run("send", chromedp.Click(chromedp.ID("submit")))
	if !hr.poll(`!document.getElementById("confirm").hidden && !document.getElementById("confirm-approval").hidden`, 10*time.Second) {
		t.Errorf("finding 2: the confirm dialog does not say approval is needed: %q", hr.eval(`document.getElementById("confirm").innerText`))
	}
	if got := hr.eval(`document.getElementById("confirm-approval").textContent`); !strings.Contains(got, "需要审批") || !strings.Contains(got, approverName) {
		t.Errorf("finding 2: confirm dialog says %q; want 需要审批：将由 %s 审批", got, approverName)
	}
	hr.shot("hr-compose-confirm-zh-1280")
	hr.run("submit for approval", chromedp.Click(chromedp.ID("confirm-ok")))
	if !hr.poll(`location.pathname.startsWith("/approve/") && document.getElementById("approval") !== null`, 20*time.Second) {
		t.Fatalf("finding 2: after sending, the page is %s with %q; want the approval page (not 保存失败（HTTP 202）)",
			hr.eval(`location.href`), hr.eval(`(document.getElementById("form-error")?.textContent || "") + (document.getElementById("save-status")?.textContent || "")`))
	}
	held := strings.TrimPrefix(hr.eval(`location.pathname`), "/approve/")
	if got := hr.eval(`document.getElementById("approval-approvers")?.textContent || ""`); !strings.Contains(got, approverName) {
		t.Errorf("finding 2: the approval page names approvers %q; want %s", got, approverName)
	}
	if hr.eval(`String(document.getElementById("nudge") !== null && document.getElementById("withdraw") !== null)`) != "true" {
		t.Error("finding 2: the author's approval page has no 催办/撤回申请")
	}
	hr.shot("hr-approval-author-zh-1280")
	hr.run("list", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("messages")))
	row := fmt.Sprintf(`document.querySelector('#pending li[data-msgid="%s"]')`, held)
	if got := hr.eval(row + `?.innerText || ""`); !strings.Contains(got, "待审批") || !strings.Contains(got, "催办") || !strings.Contains(got, "撤回申请") || strings.Contains(got, "草稿") {
		t.Errorf("finding 2: the list shows the held notice as %q; want 待审批 with 催办 and 撤回申请, not 草稿", got)
	}
	if got := hr.eval(row + `?.querySelector("a.title")?.getAttribute("href") || ""`); got != "/approve/"+held {
		t.Errorf("finding 2: the held notice opens %q; want its approval page, not 编辑草稿", got)
	}
	hr.shot("hr-list-zh-1280")

	// Findings 5, 8, 9, 10 on the hosted notice's page.
	hr.run("the hosted notice", chromedp.Navigate(base+"/m/"+hosted), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	hr.poll(`document.querySelectorAll("#curve polyline.line").length > 0`, 10*time.Second)
	if got := hr.eval(`document.getElementById("by-signal").innerText`); !strings.Contains(got, "已点击「我已阅读」") || !strings.Contains(got, "已确认知悉") {
		t.Errorf("finding 5: signals read %q; want 已点击「我已阅读」 and 已确认知悉 (one glossary)", got)
	}
	// Finding 9: time only moves forward along the chart.
	if got := hr.eval(`(() => { const p = (document.querySelector("#curve polyline.line")?.getAttribute("points") || "").trim().split(/\s+/).map((s) => +s.split(",")[0]); for (let i = 1; i < p.length; i++) if (p[i] < p[i-1] - 0.05) return "x " + p[i] + " after " + p[i-1]; return ""; })()`); got != "" {
		t.Errorf("finding 9: the read curve runs backwards: %s", got)
	}
	if got := hr.eval(`document.getElementById("export-all").href`); !strings.Contains(got, "labels=zh-CN") {
		t.Errorf("finding 10: the Chinese page's export is %q; want labels=zh-CN", got)
	}
	if got := hr.eval(`document.getElementById("send-batches")?.tHead.innerText || ""`); strings.Contains(got, "errcode") {
		t.Errorf("finding 10: send batches header %q", got)
	}
	// Finding 8: the reminder history, with what each achieved (the
	// demo reminded the 2 unacknowledged before taking evidence).
	if !hr.poll(`!document.getElementById("reminders").hidden && document.querySelectorAll("#reminder-rows tbody tr").length === 1`, 10*time.Second) {
		t.Errorf("finding 8: no reminder history on the page: %q", hr.eval(`document.getElementById("reminders")?.innerText || "none"`))
	} else if got := hr.eval(`[...document.querySelectorAll("#reminder-rows tbody tr td")].map((e) => e.textContent).join("|")`); !strings.Contains(got, "|"+strconv.Itoa(m.Round.Reminded)+"|") {
		t.Errorf("finding 8: reminder history row %q; want %d people reminded", got, m.Round.Reminded)
	}
	// Finding 8: remind asks with the exact number.
	unread := hr.eval(`document.getElementById("unread-count").textContent.trim()`)
	hr.eval(`(() => { window.__asked = ""; window.confirm = (m) => { window.__asked = m; return false; }; return ""; })()`)
	hr.run("remind (declined)", chromedp.Click(chromedp.ID("remind")))
	hr.poll(`window.__asked !== ""`, 5*time.Second) // asked after the page fetched the numbers again
	if got := hr.eval(`window.__asked`); unread == "" || !strings.Contains(got, unread) {
		t.Errorf("finding 8: remind asks %q; want the number of unread people (%s)", got, unread)
	}
	// Finding 6: remind by state, each choice with its number, the
	// question naming the chosen state's.
	if got := hr.eval(`[...(document.getElementById("remind-state")?.options || [])].map((o) => o.textContent).join("|")`); !strings.Contains(got, "提醒已打开未读完的 1 人") ||
		!strings.Contains(got, fmt.Sprintf("提醒未打开的 %d 人", len(m.Round.Members)-roundAcks-1)) || !strings.Contains(got, "全部未读") {
		t.Errorf("finding 6: the remind choice reads %q; want 提醒已打开未读完的 1 人, 提醒未打开的 N 人, 全部未读", got)
	}
	hr.eval(`(() => { window.__asked = ""; const s = document.getElementById("remind-state"); s.value = "opened"; return s.value; })()`)
	hr.run("remind the opened (declined)", chromedp.Click(chromedp.ID("remind")))
	hr.poll(`window.__asked !== ""`, 5*time.Second)
	if got := hr.eval(`window.__asked`); !strings.Contains(got, "已打开未读完的 1 人") {
		t.Errorf("finding 6: remind of the opened asks %q; want 确定提醒已打开未读完的 1 人？", got)
	}
	hr.eval(`(() => { const s = document.getElementById("remind-state"); s.value = ""; return s.value; })()`)
	// Finding 6: the people filter and the CSV go by the page's states.
	for _, tc := range []struct {
		state string
		want  []string
	}{
		{"opened", []string{m.Round.Members[roundAcks]}},
		{"unopened", m.Round.Members[roundAcks+1:]},
		{"acknowledged", m.Round.Members[:roundAcks]},
	} {
		hr.eval(fmt.Sprintf(`(() => { const s = document.getElementById("state"); s.value = %q; s.dispatchEvent(new Event("change")); return s.value; })()`, tc.state))
		cond := fmt.Sprintf(`document.querySelectorAll("#recipients tbody tr").length === %d && [...document.querySelectorAll("#recipients tbody tr td:first-child")].map((e) => e.textContent).join(",") === %q`, len(tc.want), strings.Join(tc.want, ","))
		if !hr.poll(cond, 10*time.Second) {
			t.Errorf("finding 6: people filter %s shows %q; want %v", tc.state, hr.eval(`[...document.querySelectorAll("#recipients tbody tr")].map((e) => e.innerText).join(" | ")`), tc.want)
		}
	}
	hr.shot("hr-people-acknowledged-zh-1280")
	csv := hr.evalAsync(`fetch(document.getElementById("export-all").href).then((r) => r.text())`)
	for _, want := range []string{"账号,姓名,部门,状态", "已确认知悉", "已打开未读完", "未打开"} {
		if !strings.Contains(csv, want) {
			t.Errorf("finding 6/10: the page's CSV lacks %q:\n%.600s", want, csv)
		}
	}
	hr.shot("hr-message-zh-1280")

	// Finding 10: the audit log speaks Chinese and fits 1280 px; the
	// evidence downloads say what happened.
	hr.run("audit", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.ID("audit-events")))
	if got := hr.eval(`document.getElementById("audit-events").innerText`); strings.Contains(got, "audit.action.") || strings.Contains(got, "format=") {
		t.Errorf("finding 10: the audit log shows raw keys or English details: %.300q", got)
	}
	if got := hr.sideways(); got != "" {
		t.Errorf("finding 10: the audit log is wider than 1280 px: %s", got)
	}
	if got := hr.eval(`[...document.querySelectorAll('#audit-events tr[data-action="evidence"] td:last-child')].map((e) => e.textContent).join(",")`); !strings.Contains(got, "已开始") {
		t.Errorf("finding 1: evidence downloads' outcomes %q; want the streamed ones started then 成功", got)
	}
	hr.shot("hr-audit-zh-1280")

	// Finding 11: a template loaded stays named in the picker, and can be
	// renamed and deleted from the page.
	tid := hr.evalAsync(`fetch("/api/v1/templates", { method: "POST", headers: { "Content-Type": "application/json", "X-CSRF-Token": document.querySelector('meta[name="csrf-token"]').content },
		body: JSON.stringify({ app: "hr", name: "季度通知模板", title: "季度总结", body: "请查收" }) }).then((r) => r.json()).then((j) => String(j.id || JSON.stringify(j)))`)
	hr.run("from the template", chromedp.Navigate(base+"/new?template="+url.QueryEscape(tid)), chromedp.WaitVisible(chromedp.ID("compose")))
	if !hr.poll(`document.getElementById("template-pick").selectedOptions[0]?.textContent === "季度通知模板" && !document.getElementById("rename-template").hidden`, 10*time.Second) {
		t.Errorf("finding 11: after loading a template the picker says %q", hr.eval(`document.getElementById("template-pick").selectedOptions[0]?.textContent || ""`))
	}
	hr.eval(`(() => { window.prompt = () => "季度总结模板"; return ""; })()`)
	hr.run("rename the template", chromedp.Click(chromedp.ID("rename-template")))
	if !hr.poll(`[...document.getElementById("template-pick").options].some((o) => o.textContent === "季度总结模板")`, 10*time.Second) {
		t.Errorf("finding 11: rename left %q (%s)", hr.eval(`[...document.getElementById("template-pick").options].map((o) => o.textContent).join(",")`), hr.eval(`document.getElementById("template-status").textContent`))
	}
	hr.shot("hr-template-zh-1280")
	hr.eval(`(() => { window.confirm = () => true; return ""; })()`)
	hr.run("delete the template", chromedp.Click(chromedp.ID("delete-template")))
	if !hr.poll(`location.search === "" && document.getElementById("template-pick").options.length >= 1 && ![...document.getElementById("template-pick").options].some((o) => o.textContent === "季度总结模板")`, 10*time.Second) {
		t.Errorf("finding 11: the deleted template is still offered: %q", hr.eval(`[...document.getElementById("template-pick").options].map((o) => o.textContent).join(",")`))
	}

	// ---- The approver: WeCom on a phone, from the card's link.
	ap := newPersona(t, ctx, chromium, "approver", "zh", wecomPhoneUA, 390, 844)
	defer ap.stop()
	cardBody, cardReject := cardLinks(t, m, held)
	if !strings.HasSuffix(cardBody, "/approve/"+held) || cardReject != cardBody {
		t.Errorf("finding 3: the approval card opens %q, its 驳回 %q; want both the approval page of %s", cardBody, cardReject, held)
	}
	ap.signInWithWeCom(cardReject, fake, m.Approver)
	if !ap.poll(`document.getElementById("approval") !== null`, 10*time.Second) {
		t.Fatalf("finding 3: the approver signed in with WeCom sees %q at %s; want the approval page",
			ap.eval(`document.body.innerText.slice(0, 200)`), ap.eval(`location.href`))
	}
	if got := ap.eval(`document.getElementById("approval").innerText`); !strings.Contains(got, "年会安排通知") || !strings.Contains(got, "接收人") || !strings.Contains(got, "驳回（填写理由）") || !strings.Contains(got, "批准") {
		t.Errorf("finding 3: the approver's page reads %.400q; want the notice, the recipients, 批准 and 驳回（填写理由）", got)
	}
	if got := ap.eval(`document.querySelector("#approval-card .card-body")?.textContent || ""`); !strings.Contains(got, "请各部门于周五前报名。") {
		t.Errorf("finding 3: the approver's page shows the body %q; want the notice's text, not only its title", got)
	}
	if got := ap.sideways(); got != "" {
		t.Errorf("finding 3: the approval page scrolls sideways at 390 px: %s", got)
	}
	ap.shot("approver-zh-390")
	walkApproverEnglish(t, ctx, chromium, m, cardBody, "请各部门于周五前报名。")
	ap.run("reject with a reason", chromedp.SendKeys(chromedp.ID("reject-reason"), "时间写错了，请改为周四"), chromedp.Click(chromedp.ID("reject")))
	if !ap.poll(`document.getElementById("approval")?.dataset.state === "rejected"`, 10*time.Second) {
		t.Errorf("finding 3: 驳回 with a reason left the page %q", ap.eval(`document.getElementById("approval-error")?.textContent || location.href`))
	}
	ap.shot("approver-rejected-zh-390")
	ap.stop()

	// ---- A department leader, WeCom sign-in at a desk: their subtree only.
	byLeader := walkLeader(t, ctx, chromium, m, "zh")
	walkLeader(t, ctx, chromium, m, "en")
	// Finding 8: HR reminds everyone next; the leader's reminded are not
	// reminded twice, and the page says so.
	checkRemindNotAgain(t, hr, m, byLeader)

	// ---- Employees in WeCom on a phone: the reading page, 我的记录.
	em := newPersona(t, ctx, chromium, "employee", "zh", wecomPhoneUA, 390, 844)
	defer em.stop()
	acked := m.Round.Members[0]
	em.signInWithWeCom(reader+"/r/"+demoApp+"/"+url.PathEscape(hosted), fake, acked)
	if !em.poll(`document.getElementById("ack-box") !== null`, 15*time.Second) {
		t.Fatalf("employee: no reading page at %s", em.eval(`location.href`))
	}
	// Finding 11: after acknowledging, a clear confirmation; finding 4: a
	// way to 我的记录.
	if got := em.eval(`(() => { const d = document.getElementById("ack-done"); return d && !d.hidden ? d.textContent : ""; })()`); !strings.Contains(got, "已确认知悉") {
		t.Errorf("finding 11: an acknowledged reader sees %q; want a clear 已确认知悉 confirmation", got)
	}
	if em.eval(`String(document.getElementById("my-records") !== null)`) != "true" {
		t.Error("finding 4: the reading page does not link to 我的记录")
	}
	em.poll(`document.querySelectorAll(".pdf-pages canvas").length > 0`, 15*time.Second)
	if em.eval(`String(document.querySelector(".pdf-zoom") !== null)`) != "true" {
		t.Error("finding 11: at 390 px the PDF has no way to be read larger")
	} else {
		checkPDFZoom(t, em)
	}
	if got := em.sideways(); got != "" {
		t.Errorf("employee: the reading page scrolls sideways at 390 px: %s", got)
	}
	em.shot("employee-reading-zh-390")
	em.pdfsDrawn()
	em.run("我的记录", chromedp.Click(chromedp.ID("my-records")))
	if !em.poll(`document.getElementById("records") !== null`, 10*time.Second) {
		t.Fatalf("finding 4: 我的记录 did not open: %q", em.eval(`document.body.innerText.slice(0, 200)`))
	}
	stateCell := fmt.Sprintf(`[...document.querySelectorAll("#records tbody tr")].find((r) => r.innerText.includes(%q))?.querySelector("td.state")?.textContent || ""`, roundTitle)
	if got := em.eval(stateCell); got != "已确认知悉" {
		t.Errorf("finding 4: 我的记录 says %q of a notice read to the end and acknowledged; want 已确认知悉", got)
	}
	// No header or cell wraps one character a line: every visible cell is
	// wider than 6 characters at 390 px.
	if got := em.eval(`[...document.querySelectorAll("#records th, #records td")].filter((c) => c.offsetParent !== null && c.getBoundingClientRect().width < 6 * parseFloat(getComputedStyle(c).fontSize)).map((c) => c.textContent.slice(0, 12) + " " + Math.round(c.getBoundingClientRect().width) + "px").join(" | ")`); got != "" {
		t.Errorf("finding 4: cells of 我的记录 too narrow at 390 px (a character a line): %s", got)
	}
	if got := em.sideways(); got != "" {
		t.Errorf("finding 4: 我的记录 scrolls sideways at 390 px: %s", got)
	}
	em.shot("employee-records-zh-390")
	walkEmployeeEnglish(t, ctx, chromium, m, reader+"/r/"+demoApp+"/"+url.PathEscape(hosted))

	// Finding 7: HR publishes version 2 from the message page, asking
	// everyone again; the page explains the drop and counts per version;
	// the reader is told the notice was updated.
	hr.run("the hosted notice again", chromedp.Navigate(base+"/m/"+hosted), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	if !hr.poll(`document.getElementById("revise-open") !== null && !document.getElementById("fulltext-card").hidden`, 10*time.Second) {
		t.Fatal("finding 7: the message page offers no way to publish a new version")
	}
	if got := hr.eval(`document.getElementById("by-version").innerText`); !strings.Contains(got, "第 1 版") {
		t.Errorf("finding 6: per-version counts on the page read %q; want a row for 第 1 版", got)
	}
	hr.eval(`(() => { window.confirm = () => true; return ""; })()`)
	hr.run("publish version 2", chromedp.Click(chromedp.ID("revise-open")), chromedp.WaitVisible(chromedp.ID("revise-markdown")),
		chromedp.SendKeys(chromedp.ID("revise-markdown"), "\n\n## 第三条 补充\n\n核心时间调整为10:30至16:00。\n"),
		chromedp.SendKeys(chromedp.ID("revise-change-note"), "新增第三条：核心时间调整为10:30至16:00"),
		chromedp.Click(chromedp.ID("revise-submit")))
	if !hr.poll(`document.getElementById("version-pick")?.options.length === 2 && !document.getElementById("reack-note").hidden`, 15*time.Second) {
		t.Errorf("finding 7: after publishing, versions %q, note %q; error %q", hr.eval(`String(document.getElementById("version-pick")?.options.length)`),
			hr.eval(`document.getElementById("reack-note").textContent`), hr.eval(`document.getElementById("revise-error")?.textContent || ""`))
	}
	if got := hr.eval(`document.getElementById("reack-note").textContent`); !strings.Contains(got, "第 2 版") || !strings.Contains(got, "下降") {
		t.Errorf("finding 7: HR's note on the read count %q; want why it drops", got)
	}
	// Finding 6: the top counters say which version they count.
	if !hr.poll(`!document.getElementById("counter-version").hidden`, 10*time.Second) {
		t.Errorf("finding 6: the top counters do not say which version they count")
	} else if got := hr.eval(`document.getElementById("counter-version").textContent`); !strings.Contains(got, "当前版本 第 2 版") {
		t.Errorf("finding 6: the top counters say %q; want 当前版本 第 2 版", got)
	}
	hr.shot("hr-version2-zh-1280")
	em.run("the reading page again", chromedp.Navigate(reader+"/r/"+demoApp+"/"+url.PathEscape(hosted)))
	if !em.poll(`document.getElementById("updated") !== null`, 10*time.Second) {
		t.Errorf("finding 7: the reader of version 2 sees %q; want 通知已更新（第 2 版），请重新阅读并确认", em.eval(`document.querySelector("main")?.innerText.slice(0, 200) || ""`))
	} else if got := em.eval(`document.getElementById("updated").textContent`); !strings.Contains(got, "通知已更新（第 2 版），请重新阅读并确认") {
		t.Errorf("finding 7: update notice %q", got)
	}
	if got := em.eval(`document.getElementById("change-note")?.textContent || ""`); got != "修改说明：新增第三条：核心时间调整为10:30至16:00" {
		t.Errorf("finding 7: the reader of version 2 sees the change note %q; want HR's 修改说明", got)
	}
	em.shot("employee-version2-zh-390")
	em.stop()

	// Finding 1: the reminded member's own PDF opens on the embedded demo.
	rem := newPersona(t, ctx, chromium, "reminded employee", "zh", wecomPhoneUA, 390, 844)
	defer rem.stop()
	reminded := m.Round.Members[roundAcks]
	rem.signInWithWeCom(reader+"/r/"+demoApp+"/records/"+url.PathEscape(reminded), fake, reminded)
	if !rem.poll(`document.getElementById("records") !== null`, 10*time.Second) {
		t.Fatalf("finding 1: 我的记录 of a reminded member: %q", rem.eval(`document.body.innerText.slice(0, 200)`))
	}
	pdf := rem.evalAsync(fmt.Sprintf(`(async () => { const a = [...document.querySelectorAll("#records a")].find((a) => a.href.includes(%q)); if (!a) return "no link"; const r = await fetch(a.href); const b = new Uint8Array(await r.arrayBuffer()); return r.status + " " + String.fromCharCode(...b.slice(0, 5)); })()`, url.PathEscape(hosted)))
	if pdf != "200 %PDF-" {
		t.Errorf("finding 1: the reminded member's own PDF answered %q; want 200 %%PDF-", pdf)
	}
	if got := rem.eval(stateCell); got != "已打开" {
		t.Errorf("finding 4: 我的记录 of a member who only opened it says %q; want 已打开", got)
	}
	rem.shot("reminded-records-zh-390")
	rem.stop()

	// ---- HR in English, 1280 and 390 px: one language a page.
	en := newPersona(t, ctx, chromium, "HR (en)", "en", "", 1280, 900)
	defer en.stop()
	en.run("sign in", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), m.User), chromedp.SendKeys(chromedp.ID("password"), m.Password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	if st := en.eval(`document.getElementById("status-line")?.textContent || ""`); strings.Contains(st, "演示") {
		t.Errorf("finding 10: the demo's status line on an English page is %q", st)
	}
	en.run("the hosted notice", chromedp.Navigate(base+"/m/"+hosted), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	en.poll(`document.querySelectorAll("#curve polyline.line").length > 0`, 10*time.Second)
	if got := en.eval(`document.getElementById("by-signal").innerText`); !strings.Contains(got, "Acknowledged") || strings.Contains(got, "已") {
		t.Errorf("English signals %q", got)
	}
	if got := en.eval(`document.getElementById("export-all").href`); strings.Contains(got, "labels=zh-CN") {
		t.Errorf("the English page's export asks for Chinese labels: %s", got)
	}
	en.shot("hr-message-en-1280")
	en.run("audit", chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(chromedp.ID("audit-events")))
	if got := en.eval(`document.getElementById("audit-events").tHead.innerText + [...document.querySelectorAll("#audit-events td:nth-child(4)")].map((e) => e.firstChild?.textContent || "").join(" ")`); strings.Contains(got, "audit.action.") {
		t.Errorf("English audit log shows raw keys: %.300q", got)
	}
	en.shot("hr-audit-en-1280")
	en.run("phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
		chromedp.Navigate(base+"/approve/"+held), chromedp.WaitVisible(chromedp.ID("approval")))
	if got := en.sideways(); got != "" {
		t.Errorf("English approval page at 390 px scrolls sideways: %s", got)
	}
	en.shot("hr-approval-en-390")
	en.run("the hosted notice at 390", chromedp.Navigate(base+"/m/"+hosted), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	en.poll(`document.querySelectorAll("#recipients tbody tr").length > 0`, 10*time.Second)
	if got := en.sideways(); got != "" {
		t.Errorf("English message page at 390 px scrolls sideways: %s", got)
	}
	checkWholeWords(t, en)
	en.shot("hr-message-en-390")
}
