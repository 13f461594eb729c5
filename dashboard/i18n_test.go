package dashboard

import (
	"io/fs"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/dashboard/i18n"
)

// TestCatalogues: every key is in every catalogue, no value is empty, and
// no value mixes the two i18n.Languages' scripts the old "Sign in / 登录" way.
func TestCatalogues(t *testing.T) {
	cats, err := loadCatalogues()
	if err != nil {
		t.Fatal(err)
	}
	han := regexp.MustCompile(`\p{Han}`)
	for _, lang := range i18n.Languages {
		for k, v := range cats[lang] {
			if v == "" {
				t.Errorf("%s: %s is empty", lang, k)
			}
			if lang == "en" && han.MatchString(v) {
				t.Errorf("en: %s is Chinese: %q", k, v)
			}
			if _, ok := cats[i18n.Languages[0]][k]; !ok {
				t.Errorf("%s has %s, %s does not", lang, k, i18n.Languages[0])
			}
		}
		if len(cats[lang]) != len(cats[i18n.Languages[0]]) {
			t.Errorf("%s has %d keys, %s %d", lang, len(cats[lang]), i18n.Languages[0], len(cats[i18n.Languages[0]]))
		}
	}
}

// TestTemplatesUseKnownKeys: every {{t "key"}} in the templates is in the
// catalogues, as is every key the Go code hands the templates (errors,
// titles, signal labels), and no template has Chinese outside a key.
func TestTemplatesUseKnownKeys(t *testing.T) {
	cats, err := loadCatalogues()
	if err != nil {
		t.Fatal(err)
	}
	use := regexp.MustCompile(`\{\{\s*t\s+"([^"]+)"`)
	han := regexp.MustCompile(`\p{Han}`)
	names, err := fs.Glob(webFS, "web/templates/*.html")
	if err != nil || len(names) == 0 {
		t.Fatal("no templates", err)
	}
	n := 0
	for _, name := range names {
		b, _ := webFS.ReadFile(name)
		for _, m := range use.FindAllStringSubmatch(string(b), -1) {
			n++
			if _, ok := cats["en"][m[1]]; !ok {
				t.Errorf("%s uses unknown key %q", name, m[1])
			}
		}
		for i, line := range strings.Split(string(b), "\n") {
			// The language switch names Chinese in Chinese, by design.
			if han.MatchString(line) && !strings.Contains(line, `id="lang-switch"`) {
				t.Errorf("%s:%d has a literal Chinese label: %s", name, i+1, line)
			}
		}
	}
	for _, script := range []string{"app.js", "compose.js"} {
		js, _ := webFS.ReadFile("web/static/" + script)
		for _, m := range regexp.MustCompile(`\btrf?\("([^"]+)"`).FindAllStringSubmatch(string(js), -1) {
			n++
			if _, ok := cats["en"][m[1]]; !ok {
				t.Errorf("%s uses unknown key %q", script, m[1])
			}
		}
		if han.Match(js) {
			t.Errorf("%s has a literal Chinese label: %s", script, han.FindAllString(string(js), 5))
		}
	}
	if n < 50 {
		t.Errorf("templates use %d keys, want the page's labels through the catalogue", n)
	}
	goKeys := []string{"login.title", "list.title", "message.title", "error.bad_cursor", "error.bad_search",
		"error.list_unavailable", "error.message_not_found", "error.message_unavailable", "error.bad_request",
		"login.wrong", "login.too_many", "login.unavailable"}
	for _, k := range stateKeys {
		goKeys = append(goKeys, k)
	}
	goKeys = append(goKeys, lateKey)
	for _, l := range signalLabels {
		goKeys = append(goKeys, l)
	}
	for _, r := range []string{"sent", "partial", "failed"} {
		goKeys = append(goKeys, "send.result."+r)
	}
	for _, st := range []string{"sent", "refused", "unknown", "unsent"} {
		goKeys = append(goKeys, "send.status."+st)
	}
	for _, k := range goKeys {
		if _, ok := cats["zh-CN"][k]; !ok {
			t.Errorf("the code uses unknown key %q", k)
		}
	}
}

