package process

import (
	"context"
	"encoding/csv"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// The leader's browser test (issue 31, Done when): a department leader
// signs in through the fake WeCom's sign-in pages, as on a desktop and
// inside WeCom's browser, and the message page shows their subtree's
// numbers only, in Chinese.

const (
	leaderSecret = "leader-app-secret"
	leaderMsgID  = "notice-leader"
	leaderUserID = "leader4"
	leaderTitle  = "2026 年度安全培训通知"
)

// leaderPerson is one member of leaderCorp; read says whether they press
// the card's button.
type leaderPerson struct {
	userID, name string
	dept         int
	read         bool
}

// leaderPeople: 1 总公司 > 3 研发部, 1 > 4 市场部 > 5 华东组; leader4
// leads 4. Department 4's subtree is leader4, yangfan, xuming (4), heyu
// and liuyang (5): 5 people, 2 of whom read. The company: 10, 6 read.
var leaderPeople = []leaderPerson{
	{"boss", "张总", 1, true},
	{"zhouba", "周八", 3, true}, {"wujiu", "吴九", 3, true}, {"zhengshi", "郑十", 3, true}, {"chenjing", "陈静", 3, false},
	{leaderUserID, "王经理", 4, false}, {"yangfan", "杨帆", 4, true}, {"xuming", "徐明", 4, false},
	{"heyu", "何雨", 5, true}, {"liuyang", "刘洋", 5, false},
}

// inSubtree4 reports whether p is in department 4's subtree.
func (p leaderPerson) inSubtree4() bool { return p.dept == 4 || p.dept == 5 }

// freeAddr returns a 127.0.0.1 address free a moment ago: the dashboard's
// public URL must be known before Run, so its port is chosen up front.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	return addr
}

// mustRunLeaderStack runs yidu with sign-in with WeCom against a fake
// WeCom holding leaderPeople, syncs the directory, sends a notice to
// everyone and delivers the presses of those who read.
func mustRunLeaderStack(t *testing.T) (*Main, *fakewecom.Server, string) {
	t.Helper()
	addr := freeAddr(t)
	corp := fakewecom.Corp{
		CorpID: testCorp,
		// WeCom refuses a redirect_uri outside the app's trusted domain.
		Apps: []fakewecom.App{{AgentID: testAgent, Secret: leaderSecret, RedirectDomain: addr}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}, {ID: 3, ParentID: 1, Name: "研发部", Order: 2},
			{ID: 4, ParentID: 1, Name: "市场部", Order: 1, Leaders: []string{leaderUserID}}, {ID: 5, ParentID: 4, Name: "华东组"}},
	}
	for _, p := range leaderPeople {
		corp.Users = append(corp.Users, fakewecom.User{UserID: p.userID, Name: p.name, Departments: []int{p.dept}})
	}
	fake := fakewecom.New(corp)
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase = base
		c.WeCom.OAuthBase = base
		c.WeCom.LoginBase = base
		c.Apps[0].Secret = leaderSecret
		c.Dashboard.Listen = addr
		c.Dashboard.PublicURL = "http://" + addr
	})
	if m.DashboardAddr != addr {
		t.Fatalf("dashboard listens on %s; want %s, its public URL", m.DashboardAddr, addr)
	}
	dir, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: leaderSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	s, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	if _, err := s.Sync(context.Background(), testCorp); err != nil {
		t.Fatalf("directory sync: %v", err)
	}

	reg := map[string]any{"msgid": leaderMsgID, "app": "hr", "title": leaderTitle, "body": "请各部门于周五前完成。", "send": true,
		"sent_at":  time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second),
		"audience": map[string]any{"departments": []int{1}}}
	var created struct {
		Recipients int `json:"recipients"`
		Send       struct {
			Result string `json:"result"`
		} `json:"send"`
	}
	if code := api(t, m, "POST", "/messages", reg, &created); code != http.StatusCreated || created.Recipients != len(leaderPeople) || created.Send.Result != "sent" {
		t.Fatalf("register and send = %d %+v; want 201, %d recipients, sent", code, created, len(leaderPeople))
	}
	at := time.Now().Add(-time.Minute).Unix()
	for _, p := range leaderPeople {
		if p.read {
			if code := deliver(t, m, cardEvent(p.userID, leaderMsgID+"@0", at)); code != http.StatusOK {
				t.Fatalf("deliver the press of %s = %d; want 200", p.userID, code)
			}
		}
	}
	var whole struct {
		Recipients int `json:"recipients"`
		Read       int `json:"read"`
	}
	if code := api(t, m, "GET", "/messages/"+leaderMsgID+"/progress", nil, &whole); code != http.StatusOK || whole.Recipients != 10 || whole.Read != 6 {
		t.Fatalf("the admin's progress = %d %+v; want 10 recipients, 6 read", code, whole)
	}
	return m, fake, base
}

