package process

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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

// wecomUA is the User-Agent of WeCom's built-in browser on a phone.
const wecomUA = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 wxwork/4.1.22 MicroMessenger/7.0.1 Language/zh ColorScheme/Light"

// twoPagePDF is a valid two-page PDF (Helvetica, one line a page).
func twoPagePDF() []byte {
	stream := func(s string) string { return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(s), s) }
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 400] /Contents 5 0 R /Resources << /Font << /F1 7 0 R >> >> >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 400] /Contents 6 0 R /Resources << /Font << /F1 7 0 R >> >> >>",
		stream("BT /F1 24 Tf 40 300 Td (Scores: page 1) Tj ET"),
		stream("BT /F1 24 Tf 40 300 Td (Page 2: the end) Tj ET"),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// uploadAttachment posts data as an attachment of app hr; it returns the id.
func uploadAttachment(t *testing.T, m *Main, name string, data []byte) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, _ := mw.CreateFormFile("file", name)
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", "http://"+m.DashboardAddr+"/api/v1/attachments?app=hr", &body)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload %s = %d, %v", name, resp.StatusCode, err)
	}
	return a.ID
}

// TestBrowserReadingPage: a member opens a notice's reading page in
// chromium at a phone's width with WeCom's User-Agent, signs in through
// the fake WeCom's OAuth2 page, and reads the text and a two-page PDF
// drawn by the vendored pdf.js under their watermark, with no sideways
// scroll. Screenshots go to $YIDU_ARTIFACTS.
func TestBrowserReadingPage(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	dir := artifactsDir(t)
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:        []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}, {UserID: "lisi", Name: "李四", Departments: []int{1}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	// The directory as a sync has it: the watermark names the reader.
	wd, err := wecom.NewDirectory(wecom.App{CorpID: testCorp, AgentID: testAgent, Secret: pageSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "NewDirectory", err)
	syncer, err := idmap.NewSyncer(m.Mapper, map[string]idmap.Directory{testCorp: wd}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	if _, err := syncer.Sync(context.Background(), testCorp); err != nil {
		t.Fatalf("directory sync: %v", err)
	}
	att := uploadAttachment(t, m, "评分表.pdf", twoPagePDF())
	md := "# 2026年度绩效考核办法\n\n第四条 考核周期为一年，自每年1月1日起至12月31日止。各部门负责人应于每季度末完成本部门成员的季度评估，并将结果报人力资源部备案。\n\n" +
		"| 等级 | 分数 | 比例 |\n|:--|--:|--:|\n| A 优秀 | 90 以上 | 20% |\n| B 良好 | 75–89 | 50% |\n| C 待改进 | 75 以下 | 30% |\n\n" +
		strings.Repeat("第五条 评分细则见附件《评分表》。员工对考核结果有异议的，可在结果公布后五个工作日内提出复核申请。\n\n", 6)
	reg := map[string]any{"msgid": "perf-2026", "app": "hr", "title": "2026年度绩效考核办法", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": md, "attachments": []string{att}}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send with content = %d; want 201", code)
	}
	// The card's link is the tracked link to the reading page: the
	// browser opens where it lands (the tracked link's hop through WeCom's
	// own https host is TestReadingPageEndToEnd's).
	pageURL := "http://" + addr + "/r/hr/perf-2026"
	if sent := fake.Sent(); len(sent) != 1 || !strings.Contains(string(sent[0].Raw), url.QueryEscape(pageURL)) {
		t.Fatalf("the card does not link to the reading page %s", pageURL)
	}

	b := mustStartBrowser(t, 90*time.Second)
	b.do(t, "phone with WeCom's browser", chromedp.EmulateViewport(390, 844), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: wecomUA})
		return err
	}))
	b.do(t, "open the page", chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS(`a[data-userid="zhangsan"]`)))
	if got := eval[string](t, b, `location.pathname`); got != "/connect/oauth2/authorize" {
		t.Fatalf("without a session the page went to %s; want WeCom's OAuth2 authorization", got)
	}
	b.do(t, "sign in as zhangsan", chromedp.Click(chromedp.CSS(`a[data-userid="zhangsan"]`)), chromedp.WaitVisible(chromedp.ID("notice-end")))
	b.wait(t, "the reading page", `location.pathname === "/r/hr/perf-2026" && document.getElementById("notice-end") !== null`)
	if got := eval[string](t, b, `document.getElementById("watermark").textContent`); !strings.Contains(got, "张三 zhangsan") {
		t.Errorf("watermark = %.80q; want the reader's name and UserID", got)
	}
	if !eval[bool](t, b, `document.querySelector("#notice-text table td[align=right]") !== null && document.getElementById("notice-text").textContent.includes("考核周期为一年")`) {
		t.Error("the text or its table is not on the page")
	}
	b.wait(t, "the PDF drawn, two pages", `document.querySelector(".pdf-pages")?.dataset.pages === "2" && document.querySelectorAll(".pdf-pages canvas").length === 2`)
	if !eval[bool](t, b, `(() => { const c = document.querySelector(".pdf-pages canvas.last-page"); const x = c.getContext("2d").getImageData(0, 0, c.width, c.height).data; for (let i = 0; i < x.length; i += 4) if (x[i] < 128) return true; return false; })()`) {
		t.Error("the PDF's last page is blank: pdf.js drew nothing")
	}
	if w := eval[float64](t, b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`); w > 0 {
		t.Errorf("the page scrolls sideways by %.0f px at 390 px", w)
	}
	b.screenshot(t, dir, "reading-page-390")

	// #ack stays disabled until the text's end and the PDF's last page
	// were both on screen.
	ackDisabled := `document.getElementById("ack").disabled`
	if !eval[bool](t, b, ackDisabled) {
		t.Fatal("#ack is enabled at the top of the page")
	}
	eval[bool](t, b, `(document.querySelector(".pdf-pages canvas").scrollIntoView({block: "start"}), true)`)
	time.Sleep(300 * time.Millisecond)
	if !eval[bool](t, b, ackDisabled) || eval[bool](t, b, `document.querySelector(".pdf-end").getBoundingClientRect().top < innerHeight`) {
		t.Fatal("#ack is enabled (or the PDF's end is on screen) at the PDF's first page")
	}
	eval[bool](t, b, `(document.querySelector(".pdf-end").scrollIntoView({block: "end"}), true)`)
	time.Sleep(300 * time.Millisecond)
	if !eval[bool](t, b, ackDisabled) && eval[bool](t, b, `document.getElementById("notice-end").getBoundingClientRect().top > innerHeight`) {
		t.Fatal("#ack is enabled with the PDF's end on screen but not the text's end")
	}
	eval[bool](t, b, `(document.getElementById("ack").scrollIntoView({block: "end"}), true)`)
	b.wait(t, "#ack enabled once both ends were reached", `!document.getElementById("ack").disabled`)
	if png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot()); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "reading-page-390-end.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var before struct {
		Read int `json:"read"`
	}
	if api(t, m, "GET", "/messages/perf-2026/progress", nil, &before); before.Read != 0 {
		t.Errorf("read before the acknowledgement = %d; want 0 (read_rule acknowledged)", before.Read)
	}
	b.do(t, "acknowledge", chromedp.Click(chromedp.ID("ack")))
	b.wait(t, "acknowledged", `document.getElementById("ack").classList.contains("done") && document.getElementById("ack").textContent.includes("已确认知悉")`)
	if png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot()); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "reading-page-390-acknowledged.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The dashboard counts each signal, and the archive keeps the
	// version read with the reader's address and browser.
	testenv.WaitFor(t, 10*time.Second, "link, read_to_end and acknowledged on the dashboard", func() bool {
		var p struct {
			Read     int            `json:"read"`
			BySignal map[string]int `json:"by_signal"`
		}
		// read_rule acknowledged: the acknowledgement is the read.
		return api(t, m, "GET", "/messages/perf-2026/progress", nil, &p) == http.StatusOK && p.Read == 1 &&
			p.BySignal["link"] == 1 && p.BySignal["read_to_end"] == 1 && p.BySignal["acknowledged"] == 1
	})
	testenv.WaitFor(t, 20*time.Second, "page_signals in MySQL", func() bool {
		rows := testenv.Column[string](t, m.DB, "SELECT CONCAT(source, '/', version, '/', ip, '/', user_agent) FROM page_signals WHERE msgid = 'perf-2026' ORDER BY source")
		return len(rows) == 3 && strings.HasPrefix(rows[0], "3/1/127.0.0.1/") && strings.HasPrefix(rows[1], "5/1/") && strings.HasPrefix(rows[2], "6/1/") && strings.HasSuffix(rows[2], wecomUA)
	})

	// A non-recipient gets 404.
	b.do(t, "sign out", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))
	b.do(t, "open as lisi", chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS(`a[data-userid="lisi"]`)),
		chromedp.Click(chromedp.CSS(`a[data-userid="lisi"]`)))
	deadline := time.Now().Add(10 * time.Second)
	for {
		// Evaluations during the sign-in's redirects find no context:
		// look again until the last page stands.
		got, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`location.pathname === "/r/hr/perf-2026" && document.body.textContent.includes("未找到该通知")`))
		if err == nil && got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lisi's page is not a 404 (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if eval[bool](t, b, `document.body.textContent.includes("考核")`) {
		t.Error("a non-recipient sees the text")
	}
	b.screenshot(t, dir, "reading-page-390-not-recipient")
	if p := b.consoleProblems(); len(p) > 0 {
		t.Logf("console: %q", p)
	}
}
