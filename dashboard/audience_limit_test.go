package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/dashboard/internal/compose"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestSenderAudienceHTTP is issue 41 item 3 at the edge: a sender kept
// to department 4 (销售, carol) gets 403 naming the field for department
// 3, a tag outside it and 全员, whether previewing or sending, nothing is
// registered; the picker lists department 4 alone, no tag, no 全员, and
// only the people inside.
func TestSenderAudienceHTTP(t *testing.T) {
	const s4 = "sender-4-0123456789"
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Tokens = append(o.Tokens, access.Token{Name: "s4", Token: s4, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "acme", Apps: []string{"hr"}, Audience: yidu.SenderAudience{Departments: []int64{4}}}}})
	})
	m := withAudienceDirectory(t, f)
	acc, err := access.New(access.Config{}, m, f.clock.Now)
	testenv.Check(t, "access.New", err)
	f.setAccess(t, acc)

	registered := func() int { return f.count(t, "SELECT COUNT(*) FROM messages") }
	before := registered()
	for _, tc := range []struct {
		name, target, body string
		field              string
	}{
		{"preview department 3", "/api/v1/audience/preview", `{"app":"hr","audience":{"departments":[3]}}`, "audience.departments"},
		{"preview a tag outside", "/api/v1/audience/preview", `{"app":"hr","audience":{"tags":[5]}}`, "audience.tags"},
		{"preview 全员", "/api/v1/audience/preview", `{"app":"hr","audience":{"all":true}}`, "audience.all"},
		{"send to department 3", "/api/v1/messages", `{"msgid":"x3","app":"hr","title":"t","audience":{"departments":[3]},"send":true}`, "audience.departments"},
		{"send to a tag outside", "/api/v1/messages", `{"msgid":"x5","app":"hr","title":"t","audience":{"tags":[5]},"send":true}`, "audience.tags"},
		{"send to 全员", "/api/v1/messages", `{"msgid":"xa","app":"hr","title":"t","audience":{"all":true},"send":true}`, "audience.all"},
		{"send to alice", "/api/v1/messages", `{"msgid":"xu","app":"hr","title":"t","audience":{"userids":["carol","alice"]},"send":true}`, "audience.userids"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(t, "POST", tc.target, s4, strings.NewReader(tc.body))
			var j struct{ Error, Field string }
			_ = json.Unmarshal(w.Body.Bytes(), &j)
			if w.Code != http.StatusForbidden || j.Field != tc.field {
				t.Fatalf("POST %s = %d %s, want 403 with field %s", tc.target, w.Code, w.Body, tc.field)
			}
		})
	}
	if got := registered(); got != before {
		t.Errorf("registered %d notices, want none", got-before)
	}
	if w := f.do(t, "POST", "/api/v1/audience/preview", s4, strings.NewReader(`{"app":"hr","audience":{"departments":[4]}}`)); w.Code != 200 {
		t.Errorf("preview department 4 = %d %s, want 200", w.Code, w.Body)
	}

	t.Run("picker", func(t *testing.T) {
		var depts struct {
			Departments []compose.DepartmentJSON `json:"departments"`
			Everyone    *bool                    `json:"everyone"`
		}
		w := f.do(t, "GET", "/api/v1/directory/departments?app=hr", s4, nil)
		testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &depts))
		if len(depts.Departments) != 1 || depts.Departments[0].ID != 4 || depts.Everyone == nil || *depts.Everyone {
			t.Errorf("departments = %s, want department 4 alone and everyone false", w.Body)
		}
		var tags struct{ Tags []compose.TagJSON }
		w = f.do(t, "GET", "/api/v1/directory/tags?app=hr", s4, nil)
		testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &tags))
		if len(tags.Tags) != 0 {
			t.Errorf("tags = %s, want none", w.Body)
		}
		var people struct{ People []compose.PersonJSON }
		w = f.do(t, "GET", "/api/v1/directory/people?app=hr&q=a", s4, nil)
		testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &people))
		if len(people.People) != 1 || people.People[0].UserID != "carol" {
			t.Errorf("people = %s, want carol alone", w.Body)
		}
		// An admin still sees everything.
		w = f.do(t, "GET", "/api/v1/directory/departments?app=hr", acmeToken, nil)
		testenv.Check(t, "decode", json.Unmarshal(w.Body.Bytes(), &depts))
		if len(depts.Departments) != 4 || !*depts.Everyone {
			t.Errorf("admin's departments = %s, want 4 and everyone", w.Body)
		}
	})
}
