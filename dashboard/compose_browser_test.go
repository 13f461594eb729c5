package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The compose page's browser test runs the real page (template, script,
// CSS, CSP, sign-in) in Debian's chromium against the fixture's server,
// with the endpoints the page calls that the directory and campaign work
// adds (CONTRACT.md: /api/v1/apps, the directory, the audience preview,
// scheduled and draft notices) answered by composeFake from the fixture's
// directory. cmd/internal/process's browser test drives the same page
// against the real server and a fake WeCom.

// composeTag is composeFake's one tag: carol, and every member of
// Sales (department 2) and its sub-departments.
var composeTag = struct {
	id    int64
	name  string
	users []string
	depts []int64
}{7, "管理层", []string{"carol"}, []int64{2}}

// composeAudience is the contract's audience object (tags included).
type composeAudience struct {
	UserIDs     []string `json:"userids"`
	Departments []int64  `json:"departments"`
	Tags        []int64  `json:"tags"`
	All         bool     `json:"all"`
}

// composeFake answers the contract's endpoints from the fixture's directory
// and records what the page posts.
type composeFake struct {
	f    *fixture
	next http.Handler

	mu       sync.Mutex
	posts    []map[string]any // POST /api/v1/messages bodies
	patches  []map[string]any // PATCH bodies
	cancels  []string
	created  map[string]int // msgid -> recipients at creation
	previews int
}

func (c *composeFake) users() []yidu.User {
	var out []yidu.User
	out = append(out, acmePeople...)
	slices.SortFunc(out, func(a, b yidu.User) int { return strings.Compare(a.UserID, b.UserID) })
	return out
}

// subtree is d and every department under it.
func (c *composeFake) subtree(d int64) map[int64]bool {
	in := map[int64]bool{d: true}
	for changed := true; changed; {
		changed = false
		for _, x := range acmeDepts {
			if in[x.ParentID] && !in[x.ID] {
				in[x.ID], changed = true, true
			}
		}
	}
	return in
}

func inAny(u yidu.User, depts map[int64]bool) bool {
	return slices.ContainsFunc(u.Departments, func(d int64) bool { return depts[d] })
}

// resolve is the union an audience names: active members, those who left,
// and the UserIDs the directory does not know.
func (c *composeFake) resolve(a composeAudience) (active, left []string, unknown []string) {
	depts := map[int64]bool{}
	for _, d := range a.Departments {
		for x := range c.subtree(d) {
			depts[x] = true
		}
	}
	named := map[string]bool{}
	for _, u := range a.UserIDs {
		named[u] = true
	}
	for _, t := range a.Tags {
		if t != composeTag.id {
			continue
		}
		for _, u := range composeTag.users {
			named[u] = true
		}
		for _, d := range composeTag.depts {
			for x := range c.subtree(d) {
				depts[x] = true
			}
		}
	}
	known := map[string]bool{}
	for _, u := range c.users() {
		known[u.UserID] = true
		if !a.All && !named[u.UserID] && !inAny(u, depts) {
			continue
		}
		if u.Status == yidu.StatusLeft {
			left = append(left, u.UserID)
		} else {
			active = append(active, u.UserID)
		}
	}
	for u := range named {
		if !known[u] {
			unknown = append(unknown, u)
		}
	}
	slices.Sort(unknown)
	return active, left, unknown
}

