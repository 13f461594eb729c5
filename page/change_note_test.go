package page

import (
	"net/http"
	"strings"
	"testing"
)

// changeNote is version 2's change note in the fixture: markup a
// publisher typed, which the page shows as text.
const changeNote = `第四条：考核周期由一年改为半年 <script>alert(1)</script><img src=x onerror=alert(2)> & "注意"`

// TestChangeNote: the reading page shows a version's change note under
// 通知已更新（第 N 版）, HTML-escaped; version 1 has none.
func TestChangeNote(t *testing.T) {
	f := newFixture(t)
	b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	if w := b.signIn(t, "/r/hr/perf", "zhangsan"); w.Code != 302 {
		t.Fatalf("sign-in = %d", w.Code)
	}
	w := b.get(t, "/r/hr/perf")
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("page = %d: %s", w.Code, body)
	}
	const want = `<p class="change-note" id="change-note">修改说明：第四条：考核周期由一年改为半年 &lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt; &amp; &#34;注意&#34;</p>`
	updated, note := strings.Index(body, `id="updated"`), strings.Index(body, want)
	if updated < 0 || note < updated || note > strings.Index(body, `id="notice-text"`) {
		t.Fatalf("page: 通知已更新 at %d, the escaped note at %d; want the note under it, before the text:\n%s", updated, note, body)
	}
	if strings.Contains(body, "<script>alert(1)") || strings.Contains(body, "<img src=x") {
		t.Fatal("the note's markup reached the page unescaped")
	}
	// The page is cached per version: a second reader sees the same note.
	if w := b.get(t, "/r/hr/perf"); !strings.Contains(w.Body.String(), want) {
		t.Error("the cached page lost the note")
	}
	if w := b.get(t, "/r/hr/perf?v=1"); w.Code != 200 || strings.Contains(w.Body.String(), "change-note") {
		t.Errorf("?v=1 = %d; want version 1 without a note", w.Code)
	}
}
