package process

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// largePDF is a valid two-page PDF of about size bytes: an object no
// page uses, a stream of padding, sits between the first page's contents
// and the second's, so the second page's text and the cross-reference
// table are far from the first bytes.
func largePDF(size int) []byte {
	stream := func(s string) string { return fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(s), s) }
	pad := strings.Repeat("% padding that pdf.js need not read when it reads in ranges\n", size/60)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 400] /Contents 5 0 R /Resources << /Font << /F1 7 0 R >> >> >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 300 400] /Contents 6 0 R /Resources << /Font << /F1 7 0 R >> >> >>",
		stream("BT /F1 24 Tf 40 300 Td (Scores: page 1) Tj ET"),
		stream("BT /F1 24 Tf 40 300 Td (Page 2: the end) Tj ET"),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
		stream(pad),
	}
	// Written in this order: the padding (object 8) after the first
	// page's contents.
	order := []int{0, 1, 2, 3, 4, 7, 5, 6}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for _, i := range order {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, objs[i])
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

// TestBrowserPDFRanges: the reading page's pdf.js reads a PDF of 1 MB in
// 64 KiB chunks (page.js: disableStream, disableAutoFetch,
// rangeChunkSize) from the attachment's URL, which answers the ranges,
// and draws both pages having read only the chunks they need; opened again, the attachment comes from the
// browser's cache or a 304, never 200 with its bytes again.
func TestBrowserPDFRanges(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:  []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users: []fakewecom.User{{UserID: "zhangsan", Name: "张三"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	pdf := largePDF(1 << 20)
	att := uploadAttachment(t, m, "评分表.pdf", pdf)
	reg := map[string]any{"msgid": "ranges", "app": "hr", "title": "评分表", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "# 评分表\n\n见附件。", "attachments": []string{att}}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	pageURL := "http://" + addr + "/r/hr/ranges"
	b := mustStartBrowser(t, 90*time.Second)
	b.do(t, "phone with WeCom's browser", chromedp.EmulateViewport(390, 844), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: wecomUA})
		return err
	}))
	b.do(t, "open the page", chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.CSS(`a[data-userid="zhangsan"]`)))
	b.do(t, "sign in as zhangsan", chromedp.Click(chromedp.CSS(`a[data-userid="zhangsan"]`)), chromedp.WaitVisible(chromedp.ID("notice-end")))
	drawn := `document.querySelector(".pdf-pages")?.dataset.pages === "2" && document.querySelectorAll(".pdf-pages canvas").length === 2`
	b.wait(t, "the PDF drawn, two pages", drawn)
	// What the page fetched of the attachment: the first GET (cut once
	// its headers showed ranges), then ranges of 64 KiB.
	fetched := `performance.getEntriesByType("resource").filter(e => e.name.includes("/a/")).map(e => e.encodedBodySize)`
	sizes := eval[[]float64](t, b, fetched)
	if len(sizes) < 3 {
		t.Fatalf("the attachment was fetched %d times (body sizes %v); want its first GET, then ranges", len(sizes), sizes)
	}
	// Only the chunks the two pages need: the padding between them is
	// never asked for. The first GET is cut once its headers show ranges;
	// over loopback the whole file can arrive before pdf.js cuts it (a
	// phone's network is slower than pdf.js), so what counts is what the
	// page asked for after it: ranges, under half the file.
	var ranged float64
	for _, s := range sizes[1:] {
		ranged += s
	}
	if ranged >= float64(len(pdf))/2 {
		t.Errorf("the page asked for %.0f bytes of a %d-byte PDF in ranges (body sizes %v); want only the chunks its pages need", ranged, len(pdf), sizes)
	}
	if sizes[0] >= float64(len(pdf)) {
		t.Logf("the first GET arrived whole (%.0f bytes) before pdf.js cut it: loopback is faster than its cut", sizes[0])
	}
	if fail := eval[string](t, b, `document.querySelector(".pdf-pages").dataset.error || ""`); fail != "" {
		t.Fatalf("pdf.js: %s", fail)
	}
	// Opened again: the browser keeps the attachment (immutable).
	b.do(t, "open the page again", chromedp.Navigate(pageURL), chromedp.WaitVisible(chromedp.ID("notice-end")))
	b.wait(t, "the PDF drawn again", drawn)
	again := eval[[]float64](t, b, `performance.getEntriesByType("resource").filter(e => e.name.includes("/a/")).map(e => e.transferSize > 1024 ? e.encodedBodySize : 0)`)
	var over float64
	for _, s := range again {
		over += s
	}
	if over >= float64(len(pdf))/2 {
		t.Errorf("opened again, the page downloaded %.0f bytes of the attachment over the network (entries %v); want it mostly from the cache", over, again)
	}
}

// TestBrowserPDFFromS3: with attachments.s3, chromium's pdf.js follows the
// attachment's 302 to the bucket's presigned URL (s3proxy, CORS open, as
// docs/deploy.md asks of a bucket) and draws the PDF: the page's CSP
// allows the bucket's origin and the bucket answers the redirected,
// cross-origin fetch.
func TestBrowserPDFFromS3(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped with -short")
	}
	srv := testenv.S3(t)
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:  []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users: []fakewecom.User{{UserID: "zhangsan", Name: "张三"}}})
	base := fakewecom.Start(t, fake)
	off := false
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
		c.Attachments.S3 = config.S3{Endpoint: srv.Endpoint, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, UseSSL: &off}
	})
	att := uploadAttachment(t, m, "评分表.pdf", largePDF(200<<10))
	reg := map[string]any{"msgid": "from-s3", "app": "hr", "title": "评分表", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "# 评分表\n\n见附件。", "attachments": []string{att}}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	b := mustStartBrowser(t, 90*time.Second)
	b.do(t, "phone with WeCom's browser", chromedp.EmulateViewport(390, 844), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetUserAgentOverride, emulation.SetUserAgentOverrideParams{UserAgent: wecomUA})
		return err
	}))
	b.do(t, "open the page", chromedp.Navigate("http://"+addr+"/r/hr/from-s3"), chromedp.WaitVisible(chromedp.CSS(`a[data-userid="zhangsan"]`)))
	b.do(t, "sign in as zhangsan", chromedp.Click(chromedp.CSS(`a[data-userid="zhangsan"]`)), chromedp.WaitVisible(chromedp.ID("notice-end")))
	b.wait(t, "the PDF drawn, or failed", `document.querySelector(".pdf-pages")?.dataset.pages === "2" || !!document.querySelector(".pdf-pages")?.dataset.error`)
	if fail := eval[string](t, b, `document.querySelector(".pdf-pages").dataset.error || ""`); fail != "" {
		t.Fatalf("pdf.js: %s", fail)
	}
	// The receiver sent the page to the bucket for the bytes (it never
	// serves a bucket's blob itself).
	if typ := evalAwait[string](t, b, `fetch(document.querySelector(".pdf-pages").dataset.src, {redirect: "manual"}).then(r => r.type)`); typ != "opaqueredirect" {
		t.Errorf("the attachment's URL answered %q; want a redirect (to the bucket)", typ)
	}
}
