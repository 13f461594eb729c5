package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
)

func decode[T any](tb testing.TB, w *httptest.ResponseRecorder) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		tb.Fatalf("decode %T: %v: %s", v, err, w.Body)
	}
	return v
}

var apiRoutes = []struct{ method, path string }{
	{"GET", "/api/v1/messages"},
	{"POST", "/api/v1/messages"},
	{"GET", "/api/v1/messages/hello"},
	{"GET", "/api/v1/messages/hello/progress"},
	{"GET", "/api/v1/messages/hello/departments"},
	{"GET", "/api/v1/messages/hello/recipients"},
	{"GET", "/api/v1/messages/hello/export.csv"},
	{"POST", "/api/v1/messages/hello/remind"},
	{"POST", "/api/v1/messages/hello/recall"},
	{"GET", "/api/v1/messages/hello/events"},
}

func TestAuthRequired(t *testing.T) {
	f := newFixture(t)
	for _, rt := range apiRoutes {
		for _, tok := range []string{"", "wrong-token-0123456789", acmeToken + "x"} {
			w := f.do(t, rt.method, rt.path, tok, nil)
			if w.Code != http.StatusUnauthorized {
				t.Errorf("%s %s with token %q = %d; want 401", rt.method, rt.path, tok, w.Code)
			}
			if w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: no WWW-Authenticate", rt.method, rt.path)
			}
		}
	}
	// The sign-in page brings the person back to the page they asked for.
	for p, want := range map[string]string{"/": "/login?next=%2F", "/m/hello": "/login?next=%2Fm%2Fhello", "/m/x?a=1": "/login?next=%2Fm%2Fx%3Fa%3D1"} {
		w := f.do(t, "GET", p, "", nil)
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != want {
			t.Errorf("GET %s without session = %d %q; want 303 to %s", p, w.Code, w.Header().Get("Location"), want)
		}
	}
	// A bearer token is for the API, not the page.
	if w := f.do(t, "GET", "/", acmeToken, nil); w.Code != http.StatusSeeOther {
		t.Errorf("GET / with bearer only = %d; want 303", w.Code)
	}
}

func TestCrossCorpIsNotFound(t *testing.T) {
	f := newFixture(t)
	for _, rt := range apiRoutes[2:] {
		target := strings.Replace(rt.path, "hello", "secret", 1)
		if w := f.do(t, rt.method, target, acmeToken, nil); w.Code != http.StatusNotFound {
			t.Errorf("acme %s %s = %d; want 404", rt.method, target, w.Code)
		}
		missing := strings.Replace(rt.path, "hello", "nosuchmsg", 1)
		if w := f.do(t, rt.method, missing, acmeToken, nil); w.Code != http.StatusNotFound {
			t.Errorf("acme %s %s = %d; want 404", rt.method, missing, w.Code)
		}
	}
	if w := f.do(t, "GET", "/api/v1/messages/secret", otherToken, nil); w.Code != http.StatusOK {
		t.Errorf("other GET secret = %d; want 200", w.Code)
	}
	if w := f.do(t, "GET", "/api/v1/messages/secret", adminToken, nil); w.Code != http.StatusOK {
		t.Errorf("admin (*) GET secret = %d; want 200", w.Code)
	}
	// The list shows only the granted corps.
	l := decode[listJSON](t, f.do(t, "GET", "/api/v1/messages", acmeToken, nil))
	if len(l.Messages) != 1 || l.Messages[0].MsgID != "hello" {
		t.Errorf("acme list = %+v; want only hello", l.Messages)
	}
	// A session of an acme user cannot see other's page either.
	c, _ := f.login(t)
	if w := f.page(c, "/m/secret"); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "Secret") {
		t.Errorf("GET /m/secret as alice = %d; want 404 without the title", w.Code)
	}
}

func TestGetMessage(t *testing.T) {
	f := newFixture(t)
	w := f.ok(t, "GET", "/api/v1/messages/hello")
	m := decode[messageJSON](t, w)
	bySignal := yidu.SignalCounts{Button: 3, Link: 1, EnterAgent: 3}
	if m.Recipients != 10 || *m.Read != 4 || *m.Unread != 6 || *m.Percent != 40 || m.Title != f.hello.Title || !m.Live ||
		m.BySignal == nil || *m.BySignal != bySignal {
		t.Errorf("GET hello = %+v; want 10 recipients, 4 read, 40%%, by_signal %+v", m, bySignal)
	}
	raw := decode[map[string]json.RawMessage](t, f.ok(t, "GET", "/api/v1/messages/hello"))
	if got, want := string(raw["by_signal"]), `{"button":3,"link":1,"enter_agent":3,"read_to_end":0,"acknowledged":0}`; got != want {
		t.Errorf("by_signal = %s; want %s", got, want)
	}

	t.Run("keys gone are restored", func(t *testing.T) {
		// flushd writes 6's and 9's reads, then Redis loses the keys.
		f.read(t, f.hello, yidu.SignalButton, t0.Add(3*time.Minute), 6)
		f.read(t, f.hello, yidu.SignalLink, t0.Add(3*time.Minute), 9)
		f.bms.drop(t, f.hello)
		loads, _ := f.arch.counts()
		m := decode[messageJSON](t, f.do(t, "GET", "/api/v1/messages/hello", acmeToken, nil))
		if *m.Read != 4 || m.Recipients != 10 || *m.BySignal != bySignal {
			t.Errorf("after restore = %+v; want 4/10, by_signal %+v", m, bySignal)
		}
		if now, _ := f.arch.counts(); now != loads+1 {
			t.Errorf("LoadReads called %d times; want 1", now-loads)
		}
		if _, _, _, found, _ := f.bms.CountsBySignal(context.Background(), "acme", "hello"); !found {
			t.Error("keys were not put back")
		}
	})

	t.Run("bad msgid", func(t *testing.T) {
		if w := f.do(t, "GET", "/api/v1/messages/bad%20id", acmeToken, nil); w.Code != http.StatusBadRequest {
			t.Errorf("bad msgid = %d; want 400", w.Code)
		}
	})
}

