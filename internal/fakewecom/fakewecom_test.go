package fakewecom_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
)

func seed() fakewecom.Corp {
	return fakewecom.Corp{
		CorpID: "wwfake",
		Apps: []fakewecom.App{
			{AgentID: 1, Secret: "sec"},
			{AgentID: 2, Secret: "narrow", VisibleDepartments: []int{3}, NoDepartmentNames: true, NoMemberNames: true},
		},
		ContactsSecret: "contacts",
		Departments:    []fakewecom.Department{{ID: 1, Name: "root"}, {ID: 2, ParentID: 1, Name: "eng"}, {ID: 3, ParentID: 2, Name: "be"}},
		Users: []fakewecom.User{
			{UserID: "a", Name: "A", Departments: []int{1}},
			{UserID: "b", Name: "B", Departments: []int{3}},
			{UserID: "c", Name: "C", Departments: []int{3, 1}},
		},
		InvalidUsers:    []string{"gone"},
		UnlicensedUsers: []string{"c"},
		Codes:           map[string]string{"code1": "a"},
	}
}

// call sends one request and decodes the JSON answer.
func call(t *testing.T, base, method, path string, q url.Values, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, base+path+"?"+q.Encode(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", path, resp.StatusCode)
	}
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestServer(t *testing.T) {
	newIP := seed()
	newIP.CorpID, newIP.ContactsIDsOnly = "wwnewip", true
	s := fakewecom.New(seed(), newIP)
	base := fakewecom.Start(t, s)
	corpToken := func(corp, secret string) string {
		return call(t, base, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {corp}, "corpsecret": {secret}}, "")["access_token"].(string)
	}
	token := func(secret string) string { return corpToken("wwfake", secret) }
	idsOnly := url.Values{"access_token": {corpToken("wwnewip", "contacts")}, "department_id": {"1"}}
	tok := token("sec")
	auth := url.Values{"access_token": {tok}}
	contacts := url.Values{"access_token": {token("contacts")}}
	narrowTok := token("narrow")
	narrow := func(k, v string) url.Values {
		q := url.Values{"access_token": {narrowTok}}
		if k != "" {
			q.Set(k, v)
		}
		return q
	}
	with := func(k, v string) url.Values {
		q := url.Values{"access_token": {tok}}
		q.Set(k, v)
		return q
	}

	tests := []struct {
		name, method, path string
		q                  url.Values
		body               string
		wantCode           float64
		check              func(t *testing.T, out map[string]any)
	}{
		{"gettoken wrong secret", "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"wwfake"}, "corpsecret": {"x"}}, "", fakewecom.ErrInvalidCredential, nil},
		{"gettoken unknown corp", "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"nope"}}, "", fakewecom.ErrInvalidCorpID, nil},
		{"bad token", "GET", "/cgi-bin/department/simplelist", url.Values{"access_token": {"forged"}}, "", fakewecom.ErrInvalidToken, nil},
		{"department subtree", "GET", "/cgi-bin/department/simplelist", with("id", "2"), "", 0, func(t *testing.T, out map[string]any) {
			if n := len(out["department_id"].([]any)); n != 2 {
				t.Errorf("subtree of 2 has %d departments; want 2", n)
			}
		}},
		{"department list names", "GET", "/cgi-bin/department/list", auth, "", 0, func(t *testing.T, out map[string]any) {
			d := out["department"].([]any)[2].(map[string]any)
			if d["name"] != "be" || d["parentid"] != 2.0 {
				t.Errorf("department = %v", d)
			}
		}},
		{"simplelist direct members", "GET", "/cgi-bin/user/simplelist", with("department_id", "3"), "", 0, func(t *testing.T, out map[string]any) {
			l := out["userlist"].([]any)
			if len(l) != 2 || l[0].(map[string]any)["userid"] != "b" || l[0].(map[string]any)["name"] != "B" {
				t.Errorf("userlist = %v", l)
			}
		}},
		{"simplelist departments the app sees", "GET", "/cgi-bin/user/simplelist", narrow("department_id", "3"), "", 0, func(t *testing.T, out map[string]any) {
			c := out["userlist"].([]any)[1].(map[string]any)
			if d := c["department"].([]any); c["userid"] != "c" || len(d) != 1 || d[0] != 3.0 {
				t.Errorf("member c = %v; want departments [3] (1 is outside the range)", c)
			}
			if _, ok := c["name"]; ok {
				t.Errorf("member c = %v; want no name (NoMemberNames)", c)
			}
		}},
		{"simplelist unknown department", "GET", "/cgi-bin/user/simplelist", with("department_id", "9"), "", fakewecom.ErrDepartmentMissing, nil},
		{"list_id with an app secret", "POST", "/cgi-bin/user/list_id", auth, `{"limit":1}`, fakewecom.ErrNoPermission, nil},
		{"simplelist with the contacts secret", "GET", "/cgi-bin/user/simplelist", url.Values{"access_token": contacts["access_token"], "department_id": {"3"}}, "", 0, nil},
		{"list_id first page", "POST", "/cgi-bin/user/list_id", contacts, `{"limit":1}`, 0, func(t *testing.T, out map[string]any) {
			if out["next_cursor"] != "c1" || len(out["dept_user"].([]any)) != 1 {
				t.Errorf("page = %v", out)
			}
		}},
		{"list_id last page", "POST", "/cgi-bin/user/list_id", contacts, `{"cursor":"c1","limit":10000}`, 0, func(t *testing.T, out map[string]any) {
			if out["next_cursor"] != "" || len(out["dept_user"].([]any)) != 3 {
				t.Errorf("page = %v", out)
			}
		}},
		{"list_id limit too big", "POST", "/cgi-bin/user/list_id", contacts, `{"limit":10001}`, fakewecom.ErrBadParameter, nil},
		{"list_id bad cursor", "POST", "/cgi-bin/user/list_id", contacts, `{"cursor":"zz"}`, fakewecom.ErrBadParameter, nil},
		{"send with invalid user", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"a|gone","msgtype":"template_card","agentid":1,"template_card":` + card("t1", `"main_title":{"title":"T"}`) + `}`, 0,
			func(t *testing.T, out map[string]any) {
				if out["invaliduser"] != "gone" || out["response_code"] == "" {
					t.Errorf("send = %v", out)
				}
			}},
		{"send with an unlicensed user", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"a|c|gone","msgtype":"text","agentid":1,"text":{"content":"x"}}`, 0,
			func(t *testing.T, out map[string]any) {
				if out["invaliduser"] != "gone" || out["unlicenseduser"] != "c" {
					t.Errorf("send = %v; want invaliduser gone, unlicenseduser c", out)
				}
			}},
		{"send to the unlicensed only", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"c","msgtype":"text","agentid":1,"text":{"content":"x"}}`, fakewecom.ErrAllInvalid, nil},
		{"send reusing task_id", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"a","msgtype":"template_card","agentid":1,"template_card":{"task_id":"t1"}}`, fakewecom.ErrTaskIDReused, nil},
		{"send as another agent", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"a","msgtype":"text","agentid":2,"text":{"content":"x"}}`, fakewecom.ErrAnotherAgent, nil},
		{"send with the contacts secret", "POST", "/cgi-bin/message/send", contacts,
			`{"touser":"a","msgtype":"text","agentid":1,"text":{"content":"x"}}`, fakewecom.ErrNoPermission, nil},
		{"send to nobody valid", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"gone|nobody","msgtype":"text","agentid":1,"text":{"content":"x"}}`, fakewecom.ErrAllInvalid, nil},
		{"send outside the visible range", "POST", "/cgi-bin/message/send", narrow("", ""),
			`{"touser":"A|b","msgtype":"text","agentid":2,"text":{"content":"x"}}`, 0, func(t *testing.T, out map[string]any) {
				if out["invaliduser"] != "a" {
					t.Errorf("invaliduser = %v; want a (outside the range, lower-cased)", out["invaliduser"])
				}
			}},
		{"narrow app sees its subtree", "GET", "/cgi-bin/department/simplelist", narrow("", ""), "", 0, func(t *testing.T, out map[string]any) {
			if l := out["department_id"].([]any); len(l) != 1 || l[0].(map[string]any)["id"] != 3.0 {
				t.Errorf("department_id = %v; want only 3", l)
			}
		}},
		{"narrow app gets no names", "GET", "/cgi-bin/department/list", narrow("", ""), "", 0, func(t *testing.T, out map[string]any) {
			if d := out["department"].([]any)[0].(map[string]any); d["name"] != nil {
				t.Errorf("department = %v; want no name", d)
			}
		}},
		{"narrow app outside its range", "GET", "/cgi-bin/user/simplelist", narrow("department_id", "1"), "", fakewecom.ErrNoPrivilege, nil},
		{"contacts secret from a new IP: list_id", "POST", "/cgi-bin/user/list_id", idsOnly, `{}`, 0, nil},
		{"contacts secret from a new IP: simplelist ids", "GET", "/cgi-bin/department/simplelist", idsOnly, "", 0, nil},
		{"contacts secret from a new IP: no names", "GET", "/cgi-bin/department/list", idsOnly, "", fakewecom.ErrUntrustedIP, nil},
		{"contacts secret from a new IP: no members", "GET", "/cgi-bin/user/simplelist", idsOnly, "", fakewecom.ErrUntrustedIP, nil},
		{"agent/get its own app", "GET", "/cgi-bin/agent/get", with("agentid", "1"), "", 0, func(t *testing.T, out map[string]any) {
			if p := out["allow_partys"].(map[string]any)["partyid"].([]any); len(p) != 1 || p[0] != 1.0 {
				t.Errorf("allow_partys = %v; want the root (whole corp)", p)
			}
		}},
		{"agent/get another app", "GET", "/cgi-bin/agent/get", with("agentid", "2"), "", fakewecom.ErrAnotherAgent, nil},
		{"agent/get with the contacts secret", "GET", "/cgi-bin/agent/get", contacts, "", fakewecom.ErrNoPermission, nil},
		{"oauth with the contacts secret", "GET", "/cgi-bin/auth/getuserinfo", contacts, "", fakewecom.ErrNoPermission, nil},
		{"callback ips", "GET", "/cgi-bin/getcallbackip", auth, "", 0, func(t *testing.T, out map[string]any) {
			if len(out["ip_list"].([]any)) == 0 {
				t.Error("empty ip_list")
			}
		}},
		{"oauth code", "GET", "/cgi-bin/auth/getuserinfo", with("code", "code1"), "", 0, func(t *testing.T, out map[string]any) {
			if out["userid"] != "a" {
				t.Errorf("userid = %v", out["userid"])
			}
		}},
		{"oauth bad code", "GET", "/cgi-bin/auth/getuserinfo", with("code", "nope"), "", fakewecom.ErrInvalidCode, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := call(t, base, tt.method, tt.path, tt.q, tt.body)
			if out["errcode"] != tt.wantCode {
				t.Fatalf("errcode = %v (%v); want %v", out["errcode"], out["errmsg"], tt.wantCode)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
	if sent := s.Sent(); len(sent) != 3 || sent[0].Body["touser"] != "a|gone" || sent[1].Body["touser"] != "a|c|gone" {
		t.Errorf("Sent = %+v; want the three accepted sends", sent)
	}
	if got := fakewecom.URIModifier(base)("https://qyapi.weixin.qq.com/cgi-bin/gettoken?x=1"); got != base+"/cgi-bin/gettoken?x=1" {
		t.Errorf("URIModifier = %q", got)
	}
}

// card returns a button_interaction template card with task_id task and
// extra fields (JSON members, may be empty).
func card(task, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"card_type":"button_interaction","task_id":"` + task + `","button_list":[{"text":"已读","style":1,"key":"k"}]` + extra + `}`
}

// send returns a message/send body to a of app 1 with template card c and
// top-level extra members.
func send(c, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"touser":"a","msgtype":"template_card","agentid":1,"template_card":` + c + extra + `}`
}

// TestMessages: template-card checks, the duplicate check, recall and
// its window, and failures set by a test, in one sequence on a fake clock.
func TestMessages(t *testing.T) {
	s := fakewecom.New(seed())
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	s.SetClock(func() time.Time { return now })
	base := fakewecom.Start(t, s)
	tok := func(secret string) url.Values {
		out := call(t, base, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"wwfake"}, "corpsecret": {secret}}, "")
		return url.Values{"access_token": {out["access_token"].(string)}}
	}
	app, other, contacts := tok("sec"), tok("narrow"), tok("contacts")
	const dupCheck = `"enable_duplicate_check":1,"duplicate_check_interval":600`
	long := func(n int) string { return strings.Repeat("字", n) }
	msgIDs := map[string]string{} // step name → msgid answered

	tests := []struct {
		name     string
		path     string
		q        url.Values
		body     string
		advance  time.Duration // the clock moves before the call
		wantCode float64
		check    func(t *testing.T, out map[string]any)
	}{
		{name: "card", path: "send", q: app, body: send(card("c1", `"main_title":{"title":"`+long(36)+`","desc":"`+long(44)+`"},"sub_title_text":"`+long(160)+`","card_action":{"type":1,"url":"https://intra.example.com/p/1"}`), dupCheck)},
		{name: "title too long", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"`+long(37)+`"}`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "desc too long", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"t","desc":"`+long(45)+`"}`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "body too long", path: "send", q: app, body: send(card("c2", `"sub_title_text":"`+long(161)+`"`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "no title nor body", path: "send", q: app, body: send(card("c2", ""), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "card_action url missing", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"t"},"card_action":{"type":1}`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "card_action relative url", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"t"},"card_action":{"type":1,"url":"/p/1"}`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "card_action bad type", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"t"},"card_action":{"type":7}`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "no buttons", path: "send", q: app, body: send(`{"card_type":"button_interaction","task_id":"c2","main_title":{"title":"t"}}`, ""), wantCode: fakewecom.ErrBadParameter},
		{name: "button text too long", path: "send", q: app, body: send(`{"card_type":"button_interaction","task_id":"c2","main_title":{"title":"t"},"button_list":[{"text":"`+long(11)+`","key":"k"}]}`, ""), wantCode: fakewecom.ErrBadParameter},
		{name: "button without key", path: "send", q: app, body: send(`{"card_type":"button_interaction","task_id":"c2","main_title":{"title":"t"},"button_list":[{"text":"ok"}]}`, ""), wantCode: fakewecom.ErrBadParameter},
		{name: "too many horizontal items", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"t"},"horizontal_content_list":[{"keyname":"a"},{"keyname":"a"},{"keyname":"a"},{"keyname":"a"},{"keyname":"a"},{"keyname":"a"},{"keyname":"a"}]`), ""), wantCode: fakewecom.ErrBadParameter},
		{name: "task_id with a space", path: "send", q: app, body: send(card("c 2", `"main_title":{"title":"t"}`), ""), wantCode: fakewecom.ErrBadTaskID},
		{name: "task_id of 129 bytes", path: "send", q: app, body: send(card(strings.Repeat("x", 129), `"main_title":{"title":"t"}`), ""), wantCode: fakewecom.ErrBadTaskID},
		{name: "interval over 4 hours", path: "send", q: app, body: send(card("c2", `"main_title":{"title":"t"}`), `"enable_duplicate_check":1,"duplicate_check_interval":14401`), wantCode: fakewecom.ErrBadParameter},
		{name: "duplicate within the interval", path: "send", q: app, advance: 5 * time.Minute,
			body: send(card("c1", `"main_title":{"title":"`+long(36)+`","desc":"`+long(44)+`"},"sub_title_text":"`+long(160)+`","card_action":{"type":1,"url":"https://intra.example.com/p/1"}`), dupCheck),
			check: func(t *testing.T, out map[string]any) {
				if out["msgid"] != msgIDs["card"] {
					t.Errorf("msgid = %v; want the first delivery's %v", out["msgid"], msgIDs["card"])
				}
			}},
		{name: "same card after the interval: task_id used", path: "send", q: app, advance: 6 * time.Minute,
			body:     send(card("c1", `"main_title":{"title":"`+long(36)+`","desc":"`+long(44)+`"},"sub_title_text":"`+long(160)+`","card_action":{"type":1,"url":"https://intra.example.com/p/1"}`), dupCheck),
			wantCode: fakewecom.ErrTaskIDReused},
		{name: "frequency limit set by the test", path: "send", q: app, body: send(card("c3", `"main_title":{"title":"t"}`), "")},
		{name: "after the frequency limit", path: "send", q: app, body: send(card("c3", `"main_title":{"title":"t"}`), "")},
		{name: "recall with the contacts secret", path: "recall", q: contacts, body: `{"msgid":"fake-msg-1"}`, wantCode: fakewecom.ErrNoPermission},
		{name: "recall another app's message", path: "recall", q: other, body: `{"msgid":"fake-msg-1"}`, wantCode: fakewecom.ErrCannotRecall},
		{name: "recall unknown msgid", path: "recall", q: app, body: `{"msgid":"nope"}`, wantCode: fakewecom.ErrCannotRecall},
		{name: "recall", path: "recall", q: app, body: `{"msgid":"fake-msg-1"}`},
		{name: "recall twice", path: "recall", q: app, body: `{"msgid":"fake-msg-1"}`, wantCode: fakewecom.ErrCannotRecall},
		{name: "recall after 24 hours", path: "recall", q: app, body: `{"msgid":"fake-msg-2"}`, advance: 24*time.Hour + time.Second, wantCode: fakewecom.ErrCannotRecall},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = now.Add(tt.advance)
			if tt.name == "frequency limit set by the test" {
				s.FailNext("/cgi-bin/message/send", fakewecom.ErrAPIFrequency, 1)
				tt.wantCode = fakewecom.ErrAPIFrequency
			}
			out := call(t, base, "POST", "/cgi-bin/message/"+tt.path, tt.q, tt.body)
			if out["errcode"] != tt.wantCode {
				t.Fatalf("errcode = %v (%v); want %v", out["errcode"], out["errmsg"], tt.wantCode)
			}
			if id, ok := out["msgid"].(string); ok {
				msgIDs[tt.name] = id
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
	sent := s.Sent()
	if len(sent) != 2 || sent[0].MsgID != "fake-msg-1" || sent[1].MsgID != "fake-msg-2" {
		t.Errorf("deliveries = %+v; want the card once and c3 once", sent)
	}
	if got := s.Recalled(); !slices.Equal(got, []string{"fake-msg-1"}) {
		t.Errorf("Recalled = %v; want [fake-msg-1]", got)
	}
}

