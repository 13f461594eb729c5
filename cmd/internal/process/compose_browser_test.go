package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestBrowserComposeSchedules is issue 29's browser test, against the real
// processes and a fake WeCom: HR signs in and composes a notice to two
// departments, one tag, two people found by search and a pasted UserID
// that does not exist; the preview shows the card; the live count equals
// the recipients of the notice it creates; scheduled 5 s ahead, the notice
// turns 已发送 on the list page.
func TestBrowserComposeSchedules(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	const secret = "compose-app-secret"
	hash, err := bcrypt.GenerateFromPassword([]byte(browserPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp, Apps: []fakewecom.App{{AgentID: testAgent, Secret: secret}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = secret
		c.Dashboard.Users = []config.User{{Name: browserUser, PasswordHash: string(hash), Corps: []string{testCorp}}}
	})
	people := []directoryPerson{
		{"zhangsan", "张三", 2}, {"lisi", "李四", 2}, {"wangwu", "王五", 2},
		{"zhouba", "周八", 3}, {"alice", "Alice Smith", 3}, {"bob", "Bob O'Brien", 3},
		{"carol", "Carol Chen 陈", 5}, {"dave", "Dave Liu", 5}, {"huangli", "黄莉", 5},
		{"frank", "Frank Müller", 4}, {"yangfan", "杨帆", 4}, {"heyu", "何雨", 4},
	}
	userIDs := make([]string, len(people))
	for i, p := range people {
		userIDs[i] = p.userID
	}
	seedMembers(t, m, testCorp, userIDs...)
	seedDirectory(t, m, people)
	tagID := seedComposeTag(t, m, "管理层", []string{"frank", "zhangsan"})

	b := mustStartBrowser(t, 90*time.Second)
	dir := artifactsDir(t)
	home := "http://" + m.DashboardAddr
	b.do(t, "time zone", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "zh_CN"}); err != nil {
			return err
		}
		// It sends Accept-Language en-US too: ask for the page's default, zh-CN.
		if _, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Shanghai"})
		return err
	}))
	b.do(t, "sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(home+"/login"), chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), browserUser), chromedp.SendKeys(chromedp.ID("password"), browserPassword),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "新建通知", chromedp.Click(chromedp.ID("new-notice")), chromedp.WaitVisible(chromedp.ID("compose")))
	b.wait(t, "the tree and the tag", `document.querySelectorAll("#dept-tree li").length >= 4 && document.querySelector('#tags input[data-tag="`+strconv.FormatInt(tagID, 10)+`"]') !== null`)

	const title = "新考勤制度 <b>12月起</b>"
	b.do(t, "write", chromedp.SendKeys(chromedp.ID("title"), title), chromedp.SendKeys(chromedp.ID("body"), "请阅读并确认。"),
		chromedp.SendKeys(chromedp.ID("url"), "https://intranet.example.com/kaoqin"))
	if got := eval[string](t, b, `document.getElementById("pv-title").textContent + "|" + document.getElementById("pv-body").textContent + "|" +
		document.getElementById("pv-button").textContent + "|" + document.getElementById("pv-app").textContent + "|" + document.getElementById("pv-link").hidden`); got != title+"|请阅读并确认。|我已阅读|hr|false" {
		t.Errorf("preview = %q; want the title as text, the body, 我已阅读, the app and the link line", got)
	}
	// Two departments: HR (2), and Frontend (5) under Engineering (3).
	b.do(t, "pick HR", chromedp.Click(chromedp.CSS(`input[data-dept="2"]`)))
	b.do(t, "expand Engineering", chromedp.Click(chromedp.CSS(`li[data-dept="3"] > .node > button.twisty`)))
	b.wait(t, "Frontend shown", `document.querySelector('input[data-dept="5"]') !== null && document.querySelector('input[data-dept="5"]').offsetParent !== null`)
	b.do(t, "pick Frontend", chromedp.Click(chromedp.CSS(`input[data-dept="5"]`)))
	b.do(t, "pick the tag", chromedp.Click(chromedp.CSS(fmt.Sprintf(`input[data-tag="%d"]`, tagID))))
	for _, p := range []struct{ q, userid string }{{"Alice", "alice"}, {"杨", "yangfan"}} {
		b.do(t, "search "+p.q, chromedp.SendKeys(chromedp.ID("people-q"), p.q))
		sel := fmt.Sprintf(`#people-results button[data-userid=%q]`, p.userid)
		b.wait(t, "found "+p.userid, `document.querySelector('`+sel+`') !== null`)
		b.do(t, "pick "+p.userid, chromedp.Click(chromedp.CSS(sel)))
		eval[bool](t, b, `(() => { const e = document.getElementById("people-q"); e.value = ""; return e.dispatchEvent(new Event("input")); })()`)
	}
	b.do(t, "paste", chromedp.SendKeys(chromedp.ID("paste"), "nobody-here"), chromedp.Click(chromedp.ID("paste-add")))
	// HR 3 + Frontend 3 + the tag (frank; zhangsan again) + alice + yangfan.
	const want = 9
	b.wait(t, "the live count", `document.getElementById("recipient-count").textContent === "`+strconv.Itoa(want)+`" && document.getElementById("count-state").textContent === ""`)
	if got := eval[string](t, b, `document.getElementById("unknown-list").textContent`); got != "nobody-here" {
		t.Errorf("未找到的账号 = %q; want nobody-here", got)
	}
	b.screenshot(t, dir, "compose-real-laptop")

	b.do(t, "定时发送", chromedp.Click(chromedp.ID("when-later")))
	at := time.Now().Add(5 * time.Second).Truncate(time.Second)
	eval[bool](t, b, `(() => { const e = document.getElementById("send-at"); e.value = "`+at.In(time.FixedZone("CST", 8*3600)).Format("2006-01-02T15:04:05")+`"; return e.dispatchEvent(new Event("input")); })()`)
	b.do(t, "submit", chromedp.Click(chromedp.ID("submit")))
	b.wait(t, "confirmation", `!document.getElementById("confirm").hidden`)
	if got := eval[string](t, b, `document.getElementById("confirm-text").textContent`); got != "确定发送给 9 人？" {
		t.Errorf("confirmation = %q; want 确定发送给 9 人？", got)
	}
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	waitAcrossNavigation(t, b, `location.pathname === "/" && document.getElementById("messages") !== null`)
	msgid := eval[string](t, b, `(document.querySelector('#pending li[data-state="scheduled"]') || {dataset: {}}).dataset.msgid || ""`)
	if msgid == "" {
		t.Fatalf("the scheduled notice is not on the list as 待发送")
	}
	b.screenshot(t, dir, "list-scheduled-laptop")
	sent := `(() => { const li = document.querySelector('#messages li[data-msgid="` + msgid + `"]'); return li !== null && li.querySelector(".state").textContent === "已发送"; })()`
	deadline := time.Now().Add(30 * time.Second)
	for !eval[bool](t, b, sent) {
		if time.Now().After(deadline) {
			t.Fatalf("notice %s not 已发送 on the list 30 s after its time", msgid)
		}
		time.Sleep(time.Second)
		b.do(t, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("messages")))
	}
	b.screenshot(t, dir, "list-sent-laptop")
	var got struct {
		Recipients int    `json:"recipients"`
		State      string `json:"state"`
		Title      string `json:"title"`
	}
	if code := api(t, m, "GET", "/messages/"+msgid, nil, &got); code != http.StatusOK {
		t.Fatalf("GET the notice = %d", code)
	}
	if got.Recipients != want || got.State != "sent" || got.Title != title {
		t.Errorf("the notice = %+v; want %d recipients (the page's live count), sent, the title", got, want)
	}
	b.do(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
		chromedp.Navigate(home+"/new?from="+msgid), chromedp.WaitVisible(chromedp.ID("compose")))
	b.wait(t, "duplicated", `document.getElementById("title").value === `+strconv.Quote(title)+` && document.getElementById("recipient-count").textContent === "`+strconv.Itoa(want)+`"`)
	if got := eval[bool](t, b, fmt.Sprintf(`document.querySelector('input[data-tag="%d"]').checked && document.querySelector('input[data-dept="2"]').checked`, tagID)); !got {
		t.Error("the duplicate lost the tag or a department of the notice it copies")
	}
	if got := eval[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth]`); got[0] > got[1] {
		t.Errorf("compose page is %d px wide on a %d px phone", got[0], got[1])
	}
	b.screenshot(t, dir, "compose-real-phone")
	if p := b.consoleProblems(); len(p) > 0 {
		t.Errorf("browser console reported errors:\n%s", strings.Join(p, "\n"))
	}
}

// seedComposeTag writes a WeCom tag with userIDs as its users, as the
// directory sync writes tag/get's answer (migration 00010), and bumps the
// directory's version so the dashboard's indexes see it.
func seedComposeTag(tb testing.TB, m *Main, name string, userIDs []string) int64 {
	tb.Helper()
	const id = 7
	ctx := context.Background()
	if _, err := m.DB.ExecContext(ctx, `INSERT INTO tags (corp_id, tag_id, name) VALUES (?, ?, ?)`, testCorp, id, name); err != nil {
		tb.Fatalf("insert tag: %v", err)
	}
	for _, u := range userIDs {
		if _, err := m.DB.ExecContext(ctx, `INSERT INTO tag_users (corp_id, tag_id, uid)
			SELECT corp_id, ?, uid FROM users WHERE corp_id = ? AND userid_key = ?`, id, testCorp, strings.ToLower(u)); err != nil {
			tb.Fatalf("tag %s: %v", u, err)
		}
	}
	if _, err := m.DB.ExecContext(ctx, `INSERT INTO directory_versions (corp_id, version) VALUES (?, 1)
		ON DUPLICATE KEY UPDATE version = version + 1`, testCorp); err != nil {
		tb.Fatalf("directory version: %v", err)
	}
	return id
}

// waitAcrossNavigation waits up to 10 s for cond in a page that is
// navigating (a save goes to the list): a poll cut by the navigation is
// polled again in the next document.
func waitAcrossNavigation(t *testing.T, b *browser, cond string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond),
			chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if time.Now().After(deadline) || errors.Is(err, chromedp.ErrPollingTimeout) {
			t.Fatalf("waiting for %s: %v (console: %q)", cond, err, b.consoleProblems())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