func writeJSONTest(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// scheduled is the notice ?edit= opens.
const composeEditID = "sched-1"

func (c *composeFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/api/v1/") {
		c.next.ServeHTTP(w, r)
		return
	}
	// The real API's auth is not in front of the fake: it asks for what the
	// page sends, a session cookie and, to write, the CSRF header.
	if _, err := r.Cookie(sessionCookie); err != nil || (r.Method != http.MethodGet && r.Header.Get(csrfHeader) == "") {
		if p == "/api/v1/apps" || strings.HasPrefix(p, "/api/v1/directory/") || strings.HasPrefix(p, "/api/v1/audience/") ||
			(p == "/api/v1/messages" && r.Method == http.MethodPost) || strings.Contains(p, composeEditID) {
			writeJSONTest(w, http.StatusUnauthorized, map[string]string{"error": "no session or CSRF token"})
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := r.URL.Query()
	switch {
	case p == "/api/v1/apps":
		writeJSONTest(w, 200, map[string]any{"apps": []map[string]any{
			{"name": "hr", "corp_id": "acme", "agent_id": 1000002, "timezone": "Asia/Shanghai", "confirm_over": 5}}})
	case p == "/api/v1/directory/departments" && q.Get("app") == "hr":
		var out []map[string]any
		for _, d := range acmeDepts {
			n := 0
			sub := c.subtree(d.ID)
			for _, u := range c.users() {
				if u.Status != yidu.StatusLeft && inAny(u, sub) {
					n++
				}
			}
			out = append(out, map[string]any{"id": d.ID, "parent_id": d.ParentID, "name": d.Name, "members": n, "leaders": []string{}})
		}
		writeJSONTest(w, 200, map[string]any{"departments": out})
	case p == "/api/v1/directory/tags" && q.Get("app") == "hr":
		active, _, _ := c.resolve(composeAudience{Tags: []int64{composeTag.id}})
		writeJSONTest(w, 200, map[string]any{"tags": []map[string]any{{"id": composeTag.id, "name": composeTag.name, "members": len(active)}}})
	case p == "/api/v1/directory/people" && q.Get("app") == "hr":
		s := strings.ToLower(q.Get("q"))
		out := []map[string]any{}
		for _, u := range c.users() {
			if s != "" && u.Status != yidu.StatusLeft && (strings.Contains(strings.ToLower(u.UserID), s) || strings.Contains(u.Name, q.Get("q"))) {
				out = append(out, map[string]any{"userid": u.UserID, "name": u.Name, "departments": u.Departments})
			}
		}
		writeJSONTest(w, 200, map[string]any{"people": out})
	case p == "/api/v1/audience/preview" && r.Method == http.MethodPost:
		var b struct {
			App      string          `json:"app"`
			Audience composeAudience `json:"audience"`
		}
		if err := json.NewDecoder(r.Body).Decode(&b); err != nil || b.App != "hr" {
			writeJSONTest(w, 400, map[string]string{"error": "audience: bad body", "field": "audience"})
			return
		}
		c.previews++
		active, left, unknown := c.resolve(b.Audience)
		writeJSONTest(w, 200, map[string]any{"recipients": len(active), "left": len(left), "unknown_userids": unknown, "departments": []any{}})
	case p == "/api/v1/messages" && r.Method == http.MethodPost:
		var b map[string]any
		raw := map[string]json.RawMessage{}
		if err := json.NewDecoder(r.Body).Decode(&raw); err != nil {
			writeJSONTest(w, 400, map[string]string{"error": "body: " + err.Error()})
			return
		}
		b = map[string]any{}
		for k, v := range raw {
			var x any
			_ = json.Unmarshal(v, &x)
			b[k] = x
		}
		c.posts = append(c.posts, b)
		var a composeAudience
		_ = json.Unmarshal(raw["audience"], &a)
		if at, ok := b["send_at"].(string); ok {
			t, err := time.Parse(time.RFC3339, at)
			if err != nil || !t.After(time.Now()) {
				writeJSONTest(w, 400, map[string]string{"error": "send_at is in the past", "field": "send_at"})
				return
			}
		}
		active, _, _ := c.resolve(a)
		id := fmt.Sprintf("new-%d", len(c.posts))
		st := "sent"
		switch {
		case b["draft"] == true:
			st = "draft"
		case b["send_at"] != nil:
			st = "scheduled"
		}
		c.created[id] = len(active)
		writeJSONTest(w, 201, map[string]any{"msgid": id, "app": "hr", "title": b["title"], "state": st, "recipients": 0})
	case p == "/api/v1/messages/"+composeEditID && r.Method == http.MethodGet:
		writeJSONTest(w, 200, map[string]any{"msgid": composeEditID, "app": "hr", "title": "下周一体检", "body": "请空腹", "url": "",
			"state": "scheduled", "send_at": "2030-01-06T09:30:00+08:00", "recipients": 0,
			"audience": map[string]any{"userids": []string{"zhangsan"}, "departments": []int64{3}, "tags": []int64{}, "all": false}})
	case p == "/api/v1/messages/"+composeEditID && r.Method == http.MethodPatch:
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		for k := range b {
			if !slices.Contains([]string{"title", "body", "url", "audience", "send_at", "draft"}, k) {
				writeJSONTest(w, 400, map[string]string{"error": "body: unknown field " + strconv.Quote(k)})
				return
			}
		}
		c.patches = append(c.patches, b)
		writeJSONTest(w, 200, map[string]any{"msgid": composeEditID, "app": "hr", "state": "draft", "recipients": 0})
	case p == "/api/v1/messages/"+composeEditID+"/cancel" && r.Method == http.MethodPost:
		c.cancels = append(c.cancels, composeEditID)
		writeJSONTest(w, 200, map[string]any{"msgid": composeEditID, "state": "cancelled"})
	default:
		c.next.ServeHTTP(w, r)
	}
}

// composeBrowser is a headless chromium tab and its console's errors.
type composeBrowser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
}

func startComposeBrowser(t *testing.T) *composeBrowser {
	t.Helper()
	path := testenv.LookPath(t, "chromium")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-extensions", true),
		chromedp.Flag("force-color-profile", "srgb"), chromedp.Flag("lang", "zh-CN"), chromedp.WindowSize(1280, 800))
	tab, cancelTab := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	if err := chromedp.Do(tab); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &composeBrowser{ctx: tab}
	msgs := chromedp.Console(tab)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	}()
	return b
}

