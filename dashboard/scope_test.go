package dashboard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// caller is one attacker: a bearer token or a WeCom session.
type caller struct {
	name          string
	token         string
	cookie        *http.Cookie
	csrf          string
	wantRecipient []uint32 // the hello recipients it may see
	// mayRemind: a department leader reminds its own unread people; a
	// viewer of the configuration (a token) reads only.
	mayRemind bool
}

func (c caller) do(t *testing.T, f *fixture, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	if c.token != "" {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		return f.do(t, method, target, c.token, rd)
	}
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	return f.browse(r, c.cookie, map[string]string{csrfHeader: c.csrf})
}

// scopeFixture is the fixture with access wired: a viewer token of
// department 4, a sender token of app hr2, and lisi (leader of 4)
// signed in with WeCom; plus "rd", a notice to R&D (department 3) only.
func scopeFixture(t *testing.T, enforce bool) (*fixture, []caller, caller) {
	const viewerTok, senderTok = "viewer-token-0123456789", "sender-token-0123456789"
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps = append(o.Apps, yidu.App{Name: "hr2", CorpID: "acme", AgentID: 1000009})
		o.Tokens = append(o.Tokens,
			access.Token{Name: "v4", Token: viewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}},
			access.Token{Name: "s2", Token: senderTok, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "acme", Apps: []string{"hr2"}}}},
		)
	})
	acc, err := access.New(access.Config{LeadersSee: true}, f.mapper, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if enforce {
		f.setAccess(t, acc)
	}
	f.resolveWeCom(t, acc)
	rd := yidu.Message{CorpID: "acme", MsgID: "rd", App: "hr", Title: "R&D only", SentAt: t0, Recipients: 3}
	f.add(t, seeded{m: rd, rec: []uint32{3, 5, 10}, read: []uint32{3}})

	id, sess, err := f.srv.auth.OpenWeCom(context.Background(), "acme", "lisi")
	if err != nil {
		t.Fatal(err)
	}
	dept4 := []uint32{2, 4} // lisi, Alice (dave left)
	callers := []caller{
		{name: "viewer token of 4", token: viewerTok, wantRecipient: dept4},
		{name: "leader of 4 (WeCom)", cookie: &http.Cookie{Name: sessionCookie, Value: id}, csrf: sess.CSRF, wantRecipient: dept4, mayRemind: true},
	}
	return f, callers, caller{name: "sender of hr2", token: senderTok}
}

// TestScopeAttacker is the attacker's table over every message route: a
// viewer token of department 4 and a WeCom-signed-in leader of 4 get
// only department 4's people of hello, nothing of "rd" (R&D only) or of
// another corp, and the same answers as each other; a sender of hr2
// gets nothing of hr's notices and cannot send, remind or recall through
// hr. With the enforcement off (enforce=false is checked to fail) the
// scoped callers are refused everything, so each check depends on it.
func TestScopeAttacker(t *testing.T) {
	f, callers, sender := scopeFixture(t, true)
	answers := map[string][]string{}
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			answers[c.name] = scopedAnswers(t, f, c)
		})
	}
	if a, b := answers[callers[0].name], answers[callers[1].name]; !slices.Equal(a, b) {
		t.Errorf("a scoped token and a leader of the same scope answer differently:\n%q\n%q", a, b)
	}
	t.Run(sender.name, func(t *testing.T) {
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/api/v1/messages/hello", ""},
			{"GET", "/api/v1/messages/hello/progress", ""},
			{"GET", "/api/v1/messages/hello/departments", ""},
			{"GET", "/api/v1/messages/hello/recipients", ""},
			{"GET", "/api/v1/messages/hello/export.csv", ""},
			{"GET", "/api/v1/messages/hello/events", ""},
			{"POST", "/api/v1/messages/hello/remind", "{}"},
			{"POST", "/api/v1/messages/hello/recall", "{}"},
		} {
			if w := sender.do(t, f, rt.method, rt.path, rt.body); w.Code != http.StatusNotFound {
				t.Errorf("%s %s = %d, want 404 (a notice of another app)", rt.method, rt.path, w.Code)
			}
		}
		w := sender.do(t, f, "POST", "/api/v1/messages", `{"app":"hr","msgid":"x1","title":"t","audience":{"userids":["lisi"]},"send":true}`)
		if w.Code < 400 {
			t.Errorf("register through hr = %d, want refused", w.Code)
		}
		w = sender.do(t, f, "GET", "/api/v1/apps", "")
		var apps struct{ Apps []appJSON }
		_ = json.NewDecoder(w.Body).Decode(&apps)
		if len(apps.Apps) != 1 || apps.Apps[0].Name != "hr2" {
			t.Errorf("GET /apps = %+v, want hr2 only", apps.Apps)
		}
		w = sender.do(t, f, "GET", "/api/v1/messages", "")
		if strings.Contains(w.Body.String(), `"hello"`) {
			t.Errorf("the list shows hr's notice to a sender of hr2: %s", w.Body)
		}
		if w := sender.do(t, f, "GET", "/api/v1/directory/people?app=hr&q=li", ""); w.Code < 400 {
			t.Errorf("directory through hr = %d, want refused", w.Code)
		}
	})
	reminders := f.wecom.reminders()
	if len(reminders) != 1 {
		t.Fatalf("reminders = %d, want one (the leader's; the viewer token reads only)", len(reminders))
	}
	for i, to := range reminders {
		if !slices.Equal(to, []string{"lisi"}) {
			t.Errorf("reminder %d went to %v, want the unread people of department 4 only (lisi)", i, to)
		}
	}
}

