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
		CorpID:       "wwfake",
		Secret:       "sec",
		Departments:  []fakewecom.Department{{ID: 1, Name: "root"}, {ID: 2, ParentID: 1, Name: "eng"}, {ID: 3, ParentID: 2, Name: "be"}},
		Users:        []fakewecom.User{{UserID: "a", Name: "A", Departments: []int{1}}, {UserID: "b", Name: "B", Departments: []int{3}}},
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
	s := fakewecom.New(seed())
	base := fakewecom.Start(t, s)
	tok := call(t, base, "GET", "/cgi-bin/gettoken", url.Values{"corpid": {"wwfake"}, "corpsecret": {"sec"}}, "")["access_token"].(string)
	auth := url.Values{"access_token": {tok}}
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
			if len(l) != 1 || l[0].(map[string]any)["userid"] != "b" {
				t.Errorf("userlist = %v", l)
			}
		}},
		{"simplelist unknown department", "GET", "/cgi-bin/user/simplelist", with("department_id", "9"), "", fakewecom.ErrDepartmentMissing, nil},
		{"list_id first page", "POST", "/cgi-bin/user/list_id", auth, `{"limit":1}`, 0, func(t *testing.T, out map[string]any) {
			if out["next_cursor"] != "c1" || len(out["dept_user"].([]any)) != 1 {
				t.Errorf("page = %v", out)
			}
		}},
		{"list_id last page", "POST", "/cgi-bin/user/list_id", auth, `{"cursor":"c1","limit":10000}`, 0, func(t *testing.T, out map[string]any) {
			if out["next_cursor"] != "" || len(out["dept_user"].([]any)) != 1 {
				t.Errorf("page = %v", out)
			}
		}},
		{"list_id limit too big", "POST", "/cgi-bin/user/list_id", auth, `{"limit":10001}`, fakewecom.ErrBadParameter, nil},
		{"list_id bad cursor", "POST", "/cgi-bin/user/list_id", auth, `{"cursor":"zz"}`, fakewecom.ErrBadParameter, nil},
		{"send with invalid user", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"a|gone","msgtype":"template_card","agentid":1,"template_card":{"card_type":"button_interaction","task_id":"t1"}}`, 0,
			func(t *testing.T, out map[string]any) {
				if out["invaliduser"] != "gone" || out["response_code"] == "" {
					t.Errorf("send = %v", out)
				}
			}},
		{"send reusing task_id", "POST", "/cgi-bin/message/send", auth,
			`{"touser":"a","msgtype":"template_card","template_card":{"task_id":"t1"}}`, fakewecom.ErrTaskIDReused, nil},
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
	if sent := s.Sent(); len(sent) != 1 || sent[0].Body["touser"] != "a|gone" {
		t.Errorf("Sent = %+v; want the one accepted send", sent)
	}
	if got := fakewecom.URIModifier(base)("https://qyapi.weixin.qq.com/cgi-bin/gettoken?x=1"); got != base+"/cgi-bin/gettoken?x=1" {
		t.Errorf("URIModifier = %q", got)
	}
}