func (b *composeBrowser) console() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.problems)
}

func (b *composeBrowser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		t.Fatalf("%s: %v (console: %q)", what, err, b.console())
	}
}

func (b *composeBrowser) wait(t *testing.T, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := chromedp.Run(b.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		switch {
		case err == nil:
			return
		case time.Now().Before(deadline) && !errors.Is(err, chromedp.ErrPollingTimeout):
			// The page navigated under the poll (a save goes to the list).
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b.shot(t, "compose-failed-"+strings.ReplaceAll(t.Name(), "/", "-"))
		t.Fatalf("%s: waiting for %s: %v (console: %q)", what, cond, err, b.console())
	}
}

func evalJS[T any](t *testing.T, b *composeBrowser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *composeBrowser) shot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("YIDU_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// From the top, so sticky and fixed parts sit where a person sees them
	// first; a dialog open is taken as the viewport shows it.
	var png []byte
	var err error
	if open, _ := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`!document.getElementById("confirm")?.hidden`)); open {
		png, err = chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	} else {
		_, _ = chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(scrollTo(0, 0), true)`))
		png, err = chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	}
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path, _ := filepath.Abs(filepath.Join(dir, name+".png"))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// clearField empties an input as a person selecting all and deleting
// would: the value goes and an input event follows.
func clearField(id string) chromedp.Action[chromedp.Void] {
	js := chromedp.Evaluate[bool](`(() => { const e = document.getElementById("` + id + `"); e.value = ""; return e.dispatchEvent(new Event("input")); })()`)
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error { _, err := js(ctx, tg); return err })
}

const textOf = `((id) => document.getElementById(id).textContent.trim())`

// TestBrowserCompose signs in, composes a notice to two departments, a tag,
// two people found by search and a pasted UserID that does not exist,
// checks the counts, the preview and the live recipient count, confirms by
// typing the count, schedules it 5 s ahead in the corp's zone (the viewer
// is in Berlin), then edits a scheduled notice, duplicates a sent one and
// checks the page at a phone's width.
func TestBrowserCompose(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	f := newFixture(t)
	fake := &composeFake{f: f, next: f.h, created: map[string]int{}}
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	b := startComposeBrowser(t)

	b.do(t, "viewer in Berlin", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		// Debian's chromium ignores --lang for formats (see process's test).
		if _, err := cdp.Call(ctx, tg, emulation.SetLocaleOverride, emulation.SetLocaleOverrideParams{Locale: "zh_CN"}); err != nil {
			return err
		}
		// It sends Accept-Language en-US too: ask for the page's default, zh-CN.
		if _, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Europe/Berlin"})
		return err
	}))
	b.do(t, "sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "open the compose page", chromedp.Click(chromedp.ID("new-notice")), chromedp.WaitVisible(chromedp.ID("compose")))
	b.wait(t, "the tree", `document.querySelectorAll("#dept-tree li").length >= 3 && document.querySelectorAll("#tags input").length === 1`)
	if got := evalJS[string](t, b, `document.getElementById("app").value`); got != "hr" {
		t.Errorf("app = %q; want hr, the one app alice may send from", got)
	}

	t.Run("fields and preview", func(t *testing.T) {
		long := strings.Repeat("长", yidu.MaxCardTitle+1)
		b.do(t, "a title too long", chromedp.SendKeys(chromedp.ID("title"), long))
		if got := evalJS[string](t, b, textOf+`("title-count")`); got != fmt.Sprintf("%d / %d", yidu.MaxCardTitle+1, yidu.MaxCardTitle) {
			t.Errorf("title count = %q; want %d / %d", got, yidu.MaxCardTitle+1, yidu.MaxCardTitle)
		}
		if !evalJS[bool](t, b, `document.getElementById("title-count").classList.contains("over")`) {
			t.Error("an over-long title's count is not marked over")
		}
		b.do(t, "submit", chromedp.Click(chromedp.ID("submit")))
		if got := evalJS[string](t, b, textOf+`("title-error")`); !strings.Contains(got, strconv.Itoa(yidu.MaxCardTitle)) {
			t.Errorf("title error = %q; want the limit named beside the field", got)
		}
		if evalJS[bool](t, b, `!document.getElementById("confirm").hidden`) {
			t.Error("the confirmation opened for a title over the limit")
		}
		b.do(t, "the title", clearField("title"), chromedp.SendKeys(chromedp.ID("title"), "新考勤制度 <b>即日起</b>"),
			chromedp.SendKeys(chromedp.ID("body"), "请各位同事阅读并确认。\n第二行"),
			chromedp.SendKeys(chromedp.ID("url"), "https://docs.example.com/kaoqin"))
		type pv struct{ App, Title, Body, Button, Count string }
		got := evalJS[pv](t, b, `({app: `+textOf+`("pv-app"), title: `+textOf+`("pv-title"), body: document.getElementById("pv-body").textContent,
			button: `+textOf+`("pv-button"), count: `+textOf+`("title-count")})`)
		want := pv{"hr", "新考勤制度 <b>即日起</b>", "请各位同事阅读并确认。\n第二行", "我已阅读", "16 / 36"}
		if got != want {
			t.Errorf("preview = %+v; want %+v", got, want)
		}
		if evalJS[bool](t, b, `document.getElementById("pv-link").hidden || document.querySelector(".wecard b") !== null`) {
			t.Error("the preview has no link line for a document URL, or parsed the title as HTML")
		}
	})

	t.Run("audience", func(t *testing.T) {
		// North (4) is under Sales (2): closed until Sales is expanded.
		if evalJS[bool](t, b, `document.querySelector('input[data-dept="4"]') !== null && document.querySelector('input[data-dept="4"]').offsetParent !== null`) {
			t.Error("a second-level department is shown before its parent is expanded")
		}
		b.do(t, "expand Sales", chromedp.Click(chromedp.CSS(`li[data-dept="2"] > .node > button.twisty`)))
		b.wait(t, "North shown", `document.querySelector('input[data-dept="4"]') !== null && document.querySelector('input[data-dept="4"]').offsetParent !== null`)
		if got := evalJS[string](t, b, `document.querySelector('li[data-dept="1"] > .node .count').textContent`); got != "10 人" {
			t.Errorf("head office count = %q; want 10 人 (its whole subtree but dave, who left)", got)
		}
		// Search by name: only the path to the match.
		b.do(t, "search departments", chromedp.SendKeys(chromedp.ID("dept-search"), "北区"))
		b.wait(t, "search result", `[...document.querySelectorAll("#dept-tree .name")].map((e) => e.textContent).join("|") === "Acme 公司|Sales 销售部|North 北区"`)
		b.do(t, "pick North", chromedp.Click(chromedp.CSS(`input[data-dept="4"]`)))
		b.do(t, "clear the search", clearField("dept-search"),
			chromedp.SendKeys(chromedp.ID("dept-search"), "R"), chromedp.SendKeys(chromedp.ID("dept-search"), "\b"))
		b.wait(t, "the whole tree again", `document.querySelector('input[data-dept="3"]') !== null`)
		b.do(t, "pick R&D and the tag", chromedp.Click(chromedp.CSS(`input[data-dept="3"]`)), chromedp.Click(chromedp.CSS(`input[data-tag="7"]`)))
		// Two people found by search as one types.
		for _, p := range []struct{ q, userid string }{{"张", "zhangsan"}, {"car", "carol"}} {
			b.do(t, "search "+p.q, clearField("people-q"), chromedp.SendKeys(chromedp.ID("people-q"), p.q))
			sel := fmt.Sprintf(`#people-results button[data-userid=%q]`, p.userid)
			b.wait(t, "found "+p.userid, `document.querySelector('`+sel+`') !== null`)
			b.do(t, "pick "+p.userid, chromedp.Click(chromedp.CSS(sel)))
		}
		b.do(t, "paste", chromedp.SendKeys(chromedp.ID("paste"), "ghost-user\nzhangsan"), chromedp.Click(chromedp.ID("paste-add")))
		active, left, unknown := fake.resolve(composeAudience{Departments: []int64{4, 3}, Tags: []int64{7}, UserIDs: []string{"zhangsan", "carol", "ghost-user"}})
		if len(active) < 2 || len(left) != 1 || !slices.Equal(unknown, []string{"ghost-user"}) {
			t.Fatalf("fixture: audience resolves to %v, left %v, unknown %v", active, left, unknown)
		}
		// The paste adds no active member (zhangsan is picked already), so
		// the count before it already reads the same: wait for the count
		// that knows of the paste too.
		b.wait(t, "the live count", textOf+`("recipient-count") === "`+strconv.Itoa(len(active))+`" && `+textOf+`("count-state") === "" && `+textOf+`("unknown-list") !== ""`)
		if got := evalJS[string](t, b, textOf+`("unknown-list")`); got != "ghost-user" {
			t.Errorf("unknown list = %q; want ghost-user (未找到的账号)", got)
		}
		if got := evalJS[string](t, b, textOf+`("left-count")`); !strings.Contains(got, "已离职 1 人") {
			t.Errorf("left = %q; want 已离职 1 人", got)
		}
		chips := evalJS[string](t, b, `[...document.querySelectorAll("#picked .chip span")].map((e) => e.textContent).join("|")`)
		for _, w := range []string{"部门 North 北区", "部门 R&D 研发部", "标签 管理层", "张三（zhangsan）", "Carol（carol）", "账号列表 2 个"} {
			if !strings.Contains(chips, w) {
				t.Errorf("picked = %q; want %q among them", chips, w)
			}
		}
		b.shot(t, "compose-laptop")
	})

	t.Run("schedule and confirm", func(t *testing.T) {
		b.do(t, "schedule", chromedp.Click(chromedp.ID("when-later")))
		if got := evalJS[string](t, b, textOf+`("send-at-zone")`); got != "企业时区 Asia/Shanghai" {
			t.Errorf("zone = %q; want the app's Asia/Shanghai", got)
		}
		setAt := func(at time.Time) {
			wall := at.In(time.FixedZone("CST", 8*3600)).Format("2006-01-02T15:04:05")
			evalJS[bool](t, b, `(() => { const e = document.getElementById("send-at"); e.value = "`+wall+`"; return e.dispatchEvent(new Event("input")); })()`)
		}
		// A time in the past: the server's error is shown beside the time.
		setAt(time.Now().Add(-time.Hour))
		if got := evalJS[string](t, b, textOf+`("send-at-local")`); !strings.Contains(got, "Europe/Berlin") {
			t.Errorf("viewer's time = %q; want the time in the viewer's zone, Europe/Berlin", got)
		}
		n := evalJS[string](t, b, textOf+`("recipient-count")`)
		confirm := func() {
			b.do(t, "submit", chromedp.Click(chromedp.ID("submit")))
			b.wait(t, "confirmation", `!document.getElementById("confirm").hidden`)
			if got := evalJS[string](t, b, textOf+`("confirm-text")`); got != "确定发送给 "+n+" 人？" {
				t.Errorf("confirmation = %q; want 确定发送给 %s 人？", got, n)
			}
			// Over confirm_over (5): the count must be typed.
			if !evalJS[bool](t, b, `document.getElementById("confirm-ok").disabled`) {
				t.Error("confirm is enabled before the count was typed")
			}
			b.do(t, "a wrong count", chromedp.SendKeys(chromedp.ID("confirm-count"), "1"))
			if !evalJS[bool](t, b, `document.getElementById("confirm-ok").disabled`) {
				t.Error("confirm is enabled after a wrong count")
			}
			b.do(t, "the count", clearField("confirm-count"), chromedp.SendKeys(chromedp.ID("confirm-count"), n))
			b.wait(t, "confirm enabled", `!document.getElementById("confirm-ok").disabled`)
		}
		confirm()
		b.shot(t, "compose-confirm-laptop")
		b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
		b.wait(t, "the time's error", textOf+`("send_at-error") === "send_at is in the past"`)
		at := time.Now().Add(5 * time.Second).Truncate(time.Second)
		setAt(at)
		confirm()
		b.do(t, "confirm", chromedp.Click(chromedp.ID("confirm-ok")))
		b.wait(t, "back on the list", `location.pathname === "/" && document.getElementById("messages") !== null`)

		fake.mu.Lock()
		defer fake.mu.Unlock()
		if len(fake.posts) != 2 {
			t.Fatalf("%d notices posted; want 2 (the refused one, then the scheduled one)", len(fake.posts))
		}
		got := fake.posts[1]
		if got["send"] != true || got["title"] != "新考勤制度 <b>即日起</b>" || got["url"] != "https://docs.example.com/kaoqin" || got["app"] != "hr" {
			t.Errorf("posted %v; want send, the title, url and app", got)
		}
		wantAt := at.In(time.FixedZone("CST", 8*3600)).Format(time.RFC3339)
		if got["send_at"] != wantAt {
			t.Errorf("send_at = %v; want %s (the corp's zone, +08:00)", got["send_at"], wantAt)
		}
		a, _ := json.Marshal(got["audience"])
		var aud composeAudience
		_ = json.Unmarshal(a, &aud)
		slices.Sort(aud.Departments)
		slices.Sort(aud.UserIDs)
		if !slices.Equal(aud.Departments, []int64{3, 4}) || !slices.Equal(aud.Tags, []int64{7}) || aud.All ||
			!slices.Equal(aud.UserIDs, []string{"carol", "ghost-user", "zhangsan"}) {
			t.Errorf("audience = %+v; want departments 3 and 4, tag 7, carol, zhangsan and ghost-user", aud)
		}
		if rec := strconv.Itoa(fake.created["new-2"]); rec != n {
			t.Errorf("the page counted %s recipients; the notice it created has %s", n, rec)
		}
	})

	t.Run("edit and cancel", func(t *testing.T) {
		b.do(t, "edit", chromedp.Navigate(ts.URL+"/new?edit="+composeEditID), chromedp.WaitVisible(chromedp.ID("compose")))
		b.wait(t, "prefilled", `document.getElementById("title").value === "下周一体检" && document.getElementById("send-at").value === "2030-01-06T09:30"`)
		if got := evalJS[string](t, b, textOf+`("compose-heading")`); got != "编辑定时通知" {
			t.Errorf("heading = %q; want 编辑定时通知", got)
		}
		b.wait(t, "audience prefilled", textOf+`("recipient-count") !== "0" && `+textOf+`("count-state") === ""`)
		b.do(t, "save as a draft", chromedp.SendKeys(chromedp.ID("title"), "（改）"), chromedp.Click(chromedp.ID("save-draft")))
		b.wait(t, "back on the list", `location.pathname === "/"`)
		b.do(t, "edit again", chromedp.Navigate(ts.URL+"/new?edit="+composeEditID), chromedp.WaitVisible(chromedp.ID("cancel-notice")))
		b.wait(t, "loaded", `document.getElementById("title").value === "下周一体检"`)
		evalJS[bool](t, b, `(window.confirm = () => true, true)`)
		b.do(t, "cancel", chromedp.Click(chromedp.ID("cancel-notice")))
		b.wait(t, "back on the list", `location.pathname === "/"`)
		fake.mu.Lock()
		defer fake.mu.Unlock()
		if len(fake.patches) != 1 || fake.patches[0]["draft"] != true || fake.patches[0]["title"] != "下周一体检（改）" ||
			fake.patches[0]["send_at"] != "2030-01-06T09:30:00+08:00" {
			t.Errorf("patches = %v; want one draft with the new title and the time kept", fake.patches)
		}
		if !slices.Equal(fake.cancels, []string{composeEditID}) {
			t.Errorf("cancels = %v; want %s once", fake.cancels, composeEditID)
		}
	})

	t.Run("duplicate", func(t *testing.T) {
		b.do(t, "the message page", chromedp.Navigate(ts.URL+"/m/hello"), chromedp.WaitVisible(chromedp.ID("duplicate")))
		b.do(t, "duplicate", chromedp.Click(chromedp.ID("duplicate")), chromedp.WaitVisible(chromedp.ID("compose")))
		b.wait(t, "prefilled", `document.getElementById("title").value === "Holiday notice 放假通知" && `+textOf+`("pv-title") === "Holiday notice 放假通知"`)
		if got := evalJS[string](t, b, textOf+`("compose-heading")`); got != "新建通知" {
			t.Errorf("heading = %q; a duplicate is a new notice", got)
		}
	})

	t.Run("csv and everyone", func(t *testing.T) {
		dir := t.TempDir()
		csvPath, binPath := filepath.Join(dir, "名单.csv"), filepath.Join(dir, "photo.png")
		if err := os.WriteFile(csvPath, []byte("\ufeffuserid,姓名\r\nwangwu,王五\r\n\"frank\",\"Frank, F.\"\r\nno-such-one,?\r\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(binPath, []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), 0o644); err != nil {
			t.Fatal(err)
		}
		b.do(t, "a new notice", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/new"), chromedp.WaitVisible(chromedp.ID("compose")))
		b.wait(t, "apps", `document.getElementById("app").value === "hr"`)
		b.do(t, "a file that is not text", chromedp.SetUploadFiles(chromedp.ID("csv"), []string{binPath}))
		b.wait(t, "refused beside the list", textOf+`("audience-error").includes("不是文本文件")`)
		b.do(t, "a CSV", chromedp.SetUploadFiles(chromedp.ID("csv"), []string{csvPath}))
		active, _, unknown := fake.resolve(composeAudience{UserIDs: []string{"wangwu", "frank", "no-such-one"}})
		b.wait(t, "the CSV's count", textOf+`("recipient-count") === "`+strconv.Itoa(len(active))+`" && `+textOf+`("unknown-list") === "`+strings.Join(unknown, "")+`"`)
		if got := evalJS[string](t, b, textOf+`("audience-error")`); got != "" {
			t.Errorf("audience error %q after a good CSV; want none", got)
		}
		b.do(t, "everyone", chromedp.Click(chromedp.ID("all")))
		all, _, _ := fake.resolve(composeAudience{All: true})
		b.wait(t, "everyone's count", textOf+`("recipient-count") === "`+strconv.Itoa(len(all))+`"`)
	})

	t.Run("phone", func(t *testing.T) {
		b.do(t, "phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
			chromedp.Navigate(ts.URL+"/new"), chromedp.WaitVisible(chromedp.ID("compose")))
		b.wait(t, "the tree", `document.querySelectorAll("#dept-tree li").length >= 3`)
		b.do(t, "fill", chromedp.SendKeys(chromedp.ID("title"), "手机上写的通知"), chromedp.Click(chromedp.CSS(`input[data-dept="1"]`)))
		all, _, _ := fake.resolve(composeAudience{Departments: []int64{1}})
		b.wait(t, "count", textOf+`("recipient-count") === "`+strconv.Itoa(len(all))+`"`)
		if got := evalJS[[]int](t, b, `[document.documentElement.scrollWidth, window.innerWidth]`); got[0] > got[1] {
			t.Errorf("page is %d px wide at a %d px phone; want no horizontal scroll", got[0], got[1])
		}
		b.shot(t, "compose-phone")
	})

	// The refused send_at was answered 400 on purpose: the browser logs
	// that response; anything else is the page's error.
	p := slices.DeleteFunc(b.console(), func(s string) bool {
		return strings.Contains(s, "status of 400") && strings.Contains(s, "/api/v1/messages:")
	})
	if len(p) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}
