package process

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// TestBrowserStandingNotice (issue 51): the message page of a standing
// notice shows 常驻 and 新入职待确认 1 人 once a joiner arrived, with the
// joiner in its table; the list filtered to 仅常驻通知 shows it alone;
// the compose page posts a notice made standing with its checkbox, and
// offers no 保存草稿 while it is ticked (a standing notice is never a
// draft).
func TestBrowserStandingNotice(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	hash, err := bcrypt.GenerateFromPassword([]byte(browserPassword), bcrypt.MinCost)
	testenv.Check(t, "bcrypt", err)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:        []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{2}}, {UserID: "lisi", Name: "李四", Departments: []int{3}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}, {ID: 2, ParentID: 1, Name: "销售部"}, {ID: 3, ParentID: 1, Name: "研发部"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.Apps[0].Secret = pageSecret
		c.Dashboard.Users = []config.User{{Name: browserUser, PasswordHash: string(hash), Corps: []string{testCorp}}}
	})
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: pageSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "sync", err)

	const msg = "rules-browser"
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": msg, "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"departments": []int{2}}, "standing": map[string]any{"join_deadline": "7d"}}, nil); code != http.StatusCreated {
		t.Fatalf("POST = %d; want 201", code)
	}
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "plain-browser", "app": "hr", "title": "普通通知", "send": true,
		"audience": map[string]any{"departments": []int{2}}}, nil); code != http.StatusCreated {
		t.Fatalf("POST plain = %d; want 201", code)
	}
	fake.AddUser(testCorp, fakewecom.User{UserID: "zhaoliu", Name: "赵六", Departments: []int{2}})
	_, err = syncer.Sync(context.Background(), testCorp)
	testenv.Check(t, "sync", err)
	testenv.WaitFor(t, 15*time.Second, "zhaoliu enrolled and sent", func() bool {
		return testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM standing_enrolments WHERE msgid = ? AND sent_at IS NOT NULL", msg)[0] == 1
	})

	b := mustStartBrowser(t, 90*time.Second)
	art := artifactsDir(t)
	home := "http://" + m.DashboardAddr
	b.do(t, "zh-CN", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}})
		return err
	}))
	b.do(t, "sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(home+"/login"), chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), browserUser), chromedp.SendKeys(chromedp.ID("password"), browserPassword),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "open the standing notice", chromedp.Navigate(home+"/m/"+msg), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	b.wait(t, "the standing section", `!document.getElementById("standing").hidden && document.querySelectorAll("#standing-rows tr").length === 1`)
	if got := eval[string](t, b, `document.querySelector("#standing h2").textContent`); !strings.Contains(got, "常驻") || !strings.Contains(got, "新入职待确认 1 人") {
		t.Errorf("standing heading = %q; want 常驻 and 新入职待确认 1 人", got)
	}
	if row := eval[string](t, b, `document.querySelector("#standing-rows tr").textContent`); !strings.Contains(row, "赵六") || !strings.Contains(row, "未确认") {
		t.Errorf("joiner row = %q; want 赵六, 未确认", row)
	}
	b.screenshot(t, art, "standing-message")
	b.do(t, "an ordinary notice", chromedp.Navigate(home+"/m/plain-browser"), chromedp.WaitVisible(chromedp.ID("progress-bar")))
	if hidden := eval[bool](t, b, `document.getElementById("standing").hidden`); !hidden {
		t.Error("an ordinary notice shows the standing section")
	}

	b.do(t, "the list, standing only", chromedp.Navigate(home+"/"), chromedp.WaitVisible(chromedp.ID("list-standing")),
		chromedp.Click(chromedp.ID("list-standing")), chromedp.Submit(chromedp.ID("list-q")), chromedp.WaitVisible(chromedp.ID("list-clear")))
	if ids := eval[[]string](t, b, `[...document.querySelectorAll("#messages [data-msgid]")].map((e) => e.dataset.msgid)`); len(ids) != 1 || ids[0] != msg {
		t.Errorf("list filtered to standing = %v; want [%s]", ids, msg)
	}
	// 新建通知 → 常驻通知 with 14 天: the notice is kept standing.
	b.do(t, "新建通知", chromedp.Navigate(home+"/new"), chromedp.WaitVisible(chromedp.ID("compose")))
	b.wait(t, "the tree", `document.querySelector('input[data-dept="2"]') !== null`)
	b.do(t, "write", chromedp.SendKeys(chromedp.ID("title"), "保密制度"), chromedp.Click(chromedp.CSS(`input[data-dept="2"]`)))
	b.wait(t, "the count", `document.getElementById("recipient-count").textContent === "2" && document.getElementById("count-state").textContent === ""`)
	if off := eval[bool](t, b, `document.getElementById("save-draft").disabled`); off {
		t.Error("保存草稿 is off before 常驻通知 is ticked")
	}
	b.do(t, "常驻通知", chromedp.Click(chromedp.ID("standing")))
	b.wait(t, "its fields", `!document.getElementById("standing-fields").hidden`)
	// A standing notice is sent now or at its time, never a draft (the
	// server refuses one): 保存草稿 is off, and the page says why.
	if off := eval[bool](t, b, `document.getElementById("save-draft").disabled`); !off {
		t.Error("保存草稿 is on while 常驻通知 is ticked; the server refuses a standing draft (400)")
	}
	if hint := eval[string](t, b, `(() => { const e = document.getElementById("standing-no-draft"); return e && !e.hidden ? e.textContent : ""; })()`); !strings.Contains(hint, "不能保存为草稿") {
		t.Errorf("hint beside 保存草稿 = %q; want it to say a standing notice cannot be saved as a draft", hint)
	}
	b.do(t, "常驻通知 off", chromedp.Click(chromedp.ID("standing")))
	if off := eval[bool](t, b, `document.getElementById("save-draft").disabled || !document.getElementById("standing-no-draft").hidden`); off {
		t.Error("保存草稿 stays off (or its hint shown) after 常驻通知 is unticked")
	}
	b.do(t, "常驻通知 again", chromedp.Click(chromedp.ID("standing")))
	b.wait(t, "its fields", `!document.getElementById("standing-fields").hidden`)
	eval[bool](t, b, `(() => { const e = document.getElementById("join-deadline"); e.value = "14d"; return e.dispatchEvent(new Event("change")); })()`)
	b.screenshot(t, art, "standing-compose")
	b.do(t, "submit", chromedp.Click(chromedp.ID("submit")))
	b.wait(t, "confirmation", `!document.getElementById("confirm").hidden`)
	b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
	waitAcrossNavigation(t, b, `location.pathname !== "/new"`)
	testenv.WaitFor(t, 10*time.Second, "the composed notice kept standing", func() bool {
		specs := testenv.Column[string](t, m.DB, "SELECT s.spec FROM standing_notices s JOIN messages m ON m.corp_id = s.corp_id AND m.msgid = s.msgid WHERE m.title = '保密制度'")
		return len(specs) == 1 && strings.Contains(specs[0], `"join_deadline":"14d"`)
	})
	if p := b.consoleProblems(); len(p) > 0 {
		t.Errorf("console: %q", p)
	}
}
