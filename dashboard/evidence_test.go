package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
		Timeline: []evidence.Event{}}, nil
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
	f.srv.dis.Evidence, f.srv.base.Audit = fakeEvidence{f}, rec
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
			// A streamed download (PDF, ZIP) writes a "started" row before
			// its first byte and an "ok" row when it is whole.
			want := []string{"ok"}
			if strings.HasSuffix(tt.target, ".pdf") || strings.Contains(tt.target, ".zip") {
				want = []string{"started", "ok"}
			}
			got := rec.events[before:]
			if len(got) != len(want) {
				t.Fatalf("audit rows %v; want evidence rows %v", got, want)
			}
			for i, e := range got {
				if e.Action != yidu.ActionEvidence || e.Outcome != want[i] {
					t.Errorf("audit row %d = %s %s; want evidence %s", i, e.Action, e.Outcome, want[i])
				}
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

// TestEvidenceHeldToThisSite (issue 46 item 7): a session's evidence
// download (record, PDF, ZIP) is held to this site as export.csv is: a
// browser that says nothing of where the request came from must show a
// Referer of this host; another site's is refused.
func TestEvidenceHeldToThisSite(t *testing.T) {
	f, callers, _ := scopeFixture(t, true)
	f.srv.dis.Evidence, f.srv.base.Audit = fakeEvidence{f}, &recorderFake{}
	lisi := callers[1]
	if lisi.cookie == nil {
		t.Fatal("callers[1] is not a session")
	}
	targets := []string{"/api/v1/messages/hello/evidence/lisi", "/api/v1/messages/hello/evidence/lisi.pdf",
		"/api/v1/messages/hello/evidence.zip", "/api/v1/messages/hello/export.csv"}
	headers := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"same-origin", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusOK},
		{"no Sec-Fetch-Site, Referer of this host", map[string]string{"Sec-Fetch-Site": "", "Referer": "http://example.com/messages/hello"}, http.StatusOK},
		{"no Sec-Fetch-Site, no Referer", map[string]string{"Sec-Fetch-Site": ""}, http.StatusForbidden},
		{"no Sec-Fetch-Site, another site's Referer", map[string]string{"Sec-Fetch-Site": "", "Referer": "https://evil.example/x"}, http.StatusForbidden},
		{"cross-site", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
	}
	for _, target := range targets {
		for _, h := range headers {
			t.Run(target+" "+h.name, func(t *testing.T) {
				w := f.browse(httptest.NewRequest("GET", target, nil), lisi.cookie, h.hdr)
				if w.Code != h.want {
					t.Errorf("GET %s (%s) = %d %s; want %d", target, h.name, w.Code, w.Body, h.want)
				}
				if h.want != http.StatusOK && strings.Contains(w.Body.String(), "lisi") {
					t.Errorf("a refusal shows the record: %s", w.Body)
				}
			})
		}
	}
}

// brokenZIP is fakeEvidence whose ZIP fails after its first person, as a
// record that cannot be read does midway.
type brokenZIP struct{ fakeEvidence }

func (b brokenZIP) WriteZIP(_ context.Context, w io.Writer, sel evidence.Selection) (int, error) {
	fmt.Fprintln(w, sel.People[0].UserID)
	return 1, errors.New("evidence: reminders of hello: scan error")
}

func (b brokenZIP) PDF(io.Writer, evidence.Record) error {
	return errors.New("evidence: pdf: font")
}

// TestEvidenceDownloadFailedAudited: a ZIP or a PDF cut short by an
// error leaves, after its "started" row, a "failed" one, never only a
// success (issue 49: failed ZIPs read 成功 in the audit log).
func TestEvidenceDownloadFailedAudited(t *testing.T) {
	f, callers, _ := scopeFixture(t, true)
	rec := &recorderFake{}
	f.srv.dis.Evidence, f.srv.base.Audit = brokenZIP{fakeEvidence{f}}, rec
	for _, target := range []string{"/api/v1/messages/hello/evidence.zip", "/api/v1/messages/hello/evidence/lisi.pdf"} {
		before := len(rec.events)
		func() {
			defer func() { _ = recover() }() // the handler aborts the connection
			callers[1].do(t, f, "GET", target, "")
		}()
		got := rec.events[before:]
		if len(got) != 2 || got[0].Outcome != "started" || got[1].Outcome != "failed" {
			t.Errorf("GET %s: audit rows %+v; want started then failed", target, got)
		}
	}
}