func TestAcceptLanguage(t *testing.T) {
	for _, c := range []struct{ h, want string }{
		{"", "zh-CN"},
		{"en-US,en;q=0.9", "en"},
		{"zh-CN,zh;q=0.9,en;q=0.8", "zh-CN"},
		{"fr-FR,en;q=0.5,zh;q=0.4", "en"},
		{"en;q=0.3,zh-TW;q=0.6", "zh-CN"},
		{"fr", "zh-CN"},
		{"en;q=2", "zh-CN"},
		{"en;q=abc", "zh-CN"},
		{"EN", "en"},
		{"english", "zh-CN"},
	} {
		if got := i18n.AcceptLanguage(c.h); got != c.want {
			t.Errorf("i18n.AcceptLanguage(%q) = %q, want %q", c.h, got, c.want)
		}
	}
}

func FuzzAcceptLanguage(f *testing.F) {
	f.Add("en-US,en;q=0.9")
	f.Add("zh;q=0.1,,;q=")
	f.Fuzz(func(t *testing.T, h string) {
		got := i18n.AcceptLanguage(h)
		if got != "zh-CN" && got != "en" {
			t.Fatalf("i18n.AcceptLanguage(%q) = %q", h, got)
		}
	})
}

// TestPageLanguage: the login page is Chinese by default, English by
// Accept-Language, and the switch's cookie wins over both; the switch
// goes back only within the site.
func TestPageLanguage(t *testing.T) {
	f := newFixture(t)
	get := func(path, accept, cookie string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if accept != "" {
			r.Header.Set("Accept-Language", accept)
		}
		if cookie != "" {
			r.Header.Set("Cookie", i18n.Cookie+"="+cookie)
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		return w
	}
	for _, c := range []struct{ accept, cookie, lang, word, not string }{
		{"", "", "zh-CN", ">登录</button>", "Sign in"},
		{"en-US,en;q=0.9", "", "en", ">Sign in</button>", "登录"},
		{"en-US", "zh-CN", "zh-CN", ">登录</button>", "Sign in"},
		{"zh-CN", "en", "en", ">Sign in</button>", "登录"},
		{"", "klingon", "zh-CN", ">登录</button>", "Sign in"},
	} {
		w := get("/login", c.accept, c.cookie)
		body := w.Body.String()
		if !strings.Contains(body, `<html lang="`+c.lang+`">`) || !strings.Contains(body, c.word) || strings.Contains(body, c.not) {
			t.Errorf("login with Accept-Language %q cookie %q: want %s with %q and without %q:\n%s", c.accept, c.cookie, c.lang, c.word, c.not, body)
		}
		if got := w.Header().Get("Content-Language"); got != c.lang {
			t.Errorf("Content-Language = %q, want %q", got, c.lang)
		}
	}
	w := get("/lang?to=en&back=/m/x", "", "")
	if w.Code != 303 || w.Header().Get("Location") != "/m/x" || !strings.Contains(w.Header().Get("Set-Cookie"), i18n.Cookie+"=en") {
		t.Errorf("switch: %d %v", w.Code, w.Header())
	}
	for _, back := range []string{"//evil.example/", "https://evil.example/", "/\\evil", ""} {
		if w := get("/lang?to=zh-CN&back="+back, "", ""); w.Header().Get("Location") != "/" {
			t.Errorf("switch back=%q went to %q", back, w.Header().Get("Location"))
		}
	}
	if w := get("/lang?to=fr", "", ""); w.Code != 400 || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("switch to fr: %d, cookie %q", w.Code, w.Header().Get("Set-Cookie"))
	}
	w = get("/i18n/en.json", "", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"login.submit":"Sign in"`) {
		t.Errorf("catalogue: %d %s", w.Code, w.Body.String())
	}
	if w := get("/i18n/../server.go", "", ""); w.Code != 404 && w.Code != 400 && w.Code != 301 {
		t.Errorf("catalogue ../: %d", w.Code)
	}
}

// TestGlossary: the page's words for the signals and the read states are
// the one glossary's (yidu.Signal.Word, yidu.ReadState.Word) that the
// 告知确认书, 我的记录 and the CSV use, so the card's press is never
// called what an acknowledgement is (issue 49).
func TestGlossary(t *testing.T) {
	cats, err := loadCatalogues()
	if err != nil {
		t.Fatal(err)
	}
	zh := cats["zh-CN"]
	for _, s := range yidu.Signals() {
		if got := zh["signal."+s.String()]; got != s.Word() {
			t.Errorf("zh-CN signal.%s = %q; the glossary says %q", s, got, s.Word())
		}
	}
	for _, st := range yidu.ReadStates() {
		if got := zh["read_state."+string(st)]; got != st.Word() {
			t.Errorf("zh-CN read_state.%s = %q; the glossary says %q", st, got, st.Word())
		}
	}
	if zh["signal.button"] == zh["signal.acknowledged"] || strings.Contains(zh["signal.button"], "确认") {
		t.Errorf("the card's press reads %q, an acknowledgement %q: one name for two things", zh["signal.button"], zh["signal.acknowledged"])
	}
}

// TestAuditActionsNamed: every audited action has its words in every
// catalogue (issue 49: the audit page showed the raw keys
// audit.action.recipients and audit.action.ledger_root).
func TestAuditActionsNamed(t *testing.T) {
	cats, err := loadCatalogues()
	if err != nil {
		t.Fatal(err)
	}
	for _, lang := range i18n.Languages {
		for _, a := range yidu.Actions() {
			if _, ok := cats[lang]["audit.action."+string(a)]; !ok {
				t.Errorf("%s: no words for audit action %s", lang, a)
			}
		}
		for _, o := range []string{"ok", "refused", "failed", "started"} {
			if _, ok := cats[lang]["audit.outcome."+o]; !ok {
				t.Errorf("%s: no words for audit outcome %s", lang, o)
			}
		}
	}
}

// TestAuditDetail: an audit row's detail reads in the page's language;
// values stay as recorded.
func TestAuditDetail(t *testing.T) {
	cats, err := loadCatalogues()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ lang, in, want string }{
		{"zh-CN", "userid=lisi format=pdf", "账号：lisi 格式：pdf"},
		{"zh-CN", "format=zip state=unread department=3", "格式：zip 状态：未读 部门：3"},
		{"zh-CN", "own records", "查看本人记录"},
		{"zh-CN", "unknown=1", "unknown=1"},
		{"en", "userid=lisi format=pdf", "UserID: lisi format: pdf"},
		// Issue 49: role changes and the author's notice were English.
		{"zh-CN", "grant viewer departments=3,4 of acme to wecom lisi", "授予 查看者（departments=3,4） 范围 acme 对象 企业微信 lisi"},
		{"zh-CN", "revoke admin of * to user hr-admin", "收回 管理员 范围 全部企业 对象 密码登录 hr-admin"},
		{"zh-CN", "to=author userid=demo step=approved version=ab12", "发给：发起人 账号：demo 步骤：已批准 版本：ab12"},
		{"zh-CN", "grant nobody of acme to wecom lisi", "grant nobody of acme to wecom lisi"},
		{"zh-CN", "version=3 reacknowledge=yes approval=pending hash=ab12", "版本：3 要求重新确认：是 审批：待审批 哈希：ab12"},
		{"zh-CN", "uid=7 version=2 joined_at=2026-12-06T01:00:00Z batch=1000001", "uid：7 版本：2 加入时间：2026-12-06T01:00:00Z 批次：1000001"},
		{"zh-CN", "follow_up=policy", "跟进：提醒策略"},
	}
	for _, tt := range tests {
		if got := i18n.AuditDetail(cats[tt.lang], tt.in); got != tt.want {
			t.Errorf("i18n.AuditDetail(%s, %q) = %q; want %q", tt.lang, tt.in, got, tt.want)
		}
	}
}
