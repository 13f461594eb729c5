package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
)

// newContentFixture is the fixture with the real attachment and notice
// stores on MariaDB.
func newContentFixture(t *testing.T) (*fixture, *attachment.Store) {
	t.Helper()
	var atts *attachment.Store
	f := newFixtureOpts(t, false, func(o *deps) {
		db := testenv.MySQL(t)
		var err error
		atts, err = attachment.New(db, attachment.Options{Now: o.Now})
		testenv.Check(t, "attachment.New", err)
		ns, err := notice.New(db, atts, notice.Options{Now: o.Now})
		testenv.Check(t, "notice.New", err)
		o.Attachments, o.Notices = atts, ns
	})
	return f, atts
}

func TestContentVersions(t *testing.T) {
	f, atts := newContentFixture(t)
	a, err := atts.Put(t.Context(), "acme", "hr", "评分表.pdf", strings.NewReader("%PDF-1.7\nscores"))
	testenv.Check(t, "Put", err)

	reg := `{"msgid":"perf","app":"hr","title":"2026年度绩效考核办法","audience":{"userids":["zhangsan"]},"send":true,
		"content":{"markdown":"# 第四条\n\n考核周期为一年。<img src=x onerror=alert(1)>","attachments":["` + a.ID + `"]},
		"read_rule":"acknowledged","min_read_seconds":10}`
	w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(reg))
	if w.Code != http.StatusCreated {
		t.Fatalf("register = %d: %s", w.Code, w.Body)
	}
	get := func(target string) versionJSON {
		t.Helper()
		w := f.ok(t, "GET", target)
		var v versionJSON
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v1 := get("/api/v1/messages/perf/content")
	if v1.Version != 1 || v1.ReadRule != "acknowledged" || v1.MinReadSeconds != 10 || len(v1.Attachments) != 1 ||
		strings.Contains(v1.HTML, "onerror") || !strings.Contains(v1.HTML, "考核周期为一年。") || len(v1.SHA256) != 64 {
		t.Fatalf("v1 = %+v", v1)
	}
	// A replay of the POST keeps version 1.
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(reg)); w.Code != http.StatusOK {
		t.Fatalf("replayed register = %d: %s", w.Code, w.Body)
	}

	patch := func(body string) *jsonAnswer {
		t.Helper()
		w := f.do(t, "PATCH", "/api/v1/messages/perf", acmeToken, strings.NewReader(body))
		return &jsonAnswer{code: w.Code, body: w.Body.String()}
	}
	if got := patch(`{"content":{"markdown":"# 第四条\n\n考核周期为半年。","attachments":["` + a.ID + `"]},"reacknowledge":true}`); got.code != 200 {
		t.Fatalf("material PATCH = %d: %s", got.code, got.body)
	}
	v2 := get("/api/v1/messages/perf/content")
	if v2.Version != 2 || !v2.Reacknowledge || v2.Material != 2 || v2.Versions != 2 || v2.SHA256 == v1.SHA256 || v2.Title != v1.Title {
		t.Fatalf("v2 = %+v", v2)
	}
	if old := get("/api/v1/messages/perf/content?v=1"); old.SHA256 != v1.SHA256 || old.Markdown != v1.Markdown || old.Material != 2 {
		t.Fatalf("?v=1 = %+v; want version 1 as sent", old)
	}
	if got := patch(`{"content":{"markdown":"# 第四条\n\n考核周期为半年（标点）。"},"reacknowledge":false}`); got.code != 200 {
		t.Fatalf("non-material PATCH = %d: %s", got.code, got.body)
	}
	if v3 := get("/api/v1/messages/perf/content"); v3.Version != 3 || v3.Material != 2 {
		t.Fatalf("v3 = %+v; want version 3, material still 2", v3)
	}

	for name, tc := range map[string]struct {
		method, target, body string
		want                 int
	}{
		"content on a draft, no campaigns":       {"POST", "/api/v1/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"x"}}`, 503},
		"unknown read_rule":                      {"POST", "/api/v1/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"send":true,"content":{"markdown":"x"},"read_rule":"glanced"}`, 400},
		"read_rule without content":              {"POST", "/api/v1/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"send":true,"read_rule":"link"}`, 400},
		"min_read_seconds too long":              {"POST", "/api/v1/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"send":true,"content":{"markdown":"x"},"min_read_seconds":3601}`, 400},
		"unknown attachment":                     {"POST", "/api/v1/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"send":true,"content":{"markdown":"x","attachments":["att_nope"]}}`, 400},
		"patch with the audience":                {"PATCH", "/api/v1/messages/perf", `{"content":{"markdown":"y"},"audience":{"all":true}}`, 400},
		"patch of a notice sent without content": {"PATCH", "/api/v1/messages/hello", `{"content":{"markdown":"y"}}`, 400},
		"patch of another corp's notice":         {"PATCH", "/api/v1/messages/secret", `{"content":{"markdown":"y"}}`, 404},
		"version 0":                              {"GET", "/api/v1/messages/perf/content?v=0", "", 400},
		"version 4":                              {"GET", "/api/v1/messages/perf/content?v=4", "", 404},
		"no content":                             {"GET", "/api/v1/messages/hello/content", "", 404},
	} {
		var body *strings.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		var w interface{ Result() *http.Response }
		if body != nil {
			w = f.do(t, tc.method, tc.target, acmeToken, body)
		} else {
			w = f.do(t, tc.method, tc.target, acmeToken, nil)
		}
		if got := w.Result().StatusCode; got != tc.want {
			t.Errorf("%s: %s %s = %d; want %d", name, tc.method, tc.target, got, tc.want)
		}
	}
}

type jsonAnswer struct {
	code int
	body string
}

// TestDraftKeepsContent: a draft keeps its full text, read rule and
// attachments, shows them back, previews them as version 1 will be,
// and takes a PATCH of them; none is published before it is sent. Each
// hostile input (over the limits, an unknown or another corp's upload, a
// url of its own beside the text, an unknown read rule, reacknowledge on
// a draft) is a 4xx naming its field and writes nothing.
func TestDraftKeepsContent(t *testing.T) {
	f, _ := newCampaignFixture(t)
	withAudienceDirectory(t, f)
	db := testenv.MySQL(t)
	atts, err := attachment.New(db, attachment.Options{})
	testenv.Check(t, "attachment.New", err)
	ns, err := notice.New(db, atts, notice.Options{})
	testenv.Check(t, "notice.New", err)
	f.rewire(t, func(d *deps) {
		d.Notices = ns
		d.ReadingPage = func(app, msgID string) string { return "https://read.example.com/r/" + app + "/" + msgID }
	})
	a, err := atts.Put(t.Context(), "acme", "hr", "评分表.pdf", strings.NewReader("%PDF-1.7\nscores"))
	testenv.Check(t, "Put", err)
	other, err := atts.Put(t.Context(), "globex", "ops", "x.pdf", strings.NewReader("%PDF-1.7\nother"))
	testenv.Check(t, "Put", err)

	code, j := f.api(t, "POST", "/messages", `{"msgid":"d1","app":"hr","title":"2026年度绩效考核办法","audience":{"userids":["zhangsan"]},"draft":true,
		"content":{"markdown":"# 第四条\n\n考核周期为一年。<script>alert(1)</script>","attachments":["`+a.ID+`"]},"read_rule":"read_to_end","min_read_seconds":30}`)
	if code != 201 || j["state"] != "draft" || j["read_rule"] != "read_to_end" || j["min_read_seconds"] != float64(30) || j["url"] != f.deps.ReadingPage("hr", "d1") {
		t.Fatalf("draft with content = %d %v", code, j)
	}
	if c, _ := j["content"].(map[string]any); c == nil || !strings.Contains(c["markdown"].(string), "一年") || len(c["attachments"].([]any)) != 1 {
		t.Fatalf("the draft's content = %v", j["content"])
	}
	code, pv := f.api(t, "GET", "/messages/d1/content", "")
	if code != 200 || pv["versions"] != float64(0) || !strings.Contains(pv["html"].(string), "考核周期为一年。") || strings.Contains(pv["html"].(string), "<script") || pv["read_rule"] != "read_to_end" {
		t.Fatalf("preview of the draft's content = %d %v", code, pv)
	}
	code, j = f.api(t, "PATCH", "/messages/d1", `{"content":{"markdown":"# 第四条\n\n考核周期为半年。","attachments":[]},"min_read_seconds":0}`)
	if c, _ := j["content"].(map[string]any); code != 200 || c == nil || !strings.Contains(c["markdown"].(string), "半年") || len(c["attachments"].([]any)) != 0 ||
		j["read_rule"] != "read_to_end" || j["min_read_seconds"] != float64(0) {
		t.Fatalf("PATCH the draft's content = %d %v; want the new text, the read rule kept", code, j)
	}
	if code, j = f.api(t, "PATCH", "/messages/d1", `{"read_rule":"acknowledged"}`); code != 200 || j["read_rule"] != "acknowledged" {
		t.Fatalf("PATCH the read rule alone = %d %v", code, j)
	}
	if _, err := ns.Get(t.Context(), "acme", "d1", 0); !errors.Is(err, notice.ErrNotFound) {
		t.Fatalf("a draft's content was published before it was sent: %v", err)
	}
	if code, j := f.api(t, "GET", "/messages?state=draft", ""); code != 200 || strings.Contains(fmt.Sprint(j), "半年") {
		t.Errorf("the list carries the drafts' text: %d %v", code, j)
	}

	fingerprint := func() string {
		return testenv.Column[string](t, db, `SELECT CONCAT_WS('|', COUNT(*), COALESCE(SUM(CRC32(CONCAT_WS('|', msgid, title, url, COALESCE(content, ''), updated_at))), 0)) FROM campaigns`)[0] +
			"/" + testenv.Column[string](t, db, `SELECT COUNT(*) FROM notice_versions`)[0]
	}
	before := fingerprint()
	big := strings.Repeat("长", 70000) // 210,000 bytes
	for name, tc := range map[string]struct {
		method, target, body string
		code                 int
		field                string
	}{
		"draft over 200 KB":         {"POST", "/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"` + big + `"}}`, 400, "content.markdown"},
		"draft, unknown upload":     {"POST", "/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"x","attachments":["att_nope"]}}`, 400, "content.attachments"},
		"draft, another corp's":     {"POST", "/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"x","attachments":["` + other.ID + `"]}}`, 400, "content.attachments"},
		"scheduled, upload twice":   {"POST", "/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"send":true,"send_at":"2026-03-03T09:00:00+08:00","content":{"markdown":"x","attachments":["` + a.ID + `","` + a.ID + `"]}}`, 400, "content.attachments"},
		"draft with a url":          {"POST", "/messages", `{"app":"hr","title":"t","url":"https://intranet.example.com/1","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"x"}}`, 400, "url"},
		"draft, unknown read rule":  {"POST", "/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"x"},"read_rule":"glanced"}`, 400, "read_rule"},
		"draft, min_read too long":  {"POST", "/messages", `{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"draft":true,"content":{"markdown":"x"},"min_read_seconds":3601}`, 400, "min_read_seconds"},
		"patch over 200 KB":         {"PATCH", "/messages/d1", `{"content":{"markdown":"` + big + `"}}`, 400, "content.markdown"},
		"patch, unknown upload":     {"PATCH", "/messages/d1", `{"content":{"markdown":"x","attachments":["att_nope"]}}`, 400, "content.attachments"},
		"patch, eleven uploads":     {"PATCH", "/messages/d1", `{"content":{"markdown":"x","attachments":["a1","a2","a3","a4","a5","a6","a7","a8","a9","a10","a11"]}}`, 400, "content.attachments"},
		"patch, a url of its own":   {"PATCH", "/messages/d1", `{"url":"https://intranet.example.com/1"}`, 400, "url"},
		"patch, reacknowledge":      {"PATCH", "/messages/d1", `{"content":{"markdown":"x"},"reacknowledge":true}`, 400, "reacknowledge"},
		"patch, unknown read rule":  {"PATCH", "/messages/d1", `{"read_rule":"glanced"}`, 400, "read_rule"},
		"patch, not UTF-8 markdown": {"PATCH", "/messages/d1", `{"content":{"markdown":"\u0000"}}`, 400, "content.markdown"},
	} {
		code, j := f.api(t, tc.method, tc.target, tc.body)
		if code != tc.code || j["field"] != tc.field {
			t.Errorf("%s: %d %v; want %d naming %s", name, code, j, tc.code, tc.field)
		}
	}
	if after := fingerprint(); after != before {
		t.Errorf("refused requests wrote: %s, then %s", before, after)
	}
}

// TestContentLinksToPage: with a reading page, a notice with content
// links its card there (a msgid chosen if none was named), and a url of
// its own is refused before anything is sent.
func TestContentLinksToPage(t *testing.T) {
	f, _ := newContentFixture(t)
	f.rewire(t, func(d *deps) {
		d.ReadingPage = func(app, msgID string) string { return "https://read.example.com/r/" + app + "/" + msgID }
	})
	w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(`{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"send":true,"content":{"markdown":"x"}}`))
	var m struct {
		MsgID string `json:"msgid"`
		URL   string `json:"url"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil || w.Code != 201 {
		t.Fatalf("register = %d: %s", w.Code, w.Body)
	}
	if m.MsgID == "" || m.URL != "https://read.example.com/r/hr/"+m.MsgID {
		t.Fatalf("msgid %q url %q; want the reading page's", m.MsgID, m.URL)
	}
	w = f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(`{"msgid":"own","app":"hr","title":"t","url":"https://x.example.com/","audience":{"userids":["zhangsan"]},"send":true,"content":{"markdown":"x"}}`))
	var j map[string]string
	_ = json.Unmarshal(w.Body.Bytes(), &j)
	if w.Code != 400 || j["field"] != "url" {
		t.Fatalf("content with a url of its own = %d %v; want 400 naming url", w.Code, j)
	}
	if w := f.do(t, "GET", "/api/v1/messages/own", acmeToken, nil); w.Code != 404 {
		t.Fatalf("the refused notice exists: %d", w.Code)
	}
}