// zhCN sets the tab's language to Chinese (Accept-Language and the
// locale) and its zone to Beijing's, as the other browser tests do.
func zhCN(t *testing.T, b *browser) {
	t.Helper()
	b.do(t, "zh-CN", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "zh_CN"}); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Shanghai"})
		return err
	}))
}

// callbackWatch records the URLs of the sign-in callback the tab
// requests (the fake WeCom's redirect to it carries the code).
type callbackWatch struct {
	mu   sync.Mutex
	urls []string
}

func watchCallbacks(t *testing.T, b *browser) *callbackWatch {
	t.Helper()
	w := &callbackWatch{}
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("network.enable: %v", err)
	}
	err := chromedp.Listen(b.ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && strings.Contains(e.Request.URL, "/login/wecom/callback") {
			w.mu.Lock()
			w.urls = append(w.urls, e.Request.URL)
			w.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return w
}

func (w *callbackWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.urls)
}

func (w *callbackWatch) last() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.urls) == 0 {
		return ""
	}
	return w.urls[len(w.urls)-1]
}

// leaderProgress is what /progress answers, as the page's fetch reads it.
type leaderProgress struct {
	Status     int     `json:"status"`
	Recipients int     `json:"recipients"`
	Read       int     `json:"read"`
	Unread     int     `json:"unread"`
	Percent    float64 `json:"percent"`
	BySignal   struct {
		Button int `json:"button"`
	} `json:"by_signal"`
}

