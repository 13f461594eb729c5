package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu"
)

// The personas of TestIssue49Browser beyond HR's Chinese walk: the
// approver from the card's link, the leader's scope, the English passes.

// wecomPhoneUAEn is WeCom's in-app browser set to English.
var wecomPhoneUAEn = strings.Replace(wecomPhoneUA, "Language/zh", "Language/en", 1)

// cardLinks returns where the approval card of msgID, as the fake WeCom
// received it for the approver, opens: its body (card_action) and its
// 驳回 button.
func cardLinks(t *testing.T, m *Main, msgID string) (body, reject string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, s := range m.Fake.Sent() {
			var b struct {
				ToUser       string `json:"touser"`
				TemplateCard struct {
					TaskID     string `json:"task_id"`
					CardAction struct {
						URL string `json:"url"`
					} `json:"card_action"`
					ButtonList []struct {
						Text string `json:"text"`
						URL  string `json:"url"`
					} `json:"button_list"`
				} `json:"template_card"`
			}
			if json.Unmarshal(s.Raw, &b) != nil {
				continue
			}
			id, _, ok := yidu.ParseApprovalTaskID(b.TemplateCard.TaskID)
			if !ok || string(id) != msgID || !slices.Contains(strings.Split(b.ToUser, "|"), m.Approver) {
				continue
			}
			for _, bt := range b.TemplateCard.ButtonList {
				if bt.Text == "驳回" {
					reject = bt.URL
				}
			}
			return b.TemplateCard.CardAction.URL, reject
		}
		if time.Now().After(deadline) {
			t.Fatalf("finding 3: no approval card of %s reached %s through the fake WeCom", msgID, m.Approver)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// enCatalogue is the dashboard's English catalogue.
func enCatalogue(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../dashboard/web/i18n/en.json")
	if err != nil {
		t.Fatal(err)
	}
	cat := map[string]string{}
	if err := json.Unmarshal(raw, &cat); err != nil {
		t.Fatalf("en.json: %v", err)
	}
	return cat
}

var han = regexp.MustCompile(`\p{Han}+`)

// notEnglish says what in text is not English UI: Chinese words, or a
// catalogue key shown raw; "" when nothing is.
func notEnglish(text string, cat map[string]string) string {
	var bad []string
	bad = append(bad, han.FindAllString(text, 5)...)
	for k := range cat {
		if strings.Contains(text, k) {
			bad = append(bad, k)
		}
	}
	return strings.Join(bad, ", ")
}

// uiText is the text of the elements sel matches with what members or
// HR wrote (the user content that skip matches) left out.
func (p *persona) uiText(sel, skip string) string {
	p.t.Helper()
	return p.eval(fmt.Sprintf(`[...document.querySelectorAll(%[1]q)].filter((e) => !e.matches(%[2]q)).map((e) => { const c = e.cloneNode(true); for (const u of c.querySelectorAll(%[2]q)) u.remove(); return c.textContent; }).join(" | ")`, sel, skip))
}

// walkApproverEnglish opens the approval card's body link in WeCom on a
// phone set to English: the approval page speaks English around the
// notice's own (Chinese) words.
func walkApproverEnglish(t *testing.T, ctx context.Context, chromium string, m *Main, link, body string) {
	cat := enCatalogue(t)
	ap := newPersona(t, ctx, chromium, "approver (en)", "en", wecomPhoneUAEn, 390, 844)
	defer ap.stop()
	ap.signInWithWeCom(link, m.fakeSrv.Addr, m.Approver)
	if !ap.poll(`document.getElementById("approval") !== null`, 10*time.Second) {
		t.Fatalf("finding 3 (en): the approver sees %q at %s", ap.eval(`document.body.innerText.slice(0, 200)`), ap.eval(`location.href`))
	}
	for id, key := range map[string]string{"approve": "approval.approve", "reject": "approval.reject_with_reason", "preview-to-me": "approval.preview_to_me"} {
		if got := ap.eval(fmt.Sprintf(`document.getElementById(%q)?.textContent || ""`, id)); got != cat[key] {
			t.Errorf("English approver's #%s reads %q; want %q", id, got, cat[key])
		}
	}
	if got := ap.eval(`document.querySelector("#approval h1").textContent`); !strings.Contains(got, cat["approval.heading"]) || !strings.Contains(got, cat["approval.pending"]) {
		t.Errorf("English approver's heading %q; want %q, %q", got, cat["approval.heading"], cat["approval.pending"])
	}
	if got := ap.eval(`document.querySelector("#approval-card .card-body")?.textContent || ""`); !strings.Contains(got, body) {
		t.Errorf("finding 3 (en): the approver's page shows the body %q; want the notice's %q", got, body)
	}
	ui := ap.uiText("#approval h1, #approval h2, #approval p, #approval label, #approval button, #approval-trail li",
		".card-title, .card-body, #approval-content, strong, .name, code, time")
	if bad := notEnglish(ui, cat); bad != "" {
		t.Errorf("English approval page shows %s: %.400q", bad, ui)
	}
	if got := ap.sideways(); got != "" {
		t.Errorf("English approval page at 390 px scrolls sideways: %s", got)
	}
	ap.shot("approver-en-390")
}

// leaderScope is the leader's department's subtree (m.LeaderDept, "name
// (id)"): its departments' ids and its members' UserIDs.
func leaderScope(t *testing.T, m *Main) (depts, users map[string]bool) {
	t.Helper()
	i := strings.LastIndex(m.LeaderDept, "(")
	root, err := strconv.Atoi(strings.TrimSuffix(m.LeaderDept[i+1:], ")"))
	if i < 0 || err != nil {
		t.Fatalf("leader's department %q", m.LeaderDept)
	}
	in := map[int]bool{root: true}
	for grew := true; grew; {
		grew = false
		for _, d := range m.company.Departments {
			if !in[d.ID] && in[d.ParentID] {
				in[d.ID], grew = true, true
			}
		}
	}
	depts, users = map[string]bool{}, map[string]bool{}
	for id := range in {
		depts[strconv.Itoa(id)] = true
	}
	for _, u := range m.company.Users {
		if slices.ContainsFunc(u.Departments, func(d int) bool { return in[d] }) {
			users[u.UserID] = true
		}
	}
	if len(users) == 0 || len(users) == len(m.company.Users) || len(depts) == len(m.company.Departments) {
		t.Fatalf("the leader's subtree (%d departments, %d people) does not tell scope from the whole company", len(depts), len(users))
	}
	return depts, users
}

// outside returns those of the comma-separated list that in lacks.
func outside(list string, in map[string]bool) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}

// walkLeader signs in as the department leader with WeCom at a desk and
// opens the notice to everyone: the counts, departments and people are
// their subtree's only; in English the page's words are English. In
// Chinese they then remind their unread, and say how many.
func walkLeader(t *testing.T, ctx context.Context, chromium string, m *Main, lang string) (reminded int) {
	depts, users := leaderScope(t, m)
	ld := newPersona(t, ctx, chromium, "leader ("+lang+")", lang, "", 1280, 900)
	defer ld.stop()
	base := strings.TrimSuffix(m.DashboardURL, "/")
	ld.signInWithWeCom(base+"/login/wecom?next=/m/"+m.MsgID, m.fakeSrv.Addr, m.Leader)
	if !ld.poll(`document.getElementById("progress-bar") !== null`, 15*time.Second) {
		t.Fatalf("leader (%s): no notice page at %s", lang, ld.eval(`location.href`))
	}
	if got := ld.eval(`document.getElementById("recipient-count").textContent.trim()`); got != strconv.Itoa(len(users)) {
		t.Errorf("leader (%s): the notice's recipients read %s; want the %d of %s's subtree, not the company's %d", lang, got, len(users), m.LeaderDept, len(m.company.Users))
	}
	if !ld.poll(`document.querySelectorAll("#departments a[data-dept]").length > 0`, 10*time.Second) {
		t.Errorf("leader (%s): no departments: %q", lang, ld.eval(`document.getElementById("departments-state").textContent`))
	}
	if out := outside(ld.eval(`[...document.querySelectorAll("#departments a[data-dept]")].map((a) => a.dataset.dept).join(",")`), depts); out != nil {
		t.Errorf("leader (%s): the departments panel shows departments %v, outside %s's subtree", lang, out, m.LeaderDept)
	}
	ld.eval(`(() => { const s = document.getElementById("state"); s.value = "all"; s.dispatchEvent(new Event("change")); return s.value; })()`)
	if !ld.poll(fmt.Sprintf(`document.getElementById("recipient-total").textContent.trim() === %q && document.querySelectorAll("#recipients tbody tr").length > 0`, strconv.Itoa(len(users))), 10*time.Second) {
		t.Errorf("leader (%s): people (all) number %q; want %d", lang, ld.eval(`document.getElementById("recipient-total").textContent`), len(users))
	}
	if out := outside(ld.eval(`[...document.querySelectorAll("#recipients tbody tr td:first-child")].map((e) => e.textContent).join(",")`), users); out != nil {
		t.Errorf("leader (%s): the people panel shows %v, outside %s's subtree", lang, out, m.LeaderDept)
	}
	if lang == "en" {
		cat := enCatalogue(t)
		ui := ld.uiText("h2, th, label, button, option, #by-signal, .counters, .total, #exports", "b, .signal-count")
		if bad := notEnglish(ui, cat); bad != "" {
			t.Errorf("English leader's page shows %s: %.400q", bad, ui)
		}
		if got := ld.eval(`document.documentElement.lang`); got != "en" {
			t.Errorf("English leader's page is <html lang=%q>", got)
		}
	}
	ld.shot("leader-" + lang + "-1280")
	if lang == "zh" {
		reminded = leaderRemind(t, ld)
	}
	return reminded
}

// walkEmployeeEnglish opens the reading page and 我的记录 in WeCom on a
// phone set to English. Both are Chinese only (page/web: no English
// catalogue): the check is that they stay one language a page, with no
// raw keys, and fit 390 px.
func walkEmployeeEnglish(t *testing.T, ctx context.Context, chromium string, m *Main, page string) {
	em := newPersona(t, ctx, chromium, "employee (en)", "en", wecomPhoneUAEn, 390, 844)
	defer em.stop()
	em.signInWithWeCom(page, m.fakeSrv.Addr, m.Round.Members[1])
	if !em.poll(`document.getElementById("ack-box") !== null`, 15*time.Second) {
		t.Fatalf("employee (en): no reading page at %s", em.eval(`location.href`))
	}
	oneLanguage := func(what string) {
		t.Helper()
		if got := em.eval(`document.documentElement.lang`); got != "zh-CN" {
			t.Errorf("employee (en): %s is <html lang=%q>; want zh-CN (no English catalogue)", what, got)
		}
		if got := em.eval(`(document.body.innerText.match(/\b[a-z]+(_[a-z]+)*\.[a-z_]+\b/g) || []).filter((k) => !k.endsWith(".pdf") && !k.endsWith(".png")).join(",")`); got != "" {
			t.Errorf("employee (en): %s shows raw keys %s", what, got)
		}
		if got := em.sideways(); got != "" {
			t.Errorf("employee (en): %s scrolls sideways at 390 px: %s", what, got)
		}
	}
	oneLanguage("the reading page")
	em.shot("employee-reading-en-390")
	em.pdfsDrawn()
	em.run("我的记录", chromedp.Click(chromedp.ID("my-records")))
	if !em.poll(`document.getElementById("records") !== null`, 10*time.Second) {
		t.Fatalf("employee (en): 我的记录 did not open: %q", em.eval(`document.body.innerText.slice(0, 200)`))
	}
	oneLanguage("我的记录")
	em.shot("employee-records-en-390")
}

// checkPDFZoom presses 放大阅读 above the reading page's PDF at 390 px:
// its pages are drawn twice as wide, and 缩小 brings them back.
func checkPDFZoom(t *testing.T, em *persona) {
	width := `String(Math.round(document.querySelector(".pdf-pages canvas").getBoundingClientRect().width))`
	before, _ := strconv.Atoi(em.eval(width))
	if before == 0 {
		t.Errorf("finding 11: the PDF's page is not shown")
		return
	}
	em.run("放大阅读", chromedp.Click(chromedp.CSS(".pdf-zoom")))
	if !em.poll(fmt.Sprintf(`%s >= %d`, width, before*19/10), 5*time.Second) {
		t.Errorf("finding 11: 放大阅读 left the PDF's page %s px wide; want about twice %d px", em.eval(width), before)
	}
	em.shot("employee-reading-zoomed-zh-390")
	em.run("缩小", chromedp.Click(chromedp.CSS(".pdf-zoom")))
	if !em.poll(fmt.Sprintf(`%s === "%d"`, width, before), 5*time.Second) {
		t.Errorf("finding 11: 缩小 left the PDF's page %s px wide; want %d px again", em.eval(width), before)
	}
}

// leaderRemind has the leader remind their people who have not read the
// notice (the page's 提醒未读, confirmed) and returns how many that was.
func leaderRemind(t *testing.T, ld *persona) int {
	unread, err := strconv.Atoi(ld.eval(`document.getElementById("unread-count").textContent.trim()`))
	if err != nil || unread == 0 {
		t.Fatalf("leader: %d of their people unread (%v); the demo's data leaves some", unread, err)
	}
	ld.eval(`(() => { window.confirm = () => true; return ""; })()`)
	ld.run("remind their unread", chromedp.Click(chromedp.ID("remind")))
	if !ld.poll(`/\d/.test(document.getElementById("remind-status").textContent)`, 15*time.Second) {
		t.Fatalf("leader: remind says %q", ld.eval(`document.getElementById("remind-status").textContent`))
	}
	if got, want := ld.eval(`document.getElementById("remind-status").textContent`), fmt.Sprintf("已提醒 %d 人", unread); got != want {
		t.Errorf("leader: remind says %q; want %q", got, want)
	}
	return unread
}

// checkRemindNotAgain has HR remind everyone unread of the notice to the
// company right after the leader reminded theirs: those are left out
// (reminded within the interval), and the page says how many.
func checkRemindNotAgain(t *testing.T, hr *persona, m *Main, byLeader int) {
	hr.run("the notice to everyone", chromedp.Navigate(strings.TrimSuffix(m.DashboardURL, "/")+"/m/"+m.MsgID), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	unread, err := strconv.Atoi(hr.eval(`document.getElementById("unread-count").textContent.trim()`))
	if err != nil || unread <= byLeader {
		t.Fatalf("HR: %d unread (%v) of whom the leader reminded %d; the demo's data leaves others", unread, err, byLeader)
	}
	hr.eval(`(() => { window.confirm = () => true; return ""; })()`)
	hr.run("remind everyone unread", chromedp.Click(chromedp.ID("remind")))
	if !hr.poll(`/\d/.test(document.getElementById("remind-status").textContent)`, 15*time.Second) {
		t.Fatalf("HR: remind says %q", hr.eval(`document.getElementById("remind-status").textContent`))
	}
	got := hr.eval(`document.getElementById("remind-status").textContent`)
	want := fmt.Sprintf("已提醒 %d 人；另 %d 人未再提醒：近期已提醒过、已离职或账号无效", unread-byLeader, byLeader)
	if got != want {
		t.Errorf("finding 8: HR's remind after the leader's says %q; want %q", got, want)
	}
	hr.shot("hr-remind-not-again-zh-1280")
}

// checkWholeWords looks at the message page at 390 px as found by eye:
// the send batches' status ("delivered") was broken inside the word, and
// the export heading's colon stood apart ("Export whole notice :").
func checkWholeWords(t *testing.T, p *persona) {
	broken := p.eval(`[...document.querySelectorAll("#send-batches tbody td:nth-child(2)")].filter((td) => !/\s/.test(td.textContent.trim())).filter((td) => { const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length > 1; }).map((td) => td.textContent).join(",")`)
	if broken != "" {
		t.Errorf("send batches at 390 px break the status %q inside the word", broken)
	}
	gap := p.eval(`(() => { const s = document.getElementById("export-scope"), c = s.nextSibling; if (!c || c.nodeType !== 3) return "no colon after the scope"; const r = document.createRange(); r.selectNodeContents(c); const g = r.getBoundingClientRect().left - s.getBoundingClientRect().right; return g > 2 ? "colon " + Math.round(g) + " px after the scope" : ""; })()`)
	if gap != "" {
		t.Errorf("the export heading at 390 px: %s", gap)
	}
}
