package dashboard

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
)

// TestBrowserComposeContent writes a notice's full text on the compose
// page at a phone's width: the live preview is the server's sanitized
// rendering (a table shows, a script does not run), a PDF uploads, the
// schedule and the draft stay on with full text, and the send keeps
// version 1 with the attachment.
func TestBrowserComposeContent(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	f, _ := newContentFixture(t)
	withAudienceDirectory(t, f)
	ts := httptest.NewServer(f.h)
	t.Cleanup(ts.Close)
	b := startComposeBrowser(t)
	pdf := filepath.Join(t.TempDir(), "评分表.pdf")
	if err := os.WriteFile(pdf, []byte("%PDF-1.7\n% a scoring table\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	b.do(t, "Chinese first", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}})
		return err
	}))
	b.do(t, "sign in", chromedp.EmulateViewport(390, 844), chromedp.Navigate(ts.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "open the compose page", chromedp.Navigate(ts.URL+"/new"), chromedp.WaitVisible(chromedp.ID("markdown")))
	b.wait(t, "the apps", `document.getElementById("app").value === "hr"`)
	b.do(t, "write", chromedp.SendKeys(chromedp.ID("title"), "2026年度绩效考核办法"),
		chromedp.SendKeys(chromedp.ID("markdown"), "# 第四条\n\n考核周期为一年。\n\n| 等级 | 分数 |\n|:--|--:|\n| A | 90 |\n\n<script>window.pwned = 1</script><img src=x onerror=\"window.pwned=2\">"))
	b.wait(t, "the preview", `document.querySelector("#pv-content h1")?.textContent === "第四条" && document.querySelector("#pv-content td[align=right]")?.textContent === "90"`)
	if evalJS[bool](t, b, `window.pwned !== undefined || document.querySelector("#pv-content script, #pv-content img") !== null`) {
		t.Error("a script or an image survived into the preview")
	}
	if evalJS[bool](t, b, `document.getElementById("when-later").disabled || document.getElementById("save-draft").disabled`) {
		t.Error("schedule or draft is off for a notice with full text (a draft keeps it)")
	}

	b.do(t, "upload a PDF", chromedp.SetUploadFiles(chromedp.ID("attachment-file"), []string{pdf}))
	b.wait(t, "the attachment listed", `document.querySelectorAll("#attachment-list li").length === 1 && document.querySelector("#attachment-list .name").textContent === "评分表.pdf"`)
	b.do(t, "acknowledged", chromedp.SetValue(chromedp.ID("read-rule"), "acknowledged"),
		clearField("min-read"), chromedp.SendKeys(chromedp.ID("min-read"), "15"))
	if w := evalJS[float64](t, b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); w > 0 {
		t.Errorf("the page scrolls sideways by %.0f px at 390 px", w)
	}
	b.shot(t, "compose-content-390")

	b.do(t, "pick a person", chromedp.SendKeys(chromedp.ID("people-q"), "张"))
	b.wait(t, "search result", `document.querySelector('#people-results button') !== null`)
	b.do(t, "add", chromedp.Click(chromedp.CSS(`#people-results button`)))
	b.wait(t, "counted", `document.getElementById("recipient-count").textContent.trim() === "1"`)
	b.do(t, "send", chromedp.Click(chromedp.ID("submit")), chromedp.WaitVisible(chromedp.ID("confirm-ok")), chromedp.Click(chromedp.ID("confirm-ok")))
	b.wait(t, "the notice's page", `location.pathname.startsWith("/m/")`)
	msgid := strings.TrimPrefix(evalJS[string](t, b, `location.pathname`), "/m/")

	b.wait(t, "the full text on the notice's page", `!document.getElementById("fulltext-card").hidden && document.getElementById("version-text").textContent.includes("考核周期为一年。")`)

	// A material version 2: the page shows it as current, version 1 stays readable.
	if w := f.do(t, "PATCH", "/api/v1/messages/"+msgid, acmeToken, strings.NewReader(`{"content":{"markdown":"# 第四条\n\n考核周期为半年。"},"reacknowledge":true}`)); w.Code != 200 {
		t.Fatalf("PATCH = %d: %s", w.Code, w.Body)
	}
	b.do(t, "reload", chromedp.Reload())
	b.wait(t, "version 2", `document.querySelectorAll("#version-pick option").length === 2 && document.getElementById("version-text").textContent.includes("考核周期为半年。") && document.getElementById("version-meta").textContent.includes("需重新确认")`)
	b.do(t, "pick version 1", chromedp.SetValue(chromedp.ID("version-pick"), "1"),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`document.getElementById("version-pick").dispatchEvent(new Event("change"))`)(ctx, tg)
			return err
		}))
	b.wait(t, "version 1 again", `document.getElementById("version-text").textContent.includes("考核周期为一年。") && document.getElementById("version-attachments").textContent.includes("评分表.pdf")`)
	if w := evalJS[float64](t, b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); w > 0 {
		t.Errorf("the notice's page scrolls sideways by %.0f px at 390 px: %s", w, evalJS[string](t, b, `[...document.querySelectorAll("body *")].filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).slice(0, 8).map((e) => e.tagName + "#" + e.id + "." + e.className + " " + Math.round(e.getBoundingClientRect().right)).join(", ")`))
	}
	b.shot(t, "message-versions-390")
	card, err := chromedp.Run(b.ctx, chromedp.Screenshot(chromedp.ID("fulltext-card")))
	if err != nil {
		t.Fatalf("screenshot of the full text: %v", err)
	}
	if dir := os.Getenv("YIDU_ARTIFACTS"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "message-fulltext-v1-390.png"), card, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	w := f.ok(t, "GET", "/api/v1/messages/"+msgid+"/content?v=1")
	var v versionJSON
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != 1 || v.Title != "2026年度绩效考核办法" || len(v.Attachments) != 1 || v.Attachments[0].Name != "评分表.pdf" ||
		v.ReadRule != "acknowledged" || v.MinReadSeconds != 15 || strings.Contains(v.HTML, "script") {
		t.Errorf("version 1 = %+v", v)
	}
}

