package dashboard

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/dashboard/internal/compose"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// withAudienceDirectory gives f's compose page (campaign's Picking) a
// directory of its own, a real idmap.Mapper over a fresh database holding
// corp acme: 1 总部 > 2 研发 > 3 后端, 1 > 4 销售;
// alice (2), bob (3), carol (4), dave (3, left); bob leads 2; tag 5 is
// carol and department 2.
func withAudienceDirectory(tb testing.TB, f *fixture) *idmap.Mapper {
	tb.Helper()
	db := testenv.MySQL(tb)
	for _, q := range []string{
		"INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ('acme',1,0,'总部'),('acme',2,1,'研发'),('acme',3,2,'后端'),('acme',4,1,'销售')",
		"INSERT INTO users (corp_id, uid, userid, name, departments, status) VALUES ('acme',1,'alice','Alice 张','2',1),('acme',2,'bob','Bob 李','3',1),('acme',3,'carol','Carol 王','4',1),('acme',4,'dave','Dave','3',2)",
		"INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ('acme',2,1),('acme',3,2),('acme',4,3),('acme',3,4)",
		"INSERT INTO department_leaders (corp_id, dept_id, uid) VALUES ('acme',2,2)",
		"INSERT INTO tags (corp_id, tag_id, name) VALUES ('acme',5,'管理层')",
		"INSERT INTO tag_users (corp_id, tag_id, uid) VALUES ('acme',5,3)",
		"INSERT INTO tag_departments (corp_id, tag_id, dept_id) VALUES ('acme',5,2)",
		"INSERT INTO directory_versions (corp_id, version) VALUES ('acme',1)",
	} {
		_, err := db.Exec(q)
		testenv.Check(tb, "seed", err)
	}
	m, err := idmap.New(db, idmap.Options{})
	testenv.Check(tb, "idmap.New", err)
	f.rewire(tb, func(d *deps) { d.Picking = pickingDir{m} })
	return m
}

func TestDirectoryAPI(t *testing.T) {
	f := newFixture(t)
	m := withAudienceDirectory(t, f)
	get := func(target string, out any) int {
		t.Helper()
		w := f.do(t, "GET", "/api/v1"+target, acmeToken, nil)
		if w.Code == 200 && out != nil {
			testenv.Check(t, "decode "+target, json.Unmarshal(w.Body.Bytes(), out))
		}
		return w.Code
	}
	var depts struct {
		Departments []compose.DepartmentJSON `json:"departments"`
	}
	if code := get("/directory/departments?app=hr", &depts); code != 200 {
		t.Fatalf("departments: %d", code)
	}
	counts := map[int64]int{}
	for _, d := range depts.Departments {
		counts[d.ID] = d.Members
		if d.ID == 2 && !slices.Equal(d.Leaders, []string{"bob"}) {
			t.Errorf("leaders of 2 = %v", d.Leaders)
		}
	}
	if want := map[int64]int{1: 3, 2: 2, 3: 1, 4: 1}; !mapsEqual(counts, want) {
		t.Errorf("department members = %v; want %v (dave left)", counts, want)
	}
	var tags struct {
		Tags []compose.TagJSON `json:"tags"`
	}
	if get("/directory/tags?app=hr", &tags); len(tags.Tags) != 1 || tags.Tags[0].Members != 3 {
		t.Errorf("tags = %+v; want 管理层 with 3", tags.Tags)
	}
	var people struct {
		People []compose.PersonJSON `json:"people"`
	}
	if get("/directory/people?app=hr&q=BO", &people); len(people.People) != 1 || people.People[0].UserID != "bob" {
		t.Errorf("people q=BO = %+v", people.People)
	}
	if get("/directory/people?app=hr&q=张", &people); len(people.People) != 1 || people.People[0].UserID != "alice" {
		t.Errorf("people q=张 = %+v", people.People)
	}
	if get("/directory/people?app=hr&q=dave", &people); len(people.People) != 0 {
		t.Errorf("people q=dave (left) = %+v", people.People)
	}
	for _, target := range []string{"/directory/people?app=ops&q=a", "/directory/tags?app=nope", "/directory/people?app=hr&q=" + strings.Repeat("x", 65),
		"/directory/people?app=hr&q=a&limit=1000"} {
		if code := get(target, nil); code != 400 {
			t.Errorf("%s: %d; want 400", target, code)
		}
	}

	preview := func(body string) (int, map[string]any) {
		t.Helper()
		w := f.do(t, "POST", "/api/v1/audience/preview", acmeToken, strings.NewReader(body))
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	code, out := preview(`{"app":"hr","audience":{"tags":[5],"userids":["alice","dave","ghost"],"departments":[3]}}`)
	if code != 200 || out["recipients"] != 3.0 || out["left"] != 1.0 || len(out["unknown_userids"].([]any)) != 1 {
		t.Errorf("preview = %d %v; want 3 recipients, 1 left, [ghost]", code, out)
	}
	// The preview's count is the registration's expansion.
	x, err := m.Expand(context.Background(), "acme", yidu.Audience{Tags: []int64{5}, UserIDs: []string{"alice", "dave", "ghost"}, Departments: []int64{3}})
	testenv.Check(t, "Expand", err)
	if float64(x.Recipients.GetCardinality()) != out["recipients"] {
		t.Errorf("Expand %d; preview %v", x.Recipients.GetCardinality(), out["recipients"])
	}
	if code, out := preview(`{"app":"hr","audience":{"all":true}}`); code != 200 || out["recipients"] != 3.0 {
		t.Errorf("preview all = %d %v", code, out)
	}
	huge := `{"app":"hr","audience":{"userids":["` + strings.Repeat(`a","`, 100_001) + `b"]}}`
	for _, tc := range []struct{ body, field string }{
		{`{"app":"ops","audience":{"all":true}}`, "app"},
		{`{"app":"hr","audience":{}}`, "audience"},
		{`{"app":"hr","audience":{"tags":[-1]}}`, "audience"},
		{`{"app":"hr","audience":{"userids":"alice"}}`, "audience"},
		{huge, "audience"},
	} {
		code, out := preview(tc.body)
		if code != 400 || out["field"] != tc.field {
			t.Errorf("preview %.60s: %d %v; want 400 field %s", tc.body, code, out, tc.field)
		}
	}

	parse := func(ct, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest("POST", "/api/v1/audience/parse-list?app=hr", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+acmeToken)
		req.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		var out map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &out)
		return w.Code, out
	}
	if code, out := parse("text/csv", "userid,name\nALICE,A\nghost,G\nalice,again\n"); code != 200 ||
		len(out["userids"].([]any)) != 1 || len(out["unknown_userids"].([]any)) != 1 {
		t.Errorf("parse csv = %d %v", code, out)
	}
	if code, out := parse("application/octet-stream", "\x00\x01"); code != 400 || out["field"] != "list" {
		t.Errorf("parse binary = %d %v", code, out)
	}
	if code, out := parse("text/plain", "\x00\x01"); code != 400 || out["field"] != "list" {
		t.Errorf("parse NUL text = %d %v", code, out)
	}
}

func mapsEqual(a, b map[int64]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