func TestListMessages(t *testing.T) {
	f := newFixture(t)
	for i := range 5 {
		m := yidu.Message{CorpID: "acme", MsgID: "m" + string(rune('a'+i)), App: "hr", Title: "T", SentAt: t0.Add(time.Duration(i) * time.Minute), Recipients: 2}
		f.add(t, seeded{m: m, rec: []uint32{1, 2}, read: []uint32{1}, cold: i == 2})
	}
	var got []string
	cursor := ""
	for range 10 {
		w := f.ok(t, "GET", "/api/v1/messages?limit=2&cursor="+url.QueryEscape(cursor))
		l := decode[listJSON](t, w)
		for _, m := range l.Messages {
			got = append(got, m.MsgID)
			if m.MsgID == "mc" && (m.Live || m.Read != nil || m.BySignal != nil) {
				t.Errorf("cold message mc = %+v; want live=false, read=null, by_signal=null", m)
			}
			if m.MsgID == "md" && (!m.Live || *m.Read != 1 || *m.Percent != 50 || m.BySignal == nil) {
				t.Errorf("md = %+v; want 1 read, 50%%, by_signal", m)
			}
			if m.MsgID == "hello" && (m.BySignal == nil || *m.BySignal != (yidu.SignalCounts{Button: 3, Link: 1, EnterAgent: 3})) {
				t.Errorf("hello in the list = %+v; want its by_signal", m)
			}
		}
		if cursor = l.NextCursor; cursor == "" {
			break
		}
	}
	want := []string{"me", "md", "mc", "mb", "ma", "hello"}
	if !slices.Equal(got, want) {
		t.Errorf("pages = %v; want %v", got, want)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "cursor=%00", "cursor=a%20b"} {
		if w := f.do(t, "GET", "/api/v1/messages?"+q, acmeToken, nil); w.Code != http.StatusBadRequest {
			t.Errorf("list ?%s = %d; want 400", q, w.Code)
		}
	}
}

func TestRegister(t *testing.T) {
	f := newFixture(t)
	body := `{"msgid":"notice1","app":"hr","title":"年会通知","audience":{"userids":["zhangsan","lisi"]}}`
	w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(body))
	if w.Code != http.StatusCreated {
		t.Fatalf("first register = %d; want 201: %s", w.Code, w.Body)
	}
	if m := decode[messageJSON](t, w); m.MsgID != "notice1" || m.CorpID != "acme" || m.Recipients != 2 || !m.SentAt.Equal(f.clock.Now()) {
		t.Errorf("registered = %+v", m)
	}
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(body)); w.Code != http.StatusOK {
		t.Errorf("same again = %d; want 200", w.Code)
	}
	conflict := strings.Replace(body, "lisi", "wangwu", 1)
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(conflict)); w.Code != http.StatusConflict {
		t.Errorf("conflicting = %d; want 409", w.Code)
	}
	noID := `{"app":"hr","title":"x","audience":{"all":true},"sent_at":"2026-03-01T08:00:00+08:00"}`
	w = f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(noID))
	if m := decode[messageJSON](t, w); w.Code != http.StatusCreated || !yidu.MsgID(m.MsgID).Valid() || !m.SentAt.Equal(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("register without msgid = %d %+v; want 201 with a generated msgid", w.Code, m)
	}

	bad := []struct{ name, body, token string }{
		{"not json", `{`, acmeToken},
		{"unknown field", `{"app":"hr","title":"x","audience":{"all":true},"evil":1}`, acmeToken},
		{"no app", `{"title":"x","audience":{"all":true}}`, acmeToken},
		{"unknown app", `{"app":"nope","title":"x","audience":{"all":true}}`, acmeToken},
		{"app of another corp", `{"app":"ops","title":"x","audience":{"all":true}}`, acmeToken},
		{"no title", `{"app":"hr","audience":{"all":true}}`, acmeToken},
		{"department 0", `{"app":"hr","title":"x","audience":{"departments":[0]}}`, acmeToken},
		{"no audience", `{"app":"hr","title":"x","audience":{}}`, acmeToken},
		{"bad userid", `{"app":"hr","title":"x","audience":{"userids":["a b"]}}`, acmeToken},
		{"bad msgid", `{"msgid":"a@1","app":"hr","title":"x","audience":{"all":true}}`, acmeToken},
		{"tracker says invalid", `{"app":"hr","title":"x","audience":{"userids":["nobody"]}}`, acmeToken},
		{"trailing data", `{"app":"hr","title":"x","audience":{"all":true}} {}`, acmeToken},
	}
	for _, tc := range bad {
		if w := f.do(t, "POST", "/api/v1/messages", tc.token, strings.NewReader(tc.body)); w.Code != http.StatusBadRequest {
			t.Errorf("%s: = %d; want 400: %s", tc.name, w.Code, w.Body)
		}
	}
}

