package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestContentChangeNote: a new version's PATCH takes a change note
// (change_note), trimmed, stored with the version and answered by the
// versions API; version 1 has none. A note over 200 characters, one
// with a control character or a bidirectional override, one without
// content and one on a notice's own fields are refused with 400 naming
// change_note, and make no version.
func TestContentChangeNote(t *testing.T) {
	f, _ := newContentFixture(t)
	reg := `{"msgid":"perf","app":"hr","title":"2026年度绩效考核办法","audience":{"userids":["zhangsan"]},"send":true,
		"content":{"markdown":"# 第四条\n\n考核周期为一年。"},"read_rule":"acknowledged"}`
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(reg)); w.Code != http.StatusCreated {
		t.Fatalf("register = %d: %s", w.Code, w.Body)
	}
	get := func(target string) versionJSON {
		t.Helper()
		var v versionJSON
		if err := json.Unmarshal(f.ok(t, "GET", target).Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	note := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	body := func(n string) string {
		return `{"content":{"markdown":"# 第四条\n\n考核周期为半年。"},"reacknowledge":true,"change_note":` + n + `}`
	}
	for name, b := range map[string]string{
		"201 characters":       body(note(strings.Repeat("改", 201))),
		"a line break":         body(note("第四条\n考核周期改为半年")),
		"a NUL":                body(note("第四条\x00")),
		"a right-to-left mark": body(note("第四条\u202e年半")),
		"not a string":         body(`42`),
		"without content":      `{"change_note":"第四条改为半年"}`,
		"with title only":      `{"title":"新标题","change_note":"第四条改为半年"}`,
	} {
		code, j := f.api(t, "PATCH", "/messages/perf", b)
		if code != http.StatusBadRequest || (name != "not a string" && j["field"] != "change_note") {
			t.Errorf("%s: PATCH = %d %v; want 400 naming change_note", name, code, j)
		}
	}
	if v := get("/api/v1/messages/perf/content"); v.Version != 1 || v.Versions != 1 || v.ChangeNote != "" {
		t.Fatalf("after refused notes: %+v; want version 1 alone, no note", v)
	}

	w := f.do(t, "PATCH", "/api/v1/messages/perf", acmeToken, strings.NewReader(body(note("  第四条：考核周期由一年改为半年 <b>请注意</b>  "))))
	if w.Code != http.StatusOK {
		t.Fatalf("PATCH with a note = %d: %s", w.Code, w.Body)
	}
	var out versionJSON
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	const want = "第四条：考核周期由一年改为半年 <b>请注意</b>"
	if out.Version != 2 || out.ChangeNote != want {
		t.Fatalf("PATCH answered v%d note %q; want v2 %q", out.Version, out.ChangeNote, want)
	}
	if v := get("/api/v1/messages/perf/content"); v.Version != 2 || v.ChangeNote != want {
		t.Fatalf("GET content = v%d note %q; want v2 %q", v.Version, v.ChangeNote, want)
	}
	if v := get("/api/v1/messages/perf/content?v=1"); v.ChangeNote != "" {
		t.Fatalf("version 1's note = %q; want none", v.ChangeNote)
	}
	// 200 characters exactly is a note; no note is a version without one.
	if code, j := f.api(t, "PATCH", "/messages/perf", `{"content":{"markdown":"三"},"change_note":`+note(strings.Repeat("改", 200))+`}`); code != 200 {
		t.Fatalf("200-character note = %d %v", code, j)
	}
	if code, j := f.api(t, "PATCH", "/messages/perf", `{"content":{"markdown":"四"}}`); code != 200 {
		t.Fatalf("no note = %d %v", code, j)
	}
	if v := get("/api/v1/messages/perf/content?v=3"); v.ChangeNote != strings.Repeat("改", 200) {
		t.Fatalf("v3 note = %d characters", len([]rune(v.ChangeNote)))
	}
	if v := get("/api/v1/messages/perf/content"); v.Version != 4 || v.ChangeNote != "" {
		t.Fatalf("v4 = v%d note %q; want no note", v.Version, v.ChangeNote)
	}
}
