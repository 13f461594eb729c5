package fakewecom_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

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
		InvalidUsers: []string{"gone"},
		Codes:        map[string]string{"code1": "a"},
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
			`{"touser":"a|gone","msgtype":"template_card","agentid":1,"template_card":{"card_type":"button_interaction","task_id":"t1"}}`, 0,
			func(t *testing.T, out map[string]any) {
				if out["invaliduser"] != "gone" || out["response_code"] == "" {
					t.Errorf("send = %v", out)
				}
			}},
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
	if sent := s.Sent(); len(sent) != 2 || sent[0].Body["touser"] != "a|gone" {
		t.Errorf("Sent = %+v; want the two accepted sends", sent)
	}
	if got := fakewecom.URIModifier(base)("https://qyapi.weixin.qq.com/cgi-bin/gettoken?x=1"); got != base+"/cgi-bin/gettoken?x=1" {
		t.Errorf("URIModifier = %q", got)
	}
}