func TestLoginAndSession(t *testing.T) {
	f := newFixture(t)
	c, csrfTok := f.login(t)
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" {
		t.Errorf("cookie = %+v; want HttpOnly, SameSite=Lax, not Secure on plain HTTP", c)
	}
	get := func(c *http.Cookie, target string) int { return f.page(c, target).Code }
	if code := get(c, "/api/v1/messages/hello"); code != http.StatusOK {
		t.Errorf("API with session = %d; want 200", code)
	}
	if code := get(&http.Cookie{Name: sessionCookie, Value: "forged"}, "/api/v1/messages/hello"); code != http.StatusUnauthorized {
		t.Errorf("API with forged session = %d; want 401", code)
	}

	t.Run("tls sets Secure", func(t *testing.T) {
		form := url.Values{"username": {"alice"}, "password": {password}}
		r := httptest.NewRequest("POST", "https://dash.example/login", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if cs := w.Result().Cookies(); len(cs) != 1 || !cs[0].Secure {
			t.Errorf("TLS login cookies = %+v; want one Secure cookie", cs)
		}
	})

	t.Run("back to next, never another host", func(t *testing.T) {
		for next, want := range map[string]string{"/m/hello?x=1": "/m/hello?x=1", "//evil.example/x": "/", "https://evil.example": "/", "/\\evil.example": "/", "": "/"} {
			form := url.Values{"username": {"alice"}, "password": {password}, "next": {next}}
			r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			w := httptest.NewRecorder()
			f.h.ServeHTTP(w, r)
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != want {
				t.Errorf("login with next %q = %d to %q; want %q", next, w.Code, w.Header().Get("Location"), want)
			}
		}
	})

	t.Run("logout ends the session", func(t *testing.T) {
		c2, tok2 := f.login(t)
		form := url.Values{csrfField: {tok2}}
		r := httptest.NewRequest("POST", "/logout", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(c2)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusSeeOther {
			t.Fatalf("logout = %d", w.Code)
		}
		if code := get(c2, "/api/v1/messages"); code != http.StatusUnauthorized {
			t.Errorf("after logout = %d; want 401", code)
		}
	})

	t.Run("session expires", func(t *testing.T) {
		f.clock.Add(time.Hour + time.Second)
		if code := get(c, "/api/v1/messages"); code != http.StatusUnauthorized {
			t.Errorf("after SessionTTL = %d; want 401", code)
		}
	})
	_ = csrfTok
}

func TestLoginRefusals(t *testing.T) {
	f := newFixture(t)
	post := func(user, pass string) *httptest.ResponseRecorder { return f.postLogin(user, pass, nil) }
	for _, tc := range []struct{ user, pass string }{{"alice", "wrong"}, {"mallory", password}, {"", ""}} {
		if w := post(tc.user, tc.pass); w.Code != http.StatusUnauthorized || len(w.Result().Cookies()) != 0 {
			t.Errorf("login %q/%q = %d; want 401 without cookie", tc.user, tc.pass, w.Code)
		}
	}
	// 5 failures per name and address: the one above plus 4 more, then
	// refused, even with the right password.
	for range 4 {
		post("alice", "wrong")
	}
	w := post("alice", password)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Errorf("6th attempt = %d; want 429 with Retry-After", w.Code)
	}
	f.clock.Add(time.Minute)
	if w := post("alice", password); w.Code != http.StatusSeeOther {
		t.Errorf("after waiting = %d; want 303", w.Code)
	}
	// Cross-site login form posts are refused.
	if w := f.postLogin("alice", password, map[string]string{"Sec-Fetch-Site": "cross-site"}); w.Code != http.StatusForbidden {
		t.Errorf("cross-site login = %d; want 403", w.Code)
	}
	huge := `{"app":"hr","title":"x","audience":{"all":true},"body":"` + strings.Repeat("x", maxRegisterBody) + `"}`
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(huge)); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("register with a body over %d bytes = %d %s; want 413", maxRegisterBody, w.Code, w.Body)
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t)
	c, tok := f.login(t)
	post := func(target string, hdr map[string]string) int {
		body := `{"app":"hr","title":"x","audience":{"all":true}}`
		if strings.HasSuffix(target, "/remind") {
			body = `{}` // remind's body names a state or nothing (unknown fields are 400)
		}
		r := httptest.NewRequest("POST", target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		return f.browse(r, c, hdr).Code
	}
	tests := []struct {
		name   string
		target string
		hdr    map[string]string
		want   int
	}{
		{"remind without token", "/api/v1/messages/hello/remind", nil, http.StatusForbidden},
		{"remind wrong token", "/api/v1/messages/hello/remind", map[string]string{csrfHeader: tok + "x"}, http.StatusForbidden},
		{"register without token", "/api/v1/messages", nil, http.StatusForbidden},
		{"cross-site with token", "/api/v1/messages/hello/remind", map[string]string{csrfHeader: tok, "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"foreign origin with token", "/api/v1/messages/hello/remind", map[string]string{csrfHeader: tok, "Origin": "https://evil.example"}, http.StatusForbidden},
		{"logout without token", "/logout", nil, http.StatusForbidden},
		{"remind with token", "/api/v1/messages/hello/remind", map[string]string{csrfHeader: tok, "Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"register with token", "/api/v1/messages", map[string]string{csrfHeader: tok}, http.StatusCreated},
	}
	for _, tc := range tests {
		if got := post(tc.target, tc.hdr); got != tc.want {
			t.Errorf("%s: = %d; want %d", tc.name, got, tc.want)
		}
	}
	// Bearer requests need no CSRF token.
	if w := f.do(t, "POST", "/api/v1/messages", acmeToken, strings.NewReader(`{"app":"hr","title":"y","audience":{"all":true}}`)); w.Code != http.StatusCreated {
		t.Errorf("bearer POST = %d; want 201", w.Code)
	}
}

func TestRemind(t *testing.T) {
	f := newFixture(t)
	w := f.ok(t, "POST", "/api/v1/messages/hello/remind")
	got := decode[remindJSON](t, w)
	// Unread: 2 3 5 7 8 10; dave (8) has left.
	want := []string{"bob", "carol", "frank", "lisi", "wangwu"}
	sent := slices.Sorted(slices.Values(f.wecom.reminders()[0]))
	if got.Reminded != 5 || !slices.Equal(sent, want) {
		t.Errorf("reminded %d %v; want 5 %v", got.Reminded, sent, want)
	}
	f.clock.Add(10 * time.Minute)
	w = f.do(t, "POST", "/api/v1/messages/hello/remind", acmeToken, nil)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "3000" {
		t.Errorf("second remind = %d Retry-After %q; want 429, 3000", w.Code, w.Header().Get("Retry-After"))
	}
	f.clock.Add(50 * time.Minute)
	f.read(t, f.hello, yidu.SignalButton, f.clock.Now(), 2, 3)
	w = f.do(t, "POST", "/api/v1/messages/hello/remind", acmeToken, nil)
	if got := decode[remindJSON](t, w); w.Code != http.StatusOK || got.Reminded != 3 {
		t.Errorf("after the interval = %d %+v; want 200, 3 reminded", w.Code, got)
	}
}

// TestRemindReports: one member whose UserID breaks WeCom's rule is
// skipped and reported, never fails the others' reminder; the answer says
// what was sent, refused and skipped (issue: remind fails for the whole
// message).
func TestRemindReports(t *testing.T) {
	f := newFixture(t)
	f.setUserID(t, "acme", 2, "-dash")
	w := f.ok(t, "POST", "/api/v1/messages/hello/remind")
	got := decode[remindJSON](t, w)
	want := remindJSON{Reminded: 4, Unread: 5, Batches: 1, Skipped: 1, NextAllowedAt: got.NextAllowedAt}
	if got != want {
		t.Errorf("remind = %+v; want %+v", got, want)
	}
	if sent := f.wecom.reminders()[0]; slices.Contains(sent, "-dash") || len(sent) != 4 {
		t.Errorf("reminded %v; want the four valid UserIDs", sent)
	}
}

func TestDepartments(t *testing.T) {
	f := newFixture(t)
	w := f.ok(t, "GET", "/api/v1/messages/hello/departments")
	var out struct{ Departments []deptJSON }
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	got := map[int64]deptJSON{}
	for _, d := range out.Departments {
		got[d.ID] = d
	}
	// Brute force: a department's people are its active members and
	// those below it (dave, who left, is in none).
	sub := map[int64][]int64{1: {1, 2, 3, 4}, 2: {2, 4}, 3: {3}, 4: {4}}
	rec, _, _ := f.bms.RecipientBitmap(context.Background(), "acme", "hello")
	read, _, _ := f.bms.ReadBitmap(context.Background(), "acme", "hello")
	for id, tree := range sub {
		var wantRec, wantRead uint64
		for _, u := range acmePeople {
			if !rec.Contains(u.UID) || u.Status == yidu.StatusLeft || !slices.ContainsFunc(u.Departments, func(d int64) bool { return slices.Contains(tree, d) }) {
				continue
			}
			wantRec++
			if read.Contains(u.UID) {
				wantRead++
			}
		}
		d := got[id]
		if d.Recipients != wantRec || d.Read != wantRead || d.Unread != wantRec-wantRead {
			t.Errorf("department %d = %+v; want %d recipients, %d read", id, d, wantRec, wantRead)
		}
	}
	// Alice (4) is in R&D and North, Erin (9) in Sales and R&D: the root
	// counts each once, so it equals the 9 recipients still members.
	if got[1].Recipients != 9 || got[1].Read != 4 {
		t.Errorf("root = %+v; want 9 recipients, 4 read", got[1])
	}
	if out.Departments[0].ID != 1 || out.Departments[0].Depth != 0 || got[4].Depth != 2 {
		t.Errorf("order/depth = %+v", out.Departments)
	}
}

func TestRecipients(t *testing.T) {
	f := newFixture(t)
	list := func(q string) recipientsJSON {
		t.Helper()
		w := f.ok(t, "GET", "/api/v1/messages/hello/recipients?"+q)
		return decode[recipientsJSON](t, w)
	}
	tests := []struct {
		query string
		want  []uint32
	}{
		{"", []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"state=read", []uint32{1, 4, 6, 9}},
		{"state=unread", []uint32{2, 3, 5, 7, 8, 10}},
		// dave (8), who left, has no active membership.
		{"state=unread&department=2", []uint32{2}},
		{"department=2", []uint32{1, 2, 4, 6, 9}},
		{"department=4&state=read", []uint32{4}},
		{"q=ALICE", []uint32{4}},
		{"q=%E6%9D%8E", []uint32{2}}, // 李
		{"q=smith", []uint32{4}},
		{"q=a&state=unread", []uint32{3, 5, 7, 8, 10}}, // wangwu, bob ("alert"), carol, dave, frank
		{"q=nobody", nil},
	}
	for _, tc := range tests {
		got := list(tc.query)
		if uids := sortedUIDs(got.Items); !slices.Equal(uids, tc.want) {
			t.Errorf("?%s = %v; want %v", tc.query, uids, tc.want)
		}
	}
	one := list("state=read&limit=10")
	if one.Items[0].ReadTime == nil || !one.Items[0].ReadTime.Equal(t0.Add(time.Minute)) || one.Items[2].ReadTime != nil || !one.Items[2].Read {
		t.Errorf("read items = %+v; want read_time for flushed reads only", one.Items)
	}
	if d := one.Items[1].Departments; len(d) != 2 || d[0].Name != "R&D 研发部" {
		t.Errorf("alice departments = %+v", d)
	}
	if l := list("state=unread"); !l.Items[4].Left || l.Total != 6 {
		t.Errorf("unread = %+v; want dave marked left, total 6", l)
	}

	t.Run("paging covers every recipient once", func(t *testing.T) {
		var seen []uint32
		cursor := ""
		for range 20 {
			p := list("limit=3&cursor=" + cursor)
			if len(p.Items) > 3 {
				t.Fatalf("page of %d > limit", len(p.Items))
			}
			seen = append(seen, sortedUIDs(p.Items)...)
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if want := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}; !slices.Equal(seen, want) {
			t.Errorf("pages = %v; want %v", seen, want)
		}
		if p := list("limit=10"); p.NextCursor != "" {
			t.Errorf("exactly-full last page has next_cursor %q; want none", p.NextCursor)
		}
		if p := list("cursor=4294967295"); len(p.Items) != 0 {
			t.Errorf("cursor at max uid = %v", p.Items)
		}
	})

	for _, q := range []string{"state=maybe", "limit=0", "limit=1001", "limit=-1", "cursor=-1", "cursor=x",
		"cursor=4294967296", "department=0", "department=abc", "department=99", "q=" + strings.Repeat("x", 65), "q=%ff"} {
		if w := f.do(t, "GET", "/api/v1/messages/hello/recipients?"+q, acmeToken, nil); w.Code != http.StatusBadRequest {
			t.Errorf("?%s = %d; want 400", q, w.Code)
		}
	}
}

func TestExport(t *testing.T) {
	f := newFixture(t)
	w := f.ok(t, "GET", "/api/v1/messages/hello/export.csv?state=all")
	if ct := w.Header().Get("Content-Type"); ct != "text/csv; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	if cd := w.Header().Get("Content-Disposition"); cd != `attachment; filename="hello-all.csv"` {
		t.Errorf("Content-Disposition = %q", cd)
	}
	body := w.Body.Bytes()
	if !bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) {
		t.Fatalf("no UTF-8 BOM: %q", body[:min(10, len(body))])
	}
	rows, err := csv.NewReader(bytes.NewReader(body[3:])).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	header := []string{"userid", "name", "departments", "state", "read_time", "first_signal", "first_signal_time"}
	if len(rows) != 11 || !slices.Equal(rows[0], header) {
		t.Fatalf("rows = %d (%v); want header %v + 10", len(rows), rows[0], header)
	}
	byID := map[string][]string{}
	for _, r := range rows[1:] {
		byID[r[0]] = r
	}
	if r := byID["evil"]; r[1] != `'=HYPERLINK("http://x","y")` {
		t.Errorf("formula cell = %q; want neutralised with a leading '", r[1])
	}
	if r := byID["zhangsan"]; r[1] != "张三" || r[2] != "Sales 销售部" || r[3] != "read" || r[4] != "2026-03-02T09:01:00Z" ||
		r[5] != "button" || r[6] != r[4] {
		t.Errorf("zhangsan row = %q", r)
	}
	if r := byID["erin"]; r[3] != "read" || r[4] != "" || r[5] != "" || r[6] != "" {
		t.Errorf("erin (read, not flushed) = %q", r)
	}
	// lisi opened the app only: enter_agent does not count by default.
	if r := byID["lisi"]; r[3] != "unread" || r[4] != "" || r[5] != "" || r[6] != "" {
		t.Errorf("lisi (opened the app only) = %q", r)
	}
	if r := byID["Alice"]; r[2] != "R&D 研发部; North 北区" {
		t.Errorf("alice departments = %q", r[2])
	}
	if got := testutil.ToFloat64(f.srv.met.exportRows); got != 10 {
		t.Errorf("export rows metric = %v; want 10", got)
	}
	// The page's download in Chinese (issue 49): the page's headers and
	// words, times in the corp's zone (Asia/Shanghai) as tables show them.
	w = f.ok(t, "GET", "/api/v1/messages/hello/export.csv?state=all&labels=zh-CN")
	zh, err := csv.NewReader(bytes.NewReader(w.Body.Bytes()[3:])).ReadAll()
	if err != nil || len(zh) != 11 || zh[0][0] != "账号" || zh[0][3] != "状态" {
		t.Fatalf("labels=zh-CN: %v, header %v", err, zh[0])
	}
	for _, r := range zh[1:] {
		if r[0] == "zhangsan" && (r[3] != "已读" || r[4] != "2026-03-02 17:01:00" || r[5] != "已点击「我已阅读」") {
			t.Errorf("zhangsan in Chinese = %q; want 已读, 2026-03-02 17:01:00 (Asia/Shanghai), 已点击「我已阅读」", r)
		}
		if r[0] == "lisi" && r[3] != "未读" {
			t.Errorf("lisi in Chinese = %q; want 未读", r)
		}
	}
	w = f.do(t, "GET", "/api/v1/messages/hello/export.csv?state=unread&department=3", acmeToken, nil)
	rows, _ = csv.NewReader(bytes.NewReader(w.Body.Bytes()[3:])).ReadAll()
	var ids []string
	for _, r := range rows[1:] {
		ids = append(ids, r[0])
	}
	if !slices.Equal(ids, []string{"wangwu", "bob", "frank"}) {
		t.Errorf("unread in R&D = %v; want wangwu bob frank", ids)
	}
	if w := f.do(t, "GET", "/api/v1/messages/hello/export.csv?state=bad", acmeToken, nil); w.Code != http.StatusBadRequest {
		t.Errorf("bad state = %d; want 400", w.Code)
	}
}

func TestPageEscapes(t *testing.T) {
	f := newFixture(t)
	xss := yidu.Message{CorpID: "acme", MsgID: "xss", App: "hr", Title: "<script>alert(1)</script>", SentAt: t0, Recipients: 1}
	f.add(t, seeded{m: xss, rec: []uint32{5}})
	c, _ := f.login(t)
	for _, p := range []string{"/", "/m/xss"} {
		w := f.page(c, p)
		body := w.Body.String()
		if w.Code != http.StatusOK || strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("GET %s = %d; the title is not escaped:\n%s", p, w.Code, body)
		}
		h := w.Header()
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("CSP = %q", csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("security headers = %v", h)
		}
		if strings.Contains(body, "<script>") || strings.Contains(body, "style=") {
			t.Errorf("GET %s has an inline script or style", p)
		}
	}
	// A name with markup reaches the page only through JSON (which escapes <)
	// and app.js, which never uses innerHTML.
	w := f.do(t, "GET", "/api/v1/messages/xss/recipients", acmeToken, nil)
	if strings.Contains(w.Body.String(), "<script>") {
		t.Errorf("JSON carries raw <script>: %s", w.Body)
	}
	js, err := os.ReadFile("web/static/app.js")
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if bytes.Contains(js, []byte(bad)) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	// The page has the ids the browser test drives.
	rw := f.page(c, "/m/hello")
	for _, id := range []string{`id="progress-bar"`, `id="read-count"`, `id="recipient-count"`, `id="percent"`, `id="departments"`, `id="recipients"`, `id="export"`, `id="remind"`, `id="recall"`, `id="curve"`} {
		if !strings.Contains(rw.Body.String(), id) {
			t.Errorf("message page lacks %s", id)
		}
	}
	// The by_signal breakdown, the counted signals (hr's defaults) marked.
	for _, want := range []string{
		`<span class="signal counted">已点击「我已阅读」 <b id="signal-button">3</b></span>`,
		`<span class="signal counted">已打开 <b id="signal-link">1</b></span>`,
		`<span class="signal">进入应用 <b id="signal-enter-agent">3</b></span>`,
	} {
		if !strings.Contains(rw.Body.String(), want) {
			t.Errorf("message page lacks %s", want)
		}
	}
	for _, id := range []string{"signal-button", "signal-link", "signal-enter-agent"} {
		if !bytes.Contains(js, []byte(`$("`+id+`")`)) {
			t.Errorf("app.js does not update #%s", id)
		}
	}
	// Static assets are served without a session (the login page needs them).
	if w := f.do(t, "GET", "/static/app.css", "", nil); w.Code != http.StatusOK {
		t.Errorf("GET /static/app.css = %d", w.Code)
	}
}

func TestProgress(t *testing.T) {
	f := newFixture(t)
	w := f.ok(t, "GET", "/api/v1/messages/hello/progress")
	p := decode[progressJSON](t, w)
	if p.Read != 4 || p.Recipients != 10 || p.Percent != 40 || len(p.Curve) != 2 || p.BucketMinutes != 1 ||
		p.BySignal != (yidu.SignalCounts{Button: 3, Link: 1, EnterAgent: 3}) {
		t.Errorf("progress = %+v", p)
	}
	// 30 min after sending, 2 reads flushed in minutes 1-2, 4 read now: the
	// last 5 minutes saw 2 reads → 0.4/min; 90% = 9 reads → 5 more → 12.5 min.
	if p.RatePerMinute == nil || *p.RatePerMinute < 0.39 || *p.RatePerMinute > 0.41 || p.ETA90 == nil || p.ETA90.Seconds != 750 {
		t.Errorf("estimate = rate %v eta90 %+v; want 0.4/min, 750 s", p.RatePerMinute, p.ETA90)
	}
}

// TestProgressCurveStale: once the curve cache has expired, progress still
// answers at once with the count from Redis and the curve it had, while
// one reload runs; the next progress after it shows the new curve.
func TestProgressCurveStale(t *testing.T) {
	f := newFixture(t)
	if p := decode[progressJSON](t, f.ok(t, "GET", "/api/v1/messages/hello/progress")); curveTotal(p.Curve) != 2 {
		t.Fatalf("first curve total %d; want 2", curveTotal(p.Curve))
	}
	gate := make(chan struct{})
	f.arch.mu.Lock()
	f.arch.curveGate = gate
	f.arch.mu.Unlock()
	f.read(t, f.hello, yidu.SignalButton, t0.Add(3*time.Minute), 2) // lisi reads: flushed, and live in Redis
	f.clock.Add(time.Minute)                                        // past the 5 s ttl

	got := make(chan *httptest.ResponseRecorder, 1)
	go func() { got <- f.do(t, "GET", "/api/v1/messages/hello/progress", acmeToken, nil) }()
	select {
	case w := <-got:
		if w.Code != http.StatusOK {
			t.Fatalf("progress while the curve reloads = %d %s", w.Code, w.Body)
		}
		p := decode[progressJSON](t, w)
		if curveTotal(p.Curve) != 2 || p.Read != 5 {
			t.Errorf("progress while the curve reloads: curve total %d, read %d; want the old 2, and 5 from Redis", curveTotal(p.Curve), p.Read)
		}
	case <-time.After(10 * time.Second):
		close(gate)
		t.Fatal("progress waited for the curve's reload")
	}
	close(gate)
	waitFor(t, "the reloaded curve", func() bool {
		return curveTotal(decode[progressJSON](t, f.ok(t, "GET", "/api/v1/messages/hello/progress")).Curve) == 3
	})
}

func TestEvents(t *testing.T) {
	f := newFixture(t)
	f.srv.sseInterval = 20 * time.Millisecond
	ts, client := f.client(t)
	open := func() (*http.Response, *bufio.Reader) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+"/api/v1/messages/hello/events", nil)
		req.Header.Set("Authorization", "Bearer "+acmeToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, bufio.NewReader(resp.Body)
	}
	next := func(br *bufio.Reader) progressJSON {
		t.Helper()
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("read event: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				var p progressJSON
				if err := json.Unmarshal([]byte(data), &p); err != nil {
					t.Fatal(err)
				}
				return p
			}
		}
	}
	resp, br := open()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events = %d %q", resp.StatusCode, ct)
	}
	if p := next(br); p.Read != 4 {
		t.Errorf("first event read = %d; want 4", p.Read)
	}
	f.read(t, f.hello, yidu.SignalButton, f.clock.Now(), 2, 3)
	if p := next(br); p.Read != 6 || p.Percent != 60 {
		t.Errorf("second event = %+v; want 6 read, 60%%", p)
	}
	// A signal that does not count changes by_signal only: still an event.
	f.signal(t, f.hello, yidu.SignalEnterAgent, f.clock.Now(), 5)
	if p := next(br); p.Read != 6 || p.BySignal.EnterAgent != 4 {
		t.Errorf("third event = %+v; want 6 read, by_signal.enter_agent 4", p)
	}
	if g := testutil.ToFloat64(f.srv.met.streams); g != 1 {
		t.Errorf("streams gauge = %v; want 1", g)
	}

	t.Run("bounded", func(t *testing.T) {
		for range cap(f.srv.streams) - 1 {
			f.srv.streams <- struct{}{}
		}
		defer func() {
			for range cap(f.srv.streams) - 1 {
				<-f.srv.streams
			}
		}()
		w := f.do(t, "GET", "/api/v1/messages/hello/events", acmeToken, nil)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("stream beyond the bound = %d; want 503", w.Code)
		}
	})

	t.Run("close ends streams", func(t *testing.T) {
		f.srv.Close()
		done := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, br); done <- err }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("stream still open after Close")
		}
	})
}

