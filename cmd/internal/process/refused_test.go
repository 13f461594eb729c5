package process

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"testing"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
)

const viewerTok = "refused-viewer-0123456789abcdef"

// uploadAs posts a one-file multipart upload through app with tok's
// bearer and answers the status.
func uploadAs(t *testing.T, m *Main, tok, app string) int {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", "制度.txt")
	testenv.Check(t, "multipart", err)
	_, _ = fw.Write([]byte("第一条 九点上班。\n"))
	testenv.Check(t, "multipart", mw.Close())
	req, _ := http.NewRequest("POST", "http://"+m.DashboardAddr+"/api/v1/attachments?app="+app, &body)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	testenv.Check(t, "upload", err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestRefusedActsAudited is finding 7's "a refused PATCH, upload or
// template change leaves no audit row", played through the running
// dashboard: a viewer of the whole corp PATCHes a sent notice's content,
// uploads an attachment, creates, changes and deletes a template. Each
// is refused, changes nothing, and leaves exactly one row in
// audit_events with outcome refused, the act's action and the caller as
// actor (a sender's refused PATCH outside their audience:
// TestGateSenderAudienceOnEveryAct).
func TestRefusedActsAudited(t *testing.T) {
	m, _ := mustRunGate(t, func(c *config.Config) {
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "viewer", Token: viewerTok, Grant: config.Grant{Role: "viewer", Corp: testCorp, Departments: []int64{1}}})
	})
	if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "sent-1", "app": "hr", "title": "考勤制度",
		"audience": map[string]any{"departments": []int64{3}}, "send": true, "content": map[string]any{"markdown": "第一版"}}, nil); code != http.StatusCreated {
		t.Fatalf("send sent-1 = %d", code)
	}
	var tpl struct {
		ID int64 `json:"id"`
	}
	if code := api(t, m, "POST", "/templates", map[string]any{"app": "hr", "name": "考勤", "title": "考勤制度"}, &tpl); code != http.StatusCreated || tpl.ID == 0 {
		t.Fatalf("create a template = %d %+v", code, tpl)
	}
	tplPath := fmt.Sprintf("/templates/%d", tpl.ID)

	acts := []struct {
		name, action string
		do           func() int
	}{
		{"viewer PATCHes a sent notice's content", "edit", func() int {
			code, _ := apiAs(t, m, viewerTok, "PATCH", "/messages/sent-1", map[string]any{"content": map[string]any{"markdown": "改写"}, "reacknowledge": true})
			return code
		}},
		{"viewer uploads", "upload", func() int { return uploadAs(t, m, viewerTok, "hr") }},
		{"viewer creates a template", "template", func() int {
			code, _ := apiAs(t, m, viewerTok, "POST", "/templates", map[string]any{"app": "hr", "name": "冒名", "title": "冒名"})
			return code
		}},
		{"viewer changes a template", "template", func() int {
			code, _ := apiAs(t, m, viewerTok, "PUT", tplPath, map[string]any{"app": "hr", "name": "考勤", "title": "改写"})
			return code
		}},
		{"viewer deletes a template", "template", func() int {
			code, _ := apiAs(t, m, viewerTok, "DELETE", tplPath, nil)
			return code
		}},
	}
	refused := func(action string) int {
		return testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM audit_events WHERE actor = 'viewer' AND action = ? AND outcome = 'refused'", action)[0]
	}
	for _, a := range acts {
		before := refused(a.action)
		if code := a.do(); code < 400 || code >= 500 {
			t.Errorf("%s = %d; want it refused (4xx)", a.name, code)
		}
		if got := refused(a.action) - before; got != 1 {
			t.Errorf("%s left %d %s/refused rows by the viewer in audit_events; want 1", a.name, got, a.action)
		}
	}

	// Nothing changed.
	var c struct {
		Versions int `json:"versions"`
	}
	if code := api(t, m, "GET", "/messages/sent-1/content", nil, &c); code != http.StatusOK || c.Versions != 1 {
		t.Errorf("sent-1's content = %d %+v; want version 1 alone", code, c)
	}
	var got struct {
		Title string `json:"title"`
	}
	if code := api(t, m, "GET", tplPath, nil, &got); code != http.StatusOK || got.Title != "考勤制度" {
		t.Errorf("the template = %d %+v; want it as created", code, got)
	}
	for _, q := range []string{"SELECT COUNT(*) FROM attachments", "SELECT COUNT(*) FROM notice_templates WHERE name = '冒名'"} {
		if n := testenv.Column[int](t, m.DB, q)[0]; n != 0 {
			t.Errorf("%s = %d; want 0", q, n)
		}
	}
}
