package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The browser test drives the dashboard the way HR does: sign in with the
// form, open a message, and watch the numbers move while WeCom delivers
// reads to the receiver, without reloading (the page's SSE stream). It runs
// Debian's chromium headless through chromedp and saves full-page
// screenshots (laptop and phone width) to $YIDU_ARTIFACTS.

const (
	browserUser     = "hr-admin"
	browserPassword = "correct horse 电池 staple"
	browserMsgID    = "notice-browser"
	// browserTitle carries markup: the page must show it as text.
	browserTitle = `2025 年假期政策 / Holiday policy <b>v2</b>`
	// xssDept and xssName would run if the page parsed data as HTML; the
	// CSP forbids inline scripts too, but the page must show them as text.
	xssDept = `<script>window.__xss=1</script>市场部 Marketing`
	xssName = `<img src=x onerror="window.__xss=2">Eve`
)

// browser is one headless chromium tab and what its console reported.
type browser struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string // console errors, uncaught exceptions, failed loads
}

// mustStartBrowser starts chromium with a fresh profile, bounded by
// timeout. Its cleanup runs before Main's (registered later), so the page's
// SSE stream is gone when the dashboard shuts down.
func mustStartBrowser(tb testing.TB, timeout time.Duration) *browser {
	tb.Helper()
	path := testenv.LookPath(tb, "chromium") // Debian's; .ci/run installs it
	ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox, // tests run as root in CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("lang", "zh-CN"),
		chromedp.WindowSize(1280, 800),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	tb.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelTimeout()
	})
	if err := chromedp.Do(tabCtx); err != nil { // starts the browser
		tb.Fatalf("start chromium %s: %v", path, err)
	}
	b := &browser{ctx: tabCtx}
	messages := chromedp.Console(tabCtx)
	go func() {
		for msg, err := range messages {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleError || msg.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", msg, msg.URL, msg.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// consoleProblems returns what the console reported as errors so far.
func (b *browser) consoleProblems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems)
}

// do runs steps in the tab, failing the test with what.
func (b *browser) do(tb testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		tb.Fatalf("%s: %v (console: %q)", what, err, b.consoleProblems())
	}
}

// poll waits for the JavaScript condition cond to hold, up to 10 s or the
// timeout given, and reports whether it did.
func (b *browser) poll(tb testing.TB, cond string, timeout ...time.Duration) bool {
	tb.Helper()
	d := 10 * time.Second
	if len(timeout) > 0 {
		d = timeout[0]
	}
	_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](cond,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(d)))
	if err != nil && !errors.Is(err, chromedp.ErrPollingTimeout) {
		tb.Fatalf("poll %s: %v", cond, err)
	}
	return err == nil
}

// wait is poll that fails the test on a timeout.
func (b *browser) wait(tb testing.TB, what, cond string) {
	tb.Helper()
	if !b.poll(tb, cond) {
		tb.Fatalf("%s: timed out waiting for %s (console: %q)", what, cond, b.consoleProblems())
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](tb testing.TB, b *browser, expr string) T {
	tb.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// screenshot saves a full-page PNG named name into the artifacts directory.
func (b *browser) screenshot(tb testing.TB, dir, name string) {
	tb.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		tb.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		tb.Fatalf("screenshot %s: %v", name, err)
	}
	tb.Logf("screenshot: %s", path)
}

// artifactsDir is $YIDU_ARTIFACTS (.ci/run sets it), else a temporary
// directory; relative paths are taken from the package directory.
func artifactsDir(tb testing.TB) string {
	tb.Helper()
	dir := os.Getenv("YIDU_ARTIFACTS")
	if dir == "" {
		return tb.TempDir()
	}
	dir, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		tb.Fatalf("artifacts dir: %v", err)
	}
	return dir
}