// TestBrowserLeaderSignIn signs in through the fake WeCom's web login as
// the leader of department 4, and inside WeCom's browser through its
// OAuth2 authorization: the message page is in Chinese and shows
// department 4's subtree only, the numbers /progress gives the leader's
// own session; the departments, people, search and export.csv hold no one
// of department 3; a replayed callback is refused with 登录已失效.
func TestBrowserLeaderSignIn(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	m, fakeWeCom, fakeBase := mustRunLeaderStack(t)
	home := "http://" + m.DashboardAddr
	page := home + "/m/" + leaderMsgID
	dir := artifactsDir(t)
	fake, _ := url.Parse(fakeBase)

	var subtree, others []leaderPerson
	read4 := 0
	for _, p := range leaderPeople {
		if p.inSubtree4() {
			subtree = append(subtree, p)
			if p.read {
				read4++
			}
		} else {
			others = append(others, p)
		}
	}
	want := wantNumbers(read4, len(subtree)) // 2 of 5: 40 %

	b := mustStartBrowser(t, 120*time.Second)
	zhCN(t, b)
	calls := watchCallbacks(t, b)

	t.Run("desktop sign-in", func(t *testing.T) {
		b.do(t, "open the notice", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("login-wecom")))
		if got := eval[string](t, b, "location.pathname + location.search"); got != "/login?next="+url.QueryEscape("/m/"+leaderMsgID) {
			t.Errorf("unsigned /m/%s went to %s; want /login?next=/m/%s", leaderMsgID, got, leaderMsgID)
		}
		if got := eval[string](t, b, `document.getElementById("login-wecom").textContent.trim()`); got != "使用企业微信登录" {
			t.Errorf("the WeCom sign-in link says %q; want 使用企业微信登录", got)
		}
		b.do(t, "使用企业微信登录", chromedp.Click(chromedp.ID("login-wecom")))
		leaderLink := `a[data-userid="` + leaderUserID + `"]`
		waitAcrossNavigation(t, b, `location.host === "`+fake.Host+`" && document.querySelector('`+leaderLink+`') !== null`)
		if got := eval[string](t, b, "location.pathname"); got != "/wwlogin/sso/login" {
			t.Errorf("a desktop browser signs in at the fake's %s; want WeCom's web login /wwlogin/sso/login", got)
		}
		redirect := eval[string](t, b, `new URLSearchParams(location.search).get("redirect_uri")`)
		if redirect != home+"/login/wecom/callback" {
			t.Errorf("redirect_uri = %q; want the configured public URL's callback %s/login/wecom/callback", redirect, home)
		}
		if got := eval[string](t, b, `document.querySelector('`+leaderLink+`').parentElement.textContent`); got != "王经理 (leader4) · 市场部负责人" {
			t.Errorf("the fake's entry for the leader = %q; want 王经理 (leader4) · 市场部负责人", got)
		}
		b.screenshot(t, dir, "leader-fake-signin")
		b.do(t, "sign in as the leader", chromedp.Click(chromedp.CSS(leaderLink)))
		waitAcrossNavigation(t, b, `location.host === "`+m.DashboardAddr+`" && document.getElementById("progress-bar") !== null`)
		if got := eval[string](t, b, "location.pathname"); got != "/m/"+leaderMsgID {
			t.Errorf("after signing in the page is %s; want back on /m/%s", got, leaderMsgID)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("scoped numbers in Chinese", func(t *testing.T) {
		checkLeaderPage(t, b, want, others)
		b.screenshot(t, dir, "leader-message")
	})

	t.Run("live", func(t *testing.T) {
		// A read in department 3 moves nothing on the leader's page; one
		// in 4 does, in place (SSE), and the two arrive in this order, so
		// a leak of the first would show as one read too many.
		eval[int](t, b, `window.__yiduNoReload = 7`)
		at := time.Now().Unix()
		for _, u := range []string{"chenjing", "xuming"} {
			if code := deliver(t, m, cardEvent(u, leaderMsgID+"@0", at)); code != http.StatusOK {
				t.Fatalf("deliver the press of %s = %d; want 200", u, code)
			}
		}
		want = wantNumbers(read4+1, len(subtree)) // xuming: 3 of 5
		b.poll(t, `document.getElementById("read-count").textContent === "`+want.Read+`"`)
		if got := eval[pageNumbers](t, b, readNumbersJS); got != want {
			t.Errorf("after a read in 3 and one in 4 the leader's page shows %+v; want %+v", got, want)
		}
		if eval[int](t, b, `window.__yiduNoReload || 0`) != 7 {
			t.Error("the page reloaded; want the numbers updated in place")
		}
	})

	t.Run("people, search and export", func(t *testing.T) {
		b.do(t, "everyone", chromedp.SetValue(chromedp.ID("state"), "all"))
		eval[bool](t, b, `document.getElementById("state").dispatchEvent(new Event("change", {bubbles: true}))`)
		b.wait(t, "all of the subtree", fmt.Sprintf(`document.getElementById("recipient-total").textContent === "%d"`, len(subtree)))
		listed := eval[[]string](t, b, `[...document.querySelectorAll("#recipients tbody tr")].map((tr) => tr.cells[0].textContent)`)
		if !sameUserIDs(listed, subtree) {
			t.Errorf("people list (all) = %q; want department 4's subtree %v", listed, userIDsOf(subtree))
		}
		// A search for a department-3 name finds nobody, on the page and
		// through the API with the leader's session.
		for _, p := range others {
			got := evalAwait[recipientsAnswer](t, b, sessionFetchJSON("/api/v1/messages/"+leaderMsgID+"/recipients?state=all&q="+url.QueryEscape(p.name)))
			if got.Status != http.StatusOK || len(got.Items) != 0 {
				t.Errorf("the leader's search for %s (%s) = %d %+v; want 200 and nobody", p.name, p.userID, got.Status, got.Items)
			}
		}
		b.do(t, "search 周八", chromedp.SendKeys(chromedp.ID("search"), "周八"))
		b.wait(t, "no match", `document.querySelectorAll("#recipients tbody tr").length === 0`)
		if got := eval[string](t, b, `document.querySelector("#recipients tbody").textContent`); strings.Contains(got, "周八") {
			t.Errorf("searching 周八 shows %q", got)
		}
		eval[bool](t, b, `(() => { const e = document.getElementById("search"); e.value = "杨"; return e.dispatchEvent(new Event("input", {bubbles: true})); })()`)
		b.wait(t, "杨帆 found", `[...document.querySelectorAll("#recipients tbody tr")].map((tr) => tr.cells[0].textContent).join() === "yangfan"`)

		msg := evalAwait[map[string]any](t, b, sessionFetchJSON("/api/v1/messages/"+leaderMsgID))
		if _, has := msg["send"]; msg["status"] != float64(http.StatusOK) || has || msg["recipients"] != float64(len(subtree)) {
			t.Errorf("GET /messages/%s with the leader's session = %v; want 200, %d recipients and no send report (it counts the company)", leaderMsgID, msg, len(subtree))
		}
		csvText := evalAwait[string](t, b, `fetch("/api/v1/messages/`+leaderMsgID+`/export.csv?state=all", {credentials: "same-origin"}).then(async (r) => r.status + "\n" + await r.text())`)
		status, body, _ := strings.Cut(csvText, "\n")
		rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(body, "\ufeff"))).ReadAll()
		if status != "200" || err != nil || len(rows) == 0 {
			t.Fatalf("export.csv with the leader's session = %s, %v: %q", status, err, body)
		}
		var exported []string
		for _, r := range rows[1:] {
			exported = append(exported, r[0])
		}
		if !sameUserIDs(exported, subtree) {
			t.Errorf("export.csv rows = %q; want department 4's subtree %v only", exported, userIDsOf(subtree))
		}
		for _, p := range others {
			if strings.Contains(body, p.name) || strings.Contains(body, "研发部") {
				t.Errorf("export.csv names %s or 研发部:\n%s", p.name, body)
			}
		}
	})

	t.Run("remind", func(t *testing.T) {
		// 提醒未读 reaches the leader's own unread people, nobody in 3.
		before := len(fakeWeCom.Sent())
		eval[bool](t, b, `(window.confirm = () => true, true)`)
		b.do(t, "提醒未读", chromedp.Click(chromedp.ID("remind")))
		b.wait(t, "reminded", `document.getElementById("remind-status").textContent.startsWith("已提醒")`)
		var to []string
		for _, s := range fakeWeCom.Sent()[before:] {
			u, _ := s.Body["touser"].(string)
			to = append(to, strings.Split(u, "|")...)
		}
		var unread []leaderPerson
		for _, p := range subtree {
			if !p.read && p.userID != "xuming" { // xuming read in "live"
				unread = append(unread, p)
			}
		}
		if !sameUserIDs(to, unread) {
			t.Errorf("the leader's reminder went to %q; want their unread people %v only", to, userIDsOf(unread))
		}
		if got := eval[string](t, b, `document.getElementById("remind-status").textContent`); got != "已提醒 "+strconv.Itoa(len(unread))+" 人" {
			t.Errorf("remind status = %q; want 已提醒 %d 人", got, len(unread))
		}
	})

	t.Run("list", func(t *testing.T) {
		b.do(t, "the list", chromedp.Navigate(home+"/"), chromedp.WaitVisible(chromedp.ID("messages")))
		li := `document.querySelector('li[data-msgid="` + leaderMsgID + `"]')`
		if !eval[bool](t, b, li+` !== null`) {
			t.Fatalf("the leader's list does not show the notice")
		}
		if got := eval[string](t, b, li+`.querySelector(".percent").textContent`); got != want.Percent {
			t.Errorf("list percent = %q; want department 4's %s (the company's is 80)", got, want.Percent)
		}
		text := eval[string](t, b, li+`.textContent`)
		if eval[bool](t, b, li+`.querySelector(".send-outcome") !== null`) {
			t.Error("the leader's list row shows the send outcome (the whole notice's batches)")
		}
		if eval[bool](t, b, `document.getElementById("new-notice") !== null`) {
			t.Error("the leader's list offers 新建通知; a leader sends nothing")
		}
		if strings.Contains(text, "/ 10") || strings.Contains(text, "8 /") {
			t.Errorf("the list row shows the company's numbers: %q", text)
		}
		if got := eval[string](t, b, "document.documentElement.lang"); got != "zh-CN" {
			t.Errorf("list <html lang> = %q; want zh-CN", got)
		}
		b.screenshot(t, dir, "leader-list")
	})

	t.Run("phone", func(t *testing.T) {
		b.do(t, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
			chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("progress-bar")))
		checkLeaderPage(t, b, want, others)
		if got := eval[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth]`); got[0] > got[1] {
			t.Errorf("the leader's page is %d px wide on a %d px phone; want no sideways scroll", got[0], got[1])
		}
		b.screenshot(t, dir, "leader-message-phone")
	})

	t.Run("replayed callback", func(t *testing.T) {
		cb := calls.last()
		if cb == "" {
			t.Fatal("the tab never requested the sign-in callback")
		}
		if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		b.do(t, "phone off", chromedp.EmulateViewport(1280, 800))
		b.do(t, "replay the callback", chromedp.Navigate(cb), chromedp.WaitVisible(chromedp.ID("login-form")))
		if got := eval[string](t, b, `(document.getElementById("login-error") || {textContent: ""}).textContent`); !strings.Contains(got, "登录已失效") {
			t.Errorf("a replayed callback shows %q; want 登录已失效", got)
		}
		if got := eval[string](t, b, "document.documentElement.lang"); got != "zh-CN" {
			t.Errorf("<html lang> = %q; want zh-CN", got)
		}
		b.screenshot(t, dir, "leader-replayed")
		b.do(t, "the notice", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("login-form")))
		if got := eval[string](t, b, "location.pathname"); got != "/login" {
			t.Errorf("after a replayed callback /m/%s is %s; want /login (no session)", leaderMsgID, got)
		}
		// The used code with a fresh sign-in's own state and cookie: the
		// code is good once, whatever state comes with it.
		b.do(t, "start again", chromedp.Navigate(home+"/login/wecom?next="+url.QueryEscape("/m/"+leaderMsgID)))
		waitAcrossNavigation(t, b, `location.host === "`+fake.Host+`" && new URLSearchParams(location.search).get("state") !== null`)
		state := eval[string](t, b, `new URLSearchParams(location.search).get("state")`)
		old, _ := url.Parse(cb)
		fresh := home + "/login/wecom/callback?" + url.Values{"code": {old.Query().Get("code")}, "state": {state}}.Encode()
		b.do(t, "the used code, a fresh state", chromedp.Navigate(fresh), chromedp.WaitVisible(chromedp.ID("login-form")))
		if got := eval[string](t, b, `(document.getElementById("login-error") || {textContent: ""}).textContent`); !strings.Contains(got, "登录已失效") {
			t.Errorf("a used code with a fresh state shows %q; want 登录已失效", got)
		}
		b.do(t, "the notice again", chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("login-form")))
		if got := eval[string](t, b, "location.pathname"); got != "/login" {
			t.Errorf("after a used code /m/%s is %s; want /login (no session)", leaderMsgID, got)
		}
	})

	t.Run("inside WeCom", func(t *testing.T) {
		if _, err := chromedp.Call(b.ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatal(err)
		}
		// WeCom's browser on a phone says wxwork in its User-Agent.
		ua := "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 wxwork/4.1.20 MicroMessenger/7.0.1 Language/zh"
		if _, err := chromedp.Call(b.ctx, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: ua, AcceptLanguage: "zh-CN,zh;q=0.9"}); err != nil {
			t.Fatal(err)
		}
		before := calls.count()
		b.do(t, "open from WeCom", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)), chromedp.Navigate(page))
		leaderLink := `a[data-userid="` + leaderUserID + `"]`
		waitAcrossNavigation(t, b, `location.host === "`+fake.Host+`" && document.querySelector('`+leaderLink+`') !== null`)
		if got := eval[string](t, b, "location.pathname"); got != "/connect/oauth2/authorize" {
			t.Errorf("inside WeCom the notice goes to the fake's %s; want straight to the OAuth2 authorization", got)
		}
		q := eval[map[string]string](t, b, `Object.fromEntries(new URLSearchParams(location.search))`)
		if q["scope"] != "snsapi_base" || q["redirect_uri"] != home+"/login/wecom/callback" || q["appid"] != testCorp {
			t.Errorf("authorize query = %v; want snsapi_base, the corp and the public URL's callback", q)
		}
		b.screenshot(t, dir, "leader-fake-authorize-phone")
		b.do(t, "authorize as the leader", chromedp.Click(chromedp.CSS(leaderLink)))
		waitAcrossNavigation(t, b, `location.host === "`+m.DashboardAddr+`" && document.getElementById("progress-bar") !== null`)
		if got := eval[string](t, b, "location.pathname"); got != "/m/"+leaderMsgID {
			t.Errorf("after the authorization the page is %s; want /m/%s", got, leaderMsgID)
		}
		if n := calls.count(); n != before+1 {
			t.Errorf("callbacks requested = %d; want one more", n-before)
		}
		checkLeaderPage(t, b, want, others)
		b.screenshot(t, dir, "leader-message-wecom")
	})

	// The replayed callback's 400 is the one error the console may have.
	var problems []string
	for _, p := range b.consoleProblems() {
		if !strings.Contains(p, "400 (Bad Request)") || !strings.Contains(p, "/login/wecom/callback") {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		t.Errorf("browser console reported errors:\n%s", strings.Join(problems, "\n"))
	}
}

// checkLeaderPage checks the leader's message page: Chinese; the summary
// shows want, which is what /progress answers their session; the
// departments panel lists department 4's subtree only; nobody outside it
// is named anywhere on the page.
func checkLeaderPage(t *testing.T, b *browser, want pageNumbers, others []leaderPerson) {
	t.Helper()
	if got := eval[string](t, b, "document.documentElement.lang"); got != "zh-CN" {
		t.Errorf("<html lang> = %q; want zh-CN", got)
	}
	b.wait(t, "SSE connected", `document.getElementById("live").classList.contains("on")`)
	if got := eval[pageNumbers](t, b, readNumbersJS); got != want {
		t.Errorf("the leader's numbers = %+v; want department 4's subtree %+v, not the company's", got, want)
	}
	pr := evalAwait[leaderProgress](t, b, sessionFetchJSON("/api/v1/messages/"+leaderMsgID+"/progress"))
	shown := eval[pageNumbers](t, b, readNumbersJS)
	if pr.Status != http.StatusOK || strconv.Itoa(pr.Recipients) != shown.Recipients || strconv.Itoa(pr.Read) != shown.Read ||
		strconv.Itoa(pr.Unread) != shown.Unread || strconv.FormatFloat(pr.Percent, 'f', -1, 64) != shown.Percent {
		t.Errorf("the page shows %+v; /progress for the same session answers %+v", shown, pr)
	}
	// The button press is the read signal here: per-signal counts are the
	// subtree's too, not zero and not the company's. They may be counted
	// from MySQL (flushd's 200 ms), so both are given a few seconds.
	for deadline := time.Now().Add(5 * time.Second); pr.BySignal.Button != read(want) && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		pr = evalAwait[leaderProgress](t, b, sessionFetchJSON("/api/v1/messages/"+leaderMsgID+"/progress"))
	}
	b.poll(t, `document.getElementById("signal-button").textContent === "`+want.Read+`"`, 5*time.Second)
	if got := eval[string](t, b, `document.getElementById("signal-button").textContent`); got != want.Read || pr.BySignal.Button != read(want) {
		t.Errorf("按钮确认 = %s on the page, %d from /progress; want the subtree's %s", got, pr.BySignal.Button, want.Read)
	}
	labels := eval[string](t, b, `document.querySelector("#message .numbers").textContent + "|" + document.querySelector("#departments thead").textContent`)
	for _, w := range []string{"已读", "未读", "部门"} {
		if !strings.Contains(labels, w) {
			t.Errorf("labels %q lack %s", labels, w)
		}
	}
	b.wait(t, "departments", `document.querySelectorAll("#departments tbody tr").length > 0 && document.getElementById("departments-state").hidden`)
	rows := eval[[][]string](t, b, `[...document.querySelectorAll("#departments tbody tr")].map((tr) => [...tr.cells].map((td) => td.textContent.trim()))`)
	wantRows := [][]string{{"市场部", want.Recipients, want.Read, want.Unread, want.Percent}, {"华东组", "2", "1", "1", "50"}}
	if !slices.EqualFunc(rows, wantRows, slices.Equal) {
		t.Errorf("departments panel = %q; want department 4's subtree only, %q", rows, wantRows)
	}
	b.wait(t, "people", `document.getElementById("recipients-state").hidden`)
	text := eval[string](t, b, `document.querySelector("main").textContent`)
	for _, p := range others {
		if strings.Contains(text, p.name) || strings.Contains(text, p.userID) {
			t.Errorf("the leader's page names %s (%s) of department %d", p.name, p.userID, p.dept)
		}
	}
	for _, w := range []string{"研发部", "总公司"} {
		if strings.Contains(text, w) {
			t.Errorf("the leader's page names the department %s, outside their subtree", w)
		}
	}
	// Who is signed in: the leader by name, not the session's key; what
	// sends is not offered to a leader, reminding their own people is; the
	// whole notice's send report is not shown.
	if got := eval[string](t, b, `document.querySelector(".who").textContent`); got != "王经理 ("+leaderUserID+")" {
		t.Errorf("signed in as %q; want 王经理 (%s)", got, leaderUserID)
	}
	if got := eval[string](t, b, `["remind", "recall", "duplicate"].map((id) => document.getElementById(id).hidden).join()`); got != "false,true,true" {
		t.Errorf("提醒未读, 撤回, 复制 hidden = %s; want false,true,true for a leader", got)
	}
	if eval[bool](t, b, `document.getElementById("send-report") !== null`) {
		t.Error("the leader's page shows the send report (the whole notice's people)")
	}
	if got := eval[string](t, b, `document.getElementById("export-scope").textContent`); got != "我负责的人员" {
		t.Errorf("export scope = %q; want 我负责的人员", got)
	}
	if english := eval[string](t, b, englishWordsJS); english != "" {
		t.Errorf("the Chinese page shows English words: %s", english)
	}
}

// englishWordsJS lists the visible text nodes of the page with Latin
// words (UserIDs, the brand, the app's name and the language switch
// aside), which a Chinese page should not have.
const englishWordsJS = `(() => {
	const skip = new Set(["UserID"]);
	const out = [];
	const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n = w.nextNode(); n; n = w.nextNode()) {
		const el = n.parentElement;
		// The brand, the switch to English (lang="en"), ids and the
		// app's name are not words of the page.
		if (!el || el.closest("script, style, [hidden], [lang=en], .brand, #recipients tbody, .app, .who") || el.offsetParent === null) continue;
		const s = n.textContent.trim();
		if (!/[A-Za-z]{3,}/.test(s.replace(/GMT[+-]\d+/g, "")) || skip.has(s)) continue; // the chart's zone, 时间 (GMT+8)
		out.push(s);
	}
	return out.join(" | ");
})()`

// recipientsAnswer is what /recipients answers, as the page's fetch reads it.
type recipientsAnswer struct {
	Status int `json:"status"`
	Items  []struct {
		UserID string `json:"userid"`
	} `json:"items"`
}

// evalAwait is eval of an expression whose value is a promise.
func evalAwait[T any](tb testing.TB, b *browser, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// read is the read count of p as a number.
func read(p pageNumbers) int { n, _ := strconv.Atoi(p.Read); return n }

// sessionFetchJSON is a JavaScript expression fetching path with the
// page's own session (its cookie) and answering the JSON with its status.
func sessionFetchJSON(path string) string {
	return `fetch(` + strconv.Quote(path) + `, {credentials: "same-origin", headers: {"Accept": "application/json"}})
		.then(async (r) => Object.assign({status: r.status}, await r.json().catch(() => ({}))))`
}

func userIDsOf(ps []leaderPerson) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.userID
	}
	return out
}

// sameUserIDs reports whether got holds exactly ps's UserIDs, in any order.
func sameUserIDs(got []string, ps []leaderPerson) bool {
	want := userIDsOf(ps)
	got = slices.Clone(got)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
