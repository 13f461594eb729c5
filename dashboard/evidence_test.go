package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/evidence"
)

// fakeEvidence answers from the fixture's directory and decides scope
// as evidence.Service does: a member the scope does not reach is
// ErrNotFound. The ZIP is one line per person.
type fakeEvidence struct{ f *fixture }

func (e fakeEvidence) uid(corp, userid string) (uint32, bool) {
	u, ok := fixturePerson(corp, userid)
	return u.UID, ok
}

func (e fakeEvidence) Record(_ context.Context, scope evidence.Scope, corp, msgid, userid string) (evidence.Record, error) {
	uid, ok := e.uid(corp, userid)
	if !ok || uid > 10 || !scope.Contains(uid) {
		return evidence.Record{}, evidence.ErrNotFound
	}
	// As evidence.Service answers: lists are empty, never null.
	return evidence.Record{CorpID: corp, MsgID: msgid, Person: evidence.Person{UID: uid, UserID: userid, Departments: []evidence.Department{}},
		Versions: []evidence.Version{}, Deliveries: []evidence.Delivery{}, Signals: []evidence.Signal{}, FollowUps: []evidence.FollowUp{},
		Timeline: []evidence.Event{}, Roots: map[string]string{}}, nil
}

func (e fakeEvidence) PDF(w io.Writer, rec evidence.Record) error {
	_, err := fmt.Fprintf(w, "%%PDF-1.4 %s", rec.Person.UserID)
	return err
}

func (e fakeEvidence) Select(_ context.Context, scope evidence.Scope, corp, msgid string, f evidence.Filter) (evidence.Selection, error) {
	var sel evidence.Selection
	for uid := uint32(1); uid <= 10; uid++ {
		u := acmePeople[uid-1]
		if corp != "acme" {
			u = yidu.User{}
		}
		if scope.Contains(uid) && (f.State != "read" || uid == 4) {
			sel.People = append(sel.People, evidence.Member{UID: uid, UserID: u.UserID})
		}
	}
	return sel, nil
}

func (e fakeEvidence) WriteZIP(_ context.Context, w io.Writer, sel evidence.Selection) (int, error) {
	for _, p := range sel.People {
		fmt.Fprintln(w, p.UserID)
	}
	return len(sel.People), nil
}

// TestEvidenceScope is the attacker's table for the evidence endpoints:
// the leader of department 4 (and a viewer token of 4) gets the records
// of 4's people and 404 for anyone else's, and a ZIP of 4's people only;
// the corp's token gets anyone's; each answer is one audit row, and
// without the row nothing is shown.
func TestEvidenceScope(t *testing.T) {
	f, callers, _ := scopeFixture(t, true)
	rec := &recorderFake{}
	f.srv.evidence, f.srv.audit = fakeEvidence{f}, rec
	admin := caller{name: "acme token", token: acmeToken}
	tests := []struct {
		who    caller
		target string
		want   int
		body   string
	}{
		{callers[1], "/api/v1/messages/hello/evidence/lisi", 200, `"userid":"lisi"`},
		{callers[1], "/api/v1/messages/hello/evidence/lisi.pdf", 200, "%PDF-1.4 lisi"},
		{callers[1], "/api/v1/messages/hello/evidence/zhangsan", 404, ""},
		{callers[1], "/api/v1/messages/hello/evidence/zhangsan.pdf", 404, ""},
		{callers[1], "/api/v1/messages/hello/evidence.zip", 200, "lisi\nAlice\n"},
		{callers[1], "/api/v1/messages/hello/evidence.zip?state=read", 200, "Alice\n"},
		{callers[1], "/api/v1/messages/hello/evidence.zip?state=maybe", 400, ""},
		{callers[1], "/api/v1/messages/rd/evidence/wangwu", 404, ""},
		{callers[1], "/api/v1/messages/secret/evidence/spy", 404, ""},
		{callers[0], "/api/v1/messages/hello/evidence/Alice", 200, `"userid":"Alice"`},
		{callers[0], "/api/v1/messages/hello/evidence/zhangsan", 404, ""},
		{admin, "/api/v1/messages/hello/evidence/zhangsan", 200, `"userid":"zhangsan"`},
		{admin, "/api/v1/messages/hello/evidence/notrecipient", 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.who.name+" "+tt.target, func(t *testing.T) {
			before := len(rec.events)
			w := tt.who.do(t, f, "GET", tt.target, "")
			if w.Code != tt.want {
				t.Fatalf("GET %s = %d %s; want %d", tt.target, w.Code, w.Body, tt.want)
			}
			if tt.want != 200 {
				if strings.Contains(w.Body.String(), "userid") {
					t.Errorf("a refusal shows a record: %s", w.Body)
				}
				return
			}
			if !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("GET %s = %q; want it to hold %q", tt.target, w.Body, tt.body)
			}
			if strings.Contains(tt.target, ".zip") && w.Body.String() != tt.body {
				t.Errorf("ZIP = %q; want exactly %q (the leader's people only)", w.Body, tt.body)
			}
			if len(rec.events) != before+1 || rec.events[before].Action != yidu.ActionEvidence {
				t.Fatalf("audit rows %v; want one evidence row", rec.events[before:])
			}
		})
	}
	ct := callers[1].do(t, f, "GET", "/api/v1/messages/hello/evidence/lisi.pdf", "").Header().Get("Content-Type")
	if ct != "application/pdf" {
		t.Errorf("PDF Content-Type = %q", ct)
	}
	rec.fail = true
	for _, target := range []string{"/api/v1/messages/hello/evidence/lisi", "/api/v1/messages/hello/evidence.zip"} {
		if w := callers[1].do(t, f, "GET", target, ""); w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "lisi") {
			t.Errorf("GET %s without its audit row = %d %s; want 503 and nothing shown", target, w.Code, w.Body)
		}
	}
}

// TestRegisterRetentionParam: POST /messages takes retention, refuses a
// bad one naming the field, and refuses it with send_at or draft
// (campaigns keeps none yet) rather than losing it.
func TestRegisterRetentionParam(t *testing.T) {
	tests := []struct {
		body string
		want string // "" accepted
	}{
		{`{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"retention":"3y"}`, ""},
		{`{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"retention":"3w"}`, "retention"},
		{`{"app":"hr","title":"t","audience":{"userids":["zhangsan"]},"retention":"3y","draft":true}`, "drafts"},
	}
	for _, tt := range tests {
		_, reg, err := decodeRegistration(strings.NewReader(tt.body))
		if tt.want == "" {
			if err != nil || reg.Retention.String() != "3y" {
				t.Errorf("decode(%s) = %v, %v; want retention 3y", tt.body, reg.Retention, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("decode(%s) = %v; want an error naming %q", tt.body, err, tt.want)
		}
	}
}