// checkChart checks the read curve: a count axis, a percent axis, a time
// axis named with the viewer's zone (UTC+8 in the test) whose first tick
// is at or after the send, the 90 % line, the line of the reads by button
// (every read of the test is a button press), and a read-out under the
// pointer.
func checkChart(t *testing.T, b *browser, sentAt time.Time) {
	t.Helper()
	type chart struct {
		Counts, Percents, Times []string
		Label                   string
		Target                  bool
	}
	got := eval[chart](t, b, `(() => {
		const txt = (sel) => [...document.querySelectorAll(sel)].map((e) => e.textContent);
		return {counts: txt("#curve text.tick.count"), percents: txt("#curve text.tick.percent"), times: txt("#curve text.tick.time"),
			label: txt("#curve text.axis-label").join(" | "), target: document.querySelector("#curve line.target") !== null};
	})()`)
	if len(got.Counts) < 2 || got.Counts[0] != "0" {
		t.Errorf("count axis ticks %q; want 0 and more", got.Counts)
	}
	if !slices.Equal(got.Percents, []string{"0%", "25%", "50%", "75%", "100%"}) {
		t.Errorf("percent axis ticks %q; want 0%% to 100%%", got.Percents)
	}
	if len(got.Times) < 2 || !strings.Contains(got.Label, "GMT+8") {
		t.Errorf("time axis ticks %q, labels %q; want two or more ticks and the zone GMT+8", got.Times, got.Label)
	}
	if !sentAt.IsZero() && len(got.Times) > 0 {
		first, err := time.Parse("15:04", got.Times[0])
		local := sentAt.In(time.FixedZone("CST", 8*3600))
		sent := local.Hour()*60 + local.Minute()
		if err != nil || first.Hour()*60+first.Minute() < sent || first.Hour()*60+first.Minute() > sent+10 {
			t.Errorf("first time tick %q; want a UTC+8 time within 10 min after the send at %s", got.Times[0], local.Format("15:04"))
		}
	}
	if !got.Target {
		t.Error("the chart has no 90% line")
	}
	// The reads so far were button presses: their own line under the total.
	if !b.poll(t, `document.querySelector("#curve polyline.sig-button") !== null && document.querySelector("#curve polyline.sig-link") === null`) {
		t.Error("the chart has no line of the reads by button (or one by link, with no link read)")
	}
	eval[bool](t, b, `(() => { const r = document.getElementById("curve").getBoundingClientRect();
		return document.getElementById("curve").dispatchEvent(new PointerEvent("pointermove", {clientX: r.right - 60, clientY: r.top + 40, bubbles: true})); })()`)
	if ro := eval[string](t, b, `document.getElementById("curve-readout").textContent`); !readoutIn(eval[string](t, b, "document.documentElement.lang"), ro) {
		t.Errorf("hover read-out = %q; want a time (no zone: the corp's own) and the reads, in Chinese only", ro)
	}
}

// pageNumbers is what the message page shows in its summary.
type pageNumbers struct {
	Read       string  `json:"read"`
	Recipients string  `json:"recipients"`
	Unread     string  `json:"unread"`
	Percent    string  `json:"percent"`
	Bar        float64 `json:"bar"`
}

const readNumbersJS = `(() => {
	const t = (id) => document.getElementById(id).textContent.trim();
	return {read: t("read-count"), recipients: t("recipient-count"), unread: t("unread-count"),
		percent: t("percent"), bar: document.getElementById("progress-bar").value};
})()`

func wantNumbers(read, recipients int) pageNumbers {
	pct := float64(read*1000/recipients) / 10
	return pageNumbers{
		Read: strconv.Itoa(read), Recipients: strconv.Itoa(recipients), Unread: strconv.Itoa(recipients - read),
		Percent: strconv.FormatFloat(pct, 'f', -1, 64), Bar: pct,
	}
}

// directoryPerson is one synthetic employee of the browser test.
type directoryPerson struct {
	userID, name string
	dept         int64
}