// TestBrowserComposeDraftContent: on the compose page a notice with full
// text and a PDF is saved as a draft; opened again for editing it shows
// its text, read rule and attachment, and a change of the text is saved
// to the draft. Nothing is published before it is sent.
func TestBrowserComposeDraftContent(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	testenv.LookPath(t, "chromium")
	f, st := newCampaignFixture(t)
	withAudienceDirectory(t, f)
	db := testenv.MySQL(t)
	atts, err := attachment.New(db, attachment.Options{})
	testenv.Check(t, "attachment.New", err)
	ns, err := notice.New(db, atts, notice.Options{})
	testenv.Check(t, "notice.New", err)
	f.srv.comp.Attachments = atts
	f.rewire(t, func(d *deps) { d.Notices = ns })
	ts := httptest.NewServer(f.h)
	t.Cleanup(ts.Close)
	b := startComposeBrowser(t)
	pdf := filepath.Join(t.TempDir(), "评分表.pdf")
	if err := os.WriteFile(pdf, []byte("%PDF-1.7\n% a scoring table\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.do(t, "Chinese first", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Accept-Language": "zh-CN,zh;q=0.9"}})
		return err
	}))
	b.do(t, "sign in", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(ts.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"), chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("login-submit")), chromedp.WaitVisible(chromedp.ID("messages")))
	b.do(t, "open the compose page", chromedp.Navigate(ts.URL+"/new"), chromedp.WaitVisible(chromedp.ID("markdown")))
	b.wait(t, "the apps", `document.getElementById("app").value === "hr"`)
	b.do(t, "write", chromedp.SendKeys(chromedp.ID("title"), "2026年度绩效考核办法"),
		chromedp.SendKeys(chromedp.ID("markdown"), "# 第四条\n\n考核周期为一年。"))
	b.do(t, "upload a PDF", chromedp.SetUploadFiles(chromedp.ID("attachment-file"), []string{pdf}))
	b.wait(t, "the attachment listed", `document.querySelectorAll("#attachment-list li").length === 1`)
	b.do(t, "acknowledged", chromedp.SetValue(chromedp.ID("read-rule"), "acknowledged"))
	b.do(t, "pick a person", chromedp.SendKeys(chromedp.ID("people-q"), "张"))
	b.wait(t, "search result", `document.querySelector('#people-results button') !== null`)
	b.do(t, "add", chromedp.Click(chromedp.CSS(`#people-results button`)))
	b.wait(t, "counted", `document.getElementById("recipient-count").textContent.trim() === "1"`)
	b.do(t, "save as a draft", chromedp.Click(chromedp.ID("save-draft")))
	b.wait(t, "back on the list", `location.pathname === "/"`)
	drafts, _, err := st.List(t.Context(), nil, yidu.StateDraft, "", "", 10, nil)
	if err != nil || len(drafts) != 1 || drafts[0].Content == nil || !strings.Contains(drafts[0].Content.Markdown, "一年") ||
		len(drafts[0].Content.Attachments) != 1 || drafts[0].Content.ReadRule != yidu.ReadRuleAcknowledged {
		t.Fatalf("drafts = %+v, %v; want one keeping its text, attachment and rule", drafts, err)
	}
	id := drafts[0].MsgID

	b.do(t, "edit", chromedp.Navigate(ts.URL+"/new?edit="+id), chromedp.WaitVisible(chromedp.ID("cancel-notice")))
	b.wait(t, "the text, rule and attachment back", `document.getElementById("markdown").value.includes("考核周期为一年。") && document.getElementById("read-rule").value === "acknowledged" && document.querySelector("#attachment-list .name")?.textContent === "评分表.pdf" && !document.getElementById("fulltext").hidden`)
	b.wait(t, "the preview", `document.getElementById("pv-content").textContent.includes("考核周期为一年。")`)
	b.shot(t, "compose-draft-content-1280")
	b.do(t, "change the text", clearField("markdown"), chromedp.SendKeys(chromedp.ID("markdown"), "# 第四条\n\n考核周期为半年。"),
		chromedp.Click(chromedp.ID("save-draft")))
	b.wait(t, "back on the list", `location.pathname === "/"`)
	n, err := st.Get(t.Context(), nil, id)
	if err != nil || n.Content == nil || !strings.Contains(n.Content.Markdown, "半年") || len(n.Content.Attachments) != 1 || n.State != yidu.StateDraft {
		t.Fatalf("draft after the edit = %+v, %v", n, err)
	}
	if vs, _ := ns.List(t.Context(), "acme", id); len(vs) != 0 {
		t.Errorf("%d versions published of a draft", len(vs))
	}
	// Clearing the text and its attachment does not silently keep the
	// old text: the page says how to send without one, and saves nothing.
	b.do(t, "edit again", chromedp.Navigate(ts.URL+"/new?edit="+id), chromedp.WaitVisible(chromedp.ID("cancel-notice")))
	b.wait(t, "the text back", `document.getElementById("markdown").value.includes("半年")`)
	b.do(t, "clear the text", clearField("markdown"), chromedp.Click(chromedp.CSS("#attachment-list button")))
	b.wait(t, "no attachment", `document.querySelectorAll("#attachment-list li").length === 0`)
	b.do(t, "save", chromedp.Click(chromedp.ID("save-draft")))
	b.wait(t, "told", `document.getElementById("form-error").textContent.includes("取消后重新新建")`)
	if n2, err := st.Get(t.Context(), nil, id); err != nil || n2.Content == nil || !n2.UpdatedAt.Equal(n.UpdatedAt) {
		t.Errorf("the draft after saving without its text = %+v, %v; want unchanged", n2, err)
	}
	if p := b.console(); len(p) > 0 {
		t.Errorf("console errors: %q", p)
	}
}