// scopedAnswers checks one scoped caller on every route and returns its
// answers (for comparing a token with a person).
func scopedAnswers(t *testing.T, f *fixture, c caller) []string {
	var out []string
	get := func(path string) *httptest.ResponseRecorder {
		w := c.do(t, f, "GET", path, "")
		out = append(out, path+" "+w.Body.String())
		return w
	}
	// The R&D-only notice and another corp's are missing to them.
	for _, m := range []string{"rd", "secret"} {
		for _, sub := range []string{"", "/progress", "/departments", "/recipients", "/recipients?q=wangwu", "/export.csv", "/events"} {
			if w := c.do(t, f, "GET", "/api/v1/messages/"+m+sub, ""); w.Code != http.StatusNotFound {
				t.Errorf("GET %s%s = %d, want 404", m, sub, w.Code)
			}
		}
		for _, act := range []string{"remind", "recall"} {
			if w := c.do(t, f, "POST", "/api/v1/messages/"+m+"/"+act, "{}"); w.Code != http.StatusNotFound {
				t.Errorf("POST %s/%s = %d, want 404", m, act, w.Code)
			}
		}
	}
	var list listJSON
	if w := get("/api/v1/messages"); json.NewDecoder(w.Body).Decode(&list) != nil || len(list.Messages) != 1 ||
		list.Messages[0].MsgID != "hello" || list.Messages[0].Recipients != 2 || *list.Messages[0].Read != 1 {
		t.Errorf("list = %+v, want hello only with 2 recipients, 1 read", list.Messages)
	}
	var one messageJSON
	if w := get("/api/v1/messages/hello"); json.NewDecoder(w.Body).Decode(&one) != nil || one.Recipients != 2 || *one.Read != 1 {
		t.Errorf("GET hello = %d recipients, want 2", one.Recipients)
	}
	var p progressJSON
	if w := get("/api/v1/messages/hello/progress"); json.NewDecoder(w.Body).Decode(&p) != nil || p.Recipients != 2 || p.Read != 1 || curveTotal(p.Curve) != 1 {
		t.Errorf("progress = %d/%d, curve %d, want 1 of 2 read, 1 on the curve (Alice)", p.Read, p.Recipients, curveTotal(p.Curve))
	}
	// Each signal within department 4: Alice pressed the button, lisi
	// opened the app; the link (erin, 9) is another department's.
	wantBy := yidu.SignalCounts{Button: 1, EnterAgent: 1}
	if p.BySignal != wantBy {
		t.Errorf("progress by_signal = %+v, want %+v", p.BySignal, wantBy)
	}
	if one.BySignal == nil || *one.BySignal != wantBy {
		t.Errorf("GET hello by_signal = %+v, want %+v", one.BySignal, wantBy)
	}
	if len(list.Messages) == 1 && (list.Messages[0].BySignal == nil || *list.Messages[0].BySignal != wantBy) {
		t.Errorf("list by_signal = %+v, want %+v", list.Messages[0].BySignal, wantBy)
	}
	var ds struct{ Departments []deptJSON }
	if w := get("/api/v1/messages/hello/departments"); json.NewDecoder(w.Body).Decode(&ds) != nil || len(ds.Departments) != 1 || ds.Departments[0].ID != 4 {
		t.Errorf("departments = %+v, want department 4 only", ds.Departments)
	}
	for _, tc := range []struct {
		q    string
		want []uint32
	}{{"", c.wantRecipient}, {"?q=wangwu", nil}, {"?q=li", []uint32{2, 4}}, {"?state=unread", []uint32{2}}, {"?state=read", []uint32{4}}} {
		q, want := tc.q, tc.want
		var rs recipientsJSON
		w := get("/api/v1/messages/hello/recipients" + q)
		if json.NewDecoder(w.Body).Decode(&rs) != nil || !slices.Equal(sortedUIDs(rs.Items), want) {
			t.Errorf("recipients%s = %v, want %v", q, sortedUIDs(rs.Items), want)
		}
	}
	w := get("/api/v1/messages/hello/export.csv")
	for _, who := range []string{"zhangsan", "wangwu", "erin", "carol"} {
		if strings.Contains(w.Body.String(), who) {
			t.Errorf("export.csv holds %s (not in department 4):\n%s", who, w.Body)
		}
	}
	if !strings.Contains(w.Body.String(), "lisi") {
		t.Errorf("export.csv lacks lisi: %s", w.Body)
	}
	if ev := firstEvent(t, f, c); ev.Recipients != 2 || ev.Read != 1 {
		t.Errorf("SSE progress = %d/%d, want 1 of 2", ev.Read, ev.Recipients)
	}
	if w := c.do(t, f, "POST", "/api/v1/messages/hello/recall", "{}"); w.Code != http.StatusForbidden {
		t.Errorf("recall as a viewer = %d, want 403", w.Code)
	}
	if w := c.do(t, f, "POST", "/api/v1/messages", `{"app":"hr","msgid":"x2","title":"t","audience":{"userids":["lisi"]},"send":true}`); w.Code < 400 {
		t.Errorf("register as a viewer = %d, want refused", w.Code)
	}
	if c.cookie != nil {
		// The pages: a leader reads only, so no compose page and no
		// "new notice" button.
		if w := f.page(c.cookie, "/new"); w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "compose.js") {
			t.Errorf("GET /new as a leader = %d, want 403 without the compose script", w.Code)
		}
		if w := f.page(c.cookie, "/"); w.Code != http.StatusOK || strings.Contains(w.Body.String(), `id="new-notice"`) {
			t.Errorf("list page as a leader = %d, want 200 without the new-notice button", w.Code)
		}
	}
	if w := c.do(t, f, "GET", "/api/v1/directory/people?app=hr&q=wang", ""); w.Code < 400 {
		t.Errorf("directory as a viewer = %d, want refused", w.Code)
	}
	w = c.do(t, f, "POST", "/api/v1/messages/hello/remind", "{}")
	switch {
	case c.mayRemind && w.Code != http.StatusOK:
		t.Errorf("remind of its own unread people = %d, want 200: %s", w.Code, w.Body)
	case !c.mayRemind && w.Code != http.StatusForbidden:
		t.Errorf("remind as a viewer of the configuration = %d, want 403 (viewers read only): %s", w.Code, w.Body)
	}
	f.ledger.forget("acme", "hello") // who was reminded, for the next caller
	return out
}