// TestTagsAndLeaders: tag/list lists every tag to any app; tag/get
// returns only the caller's visible range (doc path 90213) and 40068 for
// an unknown tagid; department/list carries department_leader (doc path
// 90208); a forged token is 40014 everywhere.
func TestTagsAndLeaders(t *testing.T) {
	c := seed()
	c.Departments[1].Leaders = []string{"a", "c"}
	c.Tags = []fakewecom.Tag{{ID: 4, Name: "管理层", UserIDs: []string{"a", "b"}, Departments: []int{2, 3}}}
	s := fakewecom.New(c)
	base := fakewecom.Start(t, s)
	token := func(secret string) url.Values {
		tok := call(t, base, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"wwfake"}, "corpsecret": {secret}}, "")["access_token"].(string)
		return url.Values{"access_token": {tok}}
	}
	with := func(q url.Values, k, v string) url.Values {
		q = maps.Clone(q)
		q.Set(k, v)
		return q
	}
	whole, narrow, contacts := token("sec"), token("narrow"), token("contacts")

	if l := call(t, base, "GET", "/cgi-bin/tag/list", narrow, "")["taglist"].([]any); len(l) != 1 {
		t.Errorf("tag/list (narrow app) = %v; want every tag", l)
	}
	for _, tc := range []struct {
		name         string
		q            url.Values
		users, depts string
	}{
		{"whole corp", whole, "[a b]", "[2 3]"},
		{"visible range 3", narrow, "[b]", "[3]"},
		{"contacts", contacts, "[a b]", "[2 3]"},
	} {
		out := call(t, base, "GET", "/cgi-bin/tag/get", with(tc.q, "tagid", "4"), "")
		var users []string
		for _, u := range out["userlist"].([]any) {
			users = append(users, u.(map[string]any)["userid"].(string))
		}
		if got := fmt.Sprint(users); got != tc.users || fmt.Sprint(out["partylist"]) != tc.depts {
			t.Errorf("%s: tag/get users %s parties %v; want %s %s", tc.name, got, out["partylist"], tc.users, tc.depts)
		}
	}
	for _, id := range []string{"5", "x", ""} {
		if out := call(t, base, "GET", "/cgi-bin/tag/get", with(whole, "tagid", id), ""); out["errcode"] != float64(fakewecom.ErrInvalidTagID) {
			t.Errorf("tag/get tagid %q: errcode %v; want 40068", id, out["errcode"])
		}
	}
	if out := call(t, base, "GET", "/cgi-bin/tag/list", url.Values{"access_token": {"forged"}}, ""); out["errcode"] != float64(fakewecom.ErrInvalidToken) {
		t.Errorf("tag/list forged token: errcode %v", out["errcode"])
	}
	d := call(t, base, "GET", "/cgi-bin/department/list", whole, "")["department"].([]any)[1].(map[string]any)
	if fmt.Sprint(d["department_leader"]) != "[a c]" {
		t.Errorf("department_leader of 2 = %v; want [a c]", d["department_leader"])
	}
	// The narrow app sees 3 only: department 2 and its leaders are not listed.
	if l := call(t, base, "GET", "/cgi-bin/department/list", narrow, "")["department"].([]any); len(l) != 1 {
		t.Errorf("department/list (narrow) = %v; want department 3 alone", l)
	}
}