// seedDirectory writes names and a department tree for people, as a
// directory sync would (idmap owns these tables; the test writes them
// directly to stay independent of the fake WeCom).
func seedDirectory(tb testing.TB, m *Main, people []directoryPerson) {
	tb.Helper()
	depts := []struct {
		id, parent int64
		name       string
		order      int64
	}{
		{1, 0, "总公司 Head office", 0},
		{2, 1, "人力资源部 HR", 300},
		{3, 1, "研发部 Engineering", 200},
		{4, 1, xssDept, 100},
		{5, 3, "前端组 Frontend", 0},
	}
	ctx := context.Background()
	for _, d := range depts {
		if _, err := m.DB.ExecContext(ctx, `INSERT INTO departments (corp_id, dept_id, parent_id, name, sort_order) VALUES (?, ?, ?, ?, ?)`,
			testCorp, d.id, d.parent, d.name, d.order); err != nil {
			tb.Fatalf("insert department %d: %v", d.id, err)
		}
	}
	for _, p := range people {
		var uid uint32
		if err := m.DB.QueryRowContext(ctx, `SELECT uid FROM users WHERE corp_id = ? AND userid_key = ?`, testCorp, strings.ToLower(p.userID)).Scan(&uid); err != nil {
			tb.Fatalf("uid of %s: %v", p.userID, err)
		}
		if _, err := m.DB.ExecContext(ctx, `UPDATE users SET name = ?, departments = ? WHERE corp_id = ? AND uid = ?`,
			p.name, strconv.FormatInt(p.dept, 10), testCorp, uid); err != nil {
			tb.Fatalf("name %s: %v", p.userID, err)
		}
		if _, err := m.DB.ExecContext(ctx, `INSERT INTO user_departments (corp_id, dept_id, uid) VALUES (?, ?, ?)`, testCorp, p.dept, uid); err != nil {
			tb.Fatalf("membership %s: %v", p.userID, err)
		}
	}
}

