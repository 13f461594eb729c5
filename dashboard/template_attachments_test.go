package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard/internal/compose"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestTemplateAttachments: a template keeps its attachments (uploads of
// its corp only: another id is refused at attachments and nothing is
// saved); GET gives their names and sizes, so 从模板新建 shows them; a
// notice made from it carries them to its reading page (its content
// version), on MariaDB.
func TestTemplateAttachments(t *testing.T) {
	f, atts := newContentFixture(t)
	tpls := store.NewTemplates(testenv.MySQL(t), []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1000002}}, f.clock.Now)
	f.rewire(t, func(d *deps) { d.Templates, d.Files = tpls, atts })
	a, err := atts.Put(t.Context(), "acme", "hr", "考勤表.pdf", strings.NewReader("%PDF-1.7\nattendance"))
	testenv.Check(t, "Put", err)
	theirs, err := atts.Put(t.Context(), "other", "ops", "secret.pdf", strings.NewReader("%PDF-1.7\nsecret"))
	testenv.Check(t, "Put", err)

	for _, ids := range []string{`["nope"]`, `["` + theirs.ID + `"]`} {
		code, j := f.api(t, "POST", "/templates", `{"app":"hr","name":"月度考勤","title":"请确认本月考勤","attachments":`+ids+`}`)
		if code != http.StatusBadRequest || !strings.Contains(j["error"].(string), "attachments") {
			t.Fatalf("a template with attachments %s = %d %v; want 400 at attachments", ids, code, j)
		}
	}
	if code, j := f.api(t, "GET", "/templates?app=hr", ""); code != 200 || len(j["templates"].([]any)) != 0 {
		t.Fatalf("templates after refusals = %d %v; want none saved", code, j)
	}
	code, j := f.api(t, "POST", "/templates", `{"app":"hr","name":"月度考勤","title":"请确认本月考勤","audience":{"userids":["zhangsan"]},
		"markdown":"# 考勤\n\n请确认。","attachments":["`+a.ID+`"],"read_rule":"acknowledged"}`)
	if code != http.StatusCreated {
		t.Fatalf("save a template = %d %v", code, j)
	}
	id := int64(j["id"].(float64))

	w := f.ok(t, "GET", "/api/v1/templates/"+jsonNumber(id))
	var tpl compose.TemplateJSON
	testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &tpl))
	if len(tpl.AttachmentFiles) != 1 || tpl.AttachmentFiles[0].ID != a.ID || tpl.AttachmentFiles[0].Name != "考勤表.pdf" || tpl.AttachmentFiles[0].Size != a.Size {
		t.Fatalf("template's attachment_files = %+v; want 考勤表.pdf (%d bytes)", tpl.AttachmentFiles, a.Size)
	}

	// The notice 从模板新建 posts the template's fields, attachments included.
	ids, _ := json.Marshal(tpl.Attachments)
	reg := `{"msgid":"from-tpl","app":"hr","title":"` + tpl.Title + `","audience":{"userids":["zhangsan"]},"send":true,
		"content":{"markdown":` + mustJSON(t, tpl.Markdown) + `,"attachments":` + string(ids) + `},"read_rule":"` + tpl.ReadRule + `"}`
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(reg)); w.Code != http.StatusCreated {
		t.Fatalf("send from the template = %d: %s", w.Code, w.Body)
	}
	var v versionJSON
	testenv.Check(t, "decode", json.Unmarshal(f.ok(t, "GET", "/api/v1/messages/from-tpl/content").Body.Bytes(), &v))
	if len(v.Attachments) != 1 || v.Attachments[0].Name != "考勤表.pdf" || v.ReadRule != "acknowledged" {
		t.Fatalf("the sent notice's content = %+v; want the template's attachment and read rule", v)
	}
}

func jsonNumber(n int64) string { b, _ := json.Marshal(n); return string(b) }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	testenv.Check(t, "json", err)
	return string(b)
}