func TestMetrics(t *testing.T) {
	f := newFixture(t)
	f.do(t, "GET", "/api/v1/messages/hello", acmeToken, nil)
	f.do(t, "GET", "/api/v1/messages/hello", "", nil)
	if n := testutil.ToFloat64(f.srv.met.requests.WithLabelValues("/api/v1/messages/{msgid}", "200")); n != 1 {
		t.Errorf("requests{route=message,status=200} = %v; want 1", n)
	}
	if n := testutil.ToFloat64(f.srv.met.requests.WithLabelValues("/api/v1/*", "401")); n != 1 {
		t.Errorf("requests{status=401} = %v; want 1", n)
	}
	if _, err := f.reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

// TestDirectoryWithoutUsers: with idmap's UserIDs only, the lists carry
// UserIDs and departments (from the member sets) and no names; Dave, who
// left, has no active membership.
func TestDirectoryWithoutUsers(t *testing.T) {
	f := newFixtureWith(t, true)
	w := f.do(t, "GET", "/api/v1/messages/hello/recipients?state=read", acmeToken, nil)
	got := decode[recipientsJSON](t, w)
	if len(got.Items) != 4 {
		t.Fatalf("items = %+v", got.Items)
	}
	alice := got.Items[1]
	if alice.UserID != "Alice" || alice.Name != "" || len(alice.Departments) != 2 {
		t.Errorf("alice = %+v; want UserID and 2 departments, no name", alice)
	}
	w = f.do(t, "GET", "/api/v1/messages/hello/export.csv?state=read", acmeToken, nil)
	rows, err := csv.NewReader(bytes.NewReader(w.Body.Bytes()[3:])).ReadAll()
	if err != nil || len(rows) != 5 || rows[2][2] != "R&D 研发部; North 北区" && rows[2][2] != "North 北区; R&D 研发部" {
		t.Errorf("export = %q, %v", rows, err)
	}
	w = f.do(t, "POST", "/api/v1/messages/hello/remind", acmeToken, nil)
	if got := decode[remindJSON](t, w); got.Reminded != 6 {
		t.Errorf("reminded %d; want all 6 non-readers (status unknown)", got.Reminded)
	}
}

// TestBadCursorIs400: a cursor that names no position is the client's
// error on the API and on the page, never a 5xx with an ERROR log.
func TestBadCursorIs400(t *testing.T) {
	f := newFixture(t)
	c, _ := f.login(t)
	for _, target := range []string{"/api/v1/messages?cursor=zzz", "/?cursor=zzz"} {
		if w := f.page(c, target); w.Code != http.StatusBadRequest {
			t.Errorf("GET %s = %d; want 400", target, w.Code)
		}
	}
}

// TestStaticNoListingAndBearerCase: /static/ serves files, never a
// listing; the bearer scheme is case-insensitive.
func TestStaticNoListingAndBearerCase(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/static/", "/static"} {
		r := httptest.NewRequest("GET", p, nil)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code == http.StatusOK || strings.Contains(w.Body.String(), "app.js") {
			t.Errorf("GET %s = %d %q; want no listing", p, w.Code, w.Body)
		}
	}
	r := httptest.NewRequest("GET", "/static/app.js", nil)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("GET /static/app.js = %d; want 200", w.Code)
	}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		r := httptest.NewRequest("GET", "/api/v1/messages", nil)
		r.Header.Set("Authorization", scheme+" "+acmeToken)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("Authorization: %s … = %d; want 200", scheme, w.Code)
		}
	}
	r = httptest.NewRequest("GET", "/api/v1/messages", nil)
	r.Header.Set("Authorization", "Basic "+acmeToken)
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("Authorization: Basic … = %d; want 401", w.Code)
	}
}