// TestBrowserDashboardLive signs in through the form, opens a message to 20
// people, delivers card reads to the receiver and sees the progress bar and
// numbers follow without a reload; the department table and the unread
// list render, and names with markup are shown as text.
func TestBrowserDashboardLive(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium") // skip before starting the servers
	hash, err := bcrypt.GenerateFromPassword([]byte(browserPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	m := mustRunMainWith(t, func(c *config.Config) {
		c.Dashboard.Users = []config.User{{Name: browserUser, PasswordHash: string(hash), Corps: []string{testCorp}}}
	})

	people := []directoryPerson{
		{"zhangsan", "张三", 2}, {"lisi", "李四", 2}, {"wangwu", "王五", 2}, {"zhaoliu", "赵六", 2}, {"sunqi", "孙七", 2},
		{"zhouba", "周八", 3}, {"wujiu", "吴九", 3}, {"zhengshi", "郑十", 3}, {"alice", "Alice Smith", 3}, {"bob", "Bob O'Brien", 3}, {"chenjing", "陈静", 3},
		{"carol", "Carol Chen 陈", 5}, {"dave", "Dave Liu", 5}, {"liuyang", "刘洋", 5}, {"huangli", "黄莉", 5},
		{"eve", xssName, 4}, {"frank", "Frank Müller", 4}, {"yangfan", "杨帆", 4}, {"xuming", "徐明", 4}, {"heyu", "何雨", 4},
	}
	userIDs := make([]string, len(people))
	for i, p := range people {
		userIDs[i] = p.userID
	}
	seedMembers(t, m, testCorp, userIDs...)
	// The directory is synced before the notice is registered, as in
	// production: the registration builds the department tree the page
	// shows (dashboard's department cache).
	seedDirectory(t, m, people)
	sentAt := time.Now().Add(-3 * time.Minute).UTC().Truncate(time.Second)
	reg := map[string]any{
		"msgid": browserMsgID, "app": "hr", "title": browserTitle, "sent_at": sentAt,
		"audience": map[string]any{"userids": userIDs},
	}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}

	readAt := time.Now().Add(-time.Minute).Unix()
	read := func(userIDs ...string) {
		t.Helper()
		for _, u := range userIDs {
			if code := deliver(t, m, cardEvent(u, browserMsgID+"@0", readAt)); code != http.StatusOK {
				t.Fatalf("deliver read of %s = %d; want 200", u, code)
			}
		}
	}
	read("zhangsan", "lisi", "wangwu", "zhaoliu", "sunqi") // all of HR

	b := mustStartBrowser(t, 60*time.Second)
	dir := artifactsDir(t)
	base := "http://" + m.DashboardAddr

	t.Run("sign in", func(t *testing.T) {
		// HR in Beijing: every time on the page must be in UTC+8, named.
		// The locale is set here too: Debian's Chromium 156 (2026-12-02)
		// formatted times as en-US despite --lang=zh-CN.
		b.do(t, "time zone", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			if _, err := cdp.Call(ctx, tg, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "zh_CN"}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Shanghai"})
			return err
		}))
		b.do(t, "open the dashboard", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("login-form")))
		if loc := eval[string](t, b, "location.pathname"); loc != "/login" {
			t.Errorf("unauthenticated / went to %s; want /login", loc)
		}
		b.screenshot(t, dir, "login-laptop")
		b.do(t, "sign in",
			chromedp.SendKeys(chromedp.ID("username"), browserUser),
			chromedp.SendKeys(chromedp.ID("password"), browserPassword),
			chromedp.Click(chromedp.ID("login-submit")),
			chromedp.WaitVisible(chromedp.ID("messages")),
		)
		link := fmt.Sprintf(`a.title[href="/m/%s"]`, browserMsgID)
		if got := eval[string](t, b, `document.querySelector('`+link+`').textContent`); got != browserTitle {
			t.Errorf("list title = %q; want %q", got, browserTitle)
		}
		if got := eval[string](t, b, `document.querySelector('li[data-msgid="`+browserMsgID+`"] .percent').textContent`); got != "25" {
			t.Errorf("list percent = %q; want 25", got)
		}
		b.screenshot(t, dir, "list-laptop")
		b.do(t, "open the message", chromedp.Click(chromedp.CSS(link)), chromedp.WaitVisible(chromedp.ID("progress-bar")))
		// Both panels fill within 2 s of the page showing.
		if !b.poll(t, `document.querySelectorAll("#departments tbody tr").length > 0 && document.querySelectorAll("#recipients tbody tr").length > 0`, 2*time.Second) {
			t.Errorf("departments and people panels not filled 2 s after the page showed (%d, %d rows)",
				eval[int](t, b, `document.querySelectorAll("#departments tbody tr").length`),
				eval[int](t, b, `document.querySelectorAll("#recipients tbody tr").length`))
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("renders", func(t *testing.T) {
		if got := eval[pageNumbers](t, b, readNumbersJS); got != wantNumbers(5, 20) {
			t.Errorf("numbers = %+v; want %+v", got, wantNumbers(5, 20))
		}
		if got := eval[string](t, b, `document.getElementById("title").textContent`); got != browserTitle {
			t.Errorf("title = %q; want %q", got, browserTitle)
		}
		// Departments count recursively: Engineering includes Frontend.
		b.wait(t, "department table", `document.querySelectorAll("#departments tbody tr").length === 5`)
		rows := eval[[][]string](t, b, `[...document.querySelectorAll("#departments tbody tr")].map(
			(tr) => [...tr.cells].map((td) => td.textContent.trim()))`)
		wantDepts := map[string][]string{
			"总公司 Head office": {"20", "5", "15", "25"},
			"人力资源部 HR":        {"5", "5", "0", "100"},
			"研发部 Engineering": {"10", "0", "10", "0"},
			"前端组 Frontend":    {"4", "0", "4", "0"},
			xssDept:           {"5", "0", "5", "0"},
		}
		for _, r := range rows {
			want, ok := wantDepts[r[0]]
			if !ok || !slices.Equal(r[1:], want) {
				t.Errorf("department row %q; want one of %q", r, wantDepts)
			}
			delete(wantDepts, r[0])
		}
		if len(wantDepts) > 0 {
			t.Errorf("departments missing from the table: %q", wantDepts)
		}
		// The unread list: the 15 who have not read, by UserID.
		b.wait(t, "unread list", `document.querySelectorAll("#recipients tbody tr").length === 15`)
		if got := eval[string](t, b, `document.getElementById("recipient-total").textContent`); got != "15" {
			t.Errorf("unread total = %q; want 15", got)
		}
		// All 15 fit on one page (limit 100): no "More" button on screen.
		if got := eval[string](t, b, `getComputedStyle(document.getElementById("more")).display`); got != "none" {
			t.Errorf("More button display = %q with every unread listed; want none (hidden)", got)
		}
		list := eval[[][]string](t, b, `[...document.querySelectorAll("#recipients tbody tr")].map(
			(tr) => [...tr.cells].map((td) => td.textContent))`)
		names := map[string]string{}
		for _, p := range people {
			names[p.userID] = p.name
		}
		for _, r := range list {
			name, ok := names[r[0]]
			switch {
			case !ok || slices.Contains([]string{"zhangsan", "lisi", "wangwu", "zhaoliu", "sunqi"}, r[0]):
				t.Errorf("unread list has %q, who is not an unread recipient", r[0])
			case r[1] != name:
				t.Errorf("unread %s shows name %q; want %q", r[0], r[1], name)
			}
		}
		if !b.poll(t, `document.querySelector("#curve polyline") !== null`) {
			t.Errorf("the read curve is empty; want a line for the 5 flushed reads")
		}
		checkChart(t, b, sentAt)
		// Times are the viewer's (UTC+8 here), with the zone named.
		wantSent := sentAt.In(time.FixedZone("CST", 8*3600)).Format("15:04")
		if got := eval[string](t, b, `document.getElementById("sent-at").textContent`); strings.Contains(got, "GMT+8") || !strings.Contains(got, wantSent) {
			t.Errorf("sent at shows %q; want the UTC+8 time %s without the zone (the corp's own, Asia/Shanghai)", got, wantSent)
		}
		if got := eval[string](t, b, `document.querySelector("#recipients-state").hidden + "|" + document.querySelector("#departments-state").hidden`); got != "true|true" {
			t.Errorf("panel states hidden = %s once both tables are filled; want true|true", got)
		}
		// Markup in data is text: nothing ran, no element was created.
		if got := eval[bool](t, b, `window.__xss === undefined && document.querySelectorAll("main script, main img, #title b").length === 0`); !got {
			t.Errorf("markup in a title, department or name was parsed as HTML")
		}
	})

	t.Run("live without reload", func(t *testing.T) {
		// A reload would drop this marker: the page must change in place.
		eval[int](t, b, `window.__yiduNoReload = 7`)
		b.wait(t, "SSE connected", `document.getElementById("live").classList.contains("on")`)
		// The page loads the departments at start and again on the first
		// progress event; both must be done before the reads, or the table
		// could show them by luck of timing.
		b.wait(t, "departments loaded", `performance.getEntriesByType("resource").filter((e) => e.name.endsWith("/departments")).length >= 2`)
		read("carol", "dave", "liuyang", "huangli", "eve", "frank", "yangfan") // Frontend and part of Marketing
		want := wantNumbers(12, 20)
		cond := fmt.Sprintf(`document.getElementById("read-count").textContent === %q && document.getElementById("progress-bar").value === %v`,
			want.Read, want.Bar)
		b.poll(t, cond) // on a timeout the check below says what the page shows
		if got := eval[pageNumbers](t, b, readNumbersJS); got != want {
			t.Errorf("numbers after 7 reads = %+v; want %+v", got, want)
		}
		if got := eval[int](t, b, `window.__yiduNoReload || 0`); got != 7 {
			t.Errorf("the page reloaded to show the new numbers; want SSE updates in place")
		}
		if got := eval[string](t, b, `document.getElementById("rate").textContent`); got == "–" || got == "" {
			t.Errorf("rate = %q; want a number three minutes after sending", got)
		}
		// The department table follows too, within the page's 10 s refresh
		// throttle (app.js), so HR sees which departments lag.
		if !b.poll(t, `(() => { const r = document.querySelector("#departments tbody tr");
			return r !== null && r.cells[2].textContent === "12"; })()`, 15*time.Second) {
			got := eval[string](t, b, `document.querySelector("#departments tbody tr").cells[2].textContent`)
			t.Errorf("department table: head office read = %s 15 s after the reads; want 12", got)
		}
		b.screenshot(t, dir, "message-laptop")
	})

	t.Run("phone", func(t *testing.T) {
		b.do(t, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
			chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("progress-bar")))
		b.wait(t, "phone tables", `document.querySelectorAll("#recipients tbody tr").length === 8 && document.querySelectorAll("#departments tbody tr").length === 5`)
		if got := eval[pageNumbers](t, b, readNumbersJS); got != wantNumbers(12, 20) {
			t.Errorf("phone numbers = %+v; want %+v", got, wantNumbers(12, 20))
		}
		b.poll(t, `document.querySelectorAll("#curve text.tick.time").length >= 2`)
		checkChart(t, b, time.Time{})
		// Wide tables scroll inside their card; the page itself must not.
		if got := eval[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth]`); got[0] > got[1] {
			t.Errorf("page is %d px wide at a %d px phone viewport; want no horizontal scroll", got[0], got[1])
		}
		// The department numbers are what HR reads on a phone: at least the
		// Read column must be on screen without scrolling sideways.
		if got := eval[[]float64](t, b, `[document.querySelector("#departments tbody tr").cells[2].getBoundingClientRect().right, window.innerWidth]`); got[0] > got[1] {
			t.Errorf("department Read column ends at x=%.0f, beyond the %.0f px phone viewport; want it visible", got[0], got[1])
		}
		if got := eval[string](t, b, `[...document.querySelectorAll(".scroll")].filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.firstElementChild.id).join(", ")`); got != "" {
			t.Errorf("phone: tables wider than their card: %s; want every panel usable without scrolling sideways", got)
		}
		b.screenshot(t, dir, "message-phone")
	})

	t.Run("exports", func(t *testing.T) {
		links := eval[[]string](t, b, `["export-all", "export-read", "export"].map((id) => document.getElementById(id).getAttribute("href"))`)
		for i, st := range []string{"all", "read", "unread"} {
			if !strings.HasSuffix(links[i], "/export.csv?state="+st) {
				t.Errorf("export %s links to %q; want the whole notice's export.csv?state=%s", st, links[i], st)
			}
		}
		b.do(t, "select a department", chromedp.Click(chromedp.CSS(`#departments a[data-dept="2"]`)))
		b.wait(t, "department exports", `document.getElementById("export-read").getAttribute("href").endsWith("state=read&department=2")`)
		if got := eval[string](t, b, `document.getElementById("export-scope").textContent`); !strings.Contains(got, "人力资源部 HR") {
			t.Errorf("export scope = %q; want the selected department", got)
		}
	})

	if p := b.consoleProblems(); len(p) > 0 {
		t.Errorf("browser console reported errors:\n%s", strings.Join(p, "\n"))
	}
}

// readoutIn: the chart's read-out speaks the page's language only, and
// names no zone (the viewer's is the corp's, Asia/Shanghai).
func readoutIn(lang, ro string) bool {
	if strings.Contains(ro, "GMT") {
		return false
	}
	if lang == "en" {
		return strings.Contains(ro, " read (") && strings.Contains(ro, "Pressed") && !strings.Contains(ro, "已读")
	}
	return strings.Contains(ro, "已读") && strings.Contains(ro, "已点击「我已阅读」") && !strings.Contains(ro, "read")
}
