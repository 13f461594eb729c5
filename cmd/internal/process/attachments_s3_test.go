package process

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestS3Attachments: with attachments.s3 on a real S3 server (s3proxy in
// CI), an attachment uploaded through the API lands in the bucket (not
// in MySQL), the recipient's reading page sends them to a presigned URL
// that a plain GET reads the bytes from, a non-recipient gets no link,
// and the notice's evidence pack is built as without the bucket.
func TestS3Attachments(t *testing.T) {
	srv := testenv.S3(t)
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:  []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users: []fakewecom.User{{UserID: "zhangsan", Name: "张三"}, {UserID: "lisi", Name: "李四"}}})
	base := fakewecom.Start(t, fake)
	off := false
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
		c.Attachments.S3 = config.S3{Endpoint: srv.Endpoint, Bucket: srv.Bucket, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
			UseSSL: &off, PresignTTL: config.Duration(5 * time.Minute)}
	})
	if _, err := m.DB.Exec("INSERT IGNORE INTO users (corp_id, userid, name) VALUES (?, 'lisi', '李四')", testCorp); err != nil {
		t.Fatal(err)
	}
	data := append(twoPagePDF(), bytes.Repeat([]byte("% padding\n"), 30000)...)
	sum := content.Sum(data).String()
	att := uploadAttachment(t, m, "评分表.pdf", data)

	o, err := srv.Client.GetObject(t.Context(), srv.Bucket, "attachments/"+sum, minio.GetObjectOptions{})
	testenv.Check(t, "GetObject", err)
	kept, err := io.ReadAll(o)
	o.Close()
	if err != nil || !bytes.Equal(kept, data) {
		t.Fatalf("the bucket holds %d bytes, %v; want the upload", len(kept), err)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM attachment_chunks")[0]; n != 0 {
		t.Errorf("MySQL holds %d chunks; want none (the bytes are in the bucket)", n)
	}

	const msg = "s3-rule"
	reg := map[string]any{"msgid": msg, "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "# 第一条\n\n九点上班。", "attachments": []string{att}}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}

	attPath := "/r/hr/" + msg + "/a/" + sum
	// link GETs the attachment's path as rd's browser, not following the
	// redirect.
	link := func(rd *reader) *http.Response {
		t.Helper()
		c := *rd.c
		c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		req, _ := http.NewRequest("GET", rd.origin+attPath, nil)
		req.Header.Set("User-Agent", wecomUA)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	zs := newReader(t, addr, "zhangsan")
	zs.open("/r/hr/" + msg)
	resp := link(zs)
	to := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(to, "http://"+srv.Endpoint+"/") || !strings.Contains(to, "X-Amz-Signature=") {
		t.Fatalf("attachment = %d %q; want 302 to a presigned URL of the bucket", resp.StatusCode, to)
	}
	if strings.Contains(to, srv.SecretKey) {
		t.Fatal("the link carries the secret key")
	}
	got, err := http.Get(to)
	testenv.Check(t, "GET presigned", err)
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if got.StatusCode != 200 || !bytes.Equal(b, data) || got.Header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("GET presigned = %d %q, %d bytes; want the PDF", got.StatusCode, got.Header.Get("Content-Type"), len(b))
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/r/hr/"+msg, nil)
	req.Header.Set("User-Agent", wecomUA)
	if page, err := zs.c.Do(req); err != nil || !strings.Contains(page.Header.Get("Content-Security-Policy"), "connect-src 'self' http://"+srv.Endpoint) {
		t.Errorf("the page's CSP does not let pdf.js fetch from the bucket: %v", err)
	} else {
		page.Body.Close()
	}

	ls := newReader(t, addr, "lisi")
	if resp := link(ls); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Location") != "" {
		t.Errorf("a non-recipient = %d %q; want 404 and no link", resp.StatusCode, resp.Header.Get("Location"))
	}

	// The evidence pack of the notice is built from the versions, which
	// name the attachment by its hash.
	var rec evidence.Record
	if code := api(t, m, "GET", "/messages/"+msg+"/evidence/zhangsan", nil, &rec); code != http.StatusOK || len(rec.Versions) != 1 {
		t.Fatalf("evidence = %d, %d versions; want 200 and one", code, len(rec.Versions))
	}
	zr := getAPI(t, m, "/messages/"+msg+"/evidence.zip")
	_, vkey, err := LedgerKey(m.Config.Ledger)
	if err != nil {
		t.Fatal(err)
	}
	if crep, err := evidence.Check(bytes.NewReader(zr), int64(len(zr)), evidence.CheckOptions{Key: vkey}); err != nil || crep.People != 1 {
		t.Errorf("Check(ZIP) = %+v, %v; want the one recipient, verified", crep, err)
	}
}