// firstEvent reads the first progress event of hello's stream.
func firstEvent(t *testing.T, f *fixture, c caller) progressJSON {
	t.Helper()
	ts := httptest.NewServer(f.h)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/v1/messages/hello/events", nil)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else {
		req.AddCookie(c.cookie)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p progressJSON
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			_ = json.Unmarshal([]byte(d), &p)
			break
		}
	}
	return p
}

// TestScopeAttackerNeedsEnforcement: without access wired the same
// scoped callers get nothing, which the table above would report; the
// table's answers therefore come from the Views, not from the fixture.
func TestScopeAttackerNeedsEnforcement(t *testing.T) {
	f, callers, _ := scopeFixture(t, false)
	for _, c := range callers {
		if w := c.do(t, f, "GET", "/api/v1/messages/hello/progress", ""); w.Code != http.StatusNotFound {
			t.Errorf("%s without access: progress = %d, want 404", c.name, w.Code)
		}
	}
}

// TestScopedCurveCached: a scoped caller's curve is read from MySQL once
// per View and 5 s (cache.go; the whole notice's curve is cached alike),
// however often it asks (a live stream asks every second): a viewer token
// and a leader of the same department share it.
func TestScopedCurveCached(t *testing.T) {
	f, callers, _ := scopeFixture(t, true)
	reads := func() int {
		_, n := f.arch.counts()
		return n
	}
	before := reads()
	for range 3 {
		for _, c := range callers {
			var p progressJSON
			w := c.do(t, f, "GET", "/api/v1/messages/hello/progress", "")
			if json.NewDecoder(w.Body).Decode(&p) != nil || curveTotal(p.Curve) != 1 {
				t.Fatalf("%s: progress = %d, curve %d, want Alice's read", c.name, w.Code, curveTotal(p.Curve))
			}
		}
	}
	if got := reads() - before; got != 1 {
		t.Errorf("6 scoped progress calls of one View read MySQL %d times, want 1", got)
	}
}

// TestViewFailsClosed: a request that never went through gate carries
// no View, and sees nobody (issue 47: the default was everyone, so a
// handler reached without gate would have shown every recipient).
func TestViewFailsClosed(t *testing.T) {
	ctx := context.Background()
	if v := viewFrom(ctx); v.All() || !v.None() {
		t.Errorf("viewFrom(no View) = all %v, none %v; want nobody", v.All(), v.None())
	}
	if !scoped(ctx) {
		t.Error("scoped(no View) = false; want true (fail closed)")
	}
	if v := viewFrom(withView(ctx, access.Everyone)); !v.All() || scoped(withView(ctx, access.Everyone)) {
		t.Error("viewFrom(Everyone) is not everyone")
	}
}
