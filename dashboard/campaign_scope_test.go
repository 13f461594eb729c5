package dashboard

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestCampaignScope is the attacker's table over the campaign endpoints
// (issue 31): a sender of hr composes, schedules, edits, cancels and
// sends now hr's notices only, and never through hr2; a sender of hr2
// likewise; a viewer of department 4 sees no scheduled notice (404, like a
// missing one), may change no sent one (403), and the list of notices not
// sent yet holds each principal's apps' only. It fails before the fix: a
// sender was not an admin, so every notice of its own app was 404.
func TestCampaignScope(t *testing.T) {
	const senderHR, senderHR2, viewer4 = "sender-hr-0123456789", "sender-hr2-0123456789", "viewer-4-0123456789"
	f := newFixtureOpts(t, false, func(o *deps) {
		o.Apps = append(o.Apps, yidu.App{Name: "hr2", CorpID: "acme", AgentID: 1000009})
		o.Tokens = append(o.Tokens,
			access.Token{Name: "shr", Token: senderHR, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "acme", Apps: []string{"hr"}}}},
			access.Token{Name: "shr2", Token: senderHR2, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "acme", Apps: []string{"hr2"}}}},
			access.Token{Name: "v4", Token: viewer4, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}},
		)
		db := testenv.MySQL(t)
		st, err := store.New(db, store.Options{Directory: o.Mapper,
			Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		o.Campaigns = st
		o.Audit = audit.NewMySQL(db)
	})
	acc, err := access.New(access.Config{LeadersSee: true}, f.mapper, f.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	f.setAccess(t, acc)

	at := f.clock.Now().Add(time.Hour).Format(time.RFC3339)
	schedule := func(tok, msgid, app string) int {
		w := f.do(t, "POST", "/api/v1/messages", tok, strings.NewReader(
			`{"msgid":"`+msgid+`","app":"`+app+`","title":"t","audience":{"userids":["alice"]},"send":true,"send_at":"`+at+`"}`))
		return w.Code
	}
	for _, tc := range []struct {
		tok, msgid, app string
		want            int
	}{
		{senderHR, "s-hr", "hr", http.StatusCreated},
		{senderHR, "s-hr-b", "hr", http.StatusCreated},
		{senderHR2, "s-hr2", "hr2", http.StatusCreated},
		{senderHR2, "s-x", "hr", http.StatusBadRequest}, // through another app
		{viewer4, "s-v", "hr", http.StatusBadRequest},
	} {
		if got := schedule(tc.tok, tc.msgid, tc.app); got != tc.want {
			t.Errorf("schedule %s through %s = %d, want %d", tc.msgid, tc.app, got, tc.want)
		}
	}

	for _, tc := range []struct {
		name, tok, method, target, body string
		want                            int
	}{
		{"sender reads its app's notice", senderHR, "GET", "/api/v1/messages/s-hr", "", 200},
		{"admin reads it", acmeToken, "GET", "/api/v1/messages/s-hr", "", 200},
		{"sender of hr2 cannot read hr's", senderHR2, "GET", "/api/v1/messages/s-hr", "", 404},
		{"viewer cannot read a scheduled notice", viewer4, "GET", "/api/v1/messages/s-hr", "", 404},
		{"sender of hr2 cannot edit hr's", senderHR2, "PATCH", "/api/v1/messages/s-hr", `{"title":"x"}`, 404},
		{"viewer cannot edit it", viewer4, "PATCH", "/api/v1/messages/s-hr", `{"title":"x"}`, 404},
		{"sender of hr2 cannot cancel hr's", senderHR2, "POST", "/api/v1/messages/s-hr/cancel", "", 404},
		{"viewer cannot cancel it", viewer4, "POST", "/api/v1/messages/s-hr/cancel", "", 404},
		{"sender of hr2 cannot send hr's now", senderHR2, "POST", "/api/v1/messages/s-hr/send", "", 404},
		{"viewer cannot send it now", viewer4, "POST", "/api/v1/messages/s-hr/send", "", 404},
		{"sender edits its app's notice", senderHR, "PATCH", "/api/v1/messages/s-hr", `{"title":"改"}`, 200},
		{"sender cancels it", senderHR, "POST", "/api/v1/messages/s-hr/cancel", "", 200},
		{"sender sends its other one now", senderHR, "POST", "/api/v1/messages/s-hr-b/send", "", 202},
		{"sender of hr2 edits its own", senderHR2, "PATCH", "/api/v1/messages/s-hr2", `{"title":"改"}`, 200},
		// hello is a sent notice of hr the viewer sees (department 4).
		{"viewer may not change a sent notice it sees", viewer4, "PATCH", "/api/v1/messages/hello", `{"title":"x"}`, 403},
		{"viewer may not cancel it", viewer4, "POST", "/api/v1/messages/hello/cancel", "", 403},
		{"viewer may not set its follow-up", viewer4, "PUT", "/api/v1/messages/hello/follow_up", `{"reminders":1}`, 403},
		{"sender of hr2 does not see hello", senderHR2, "PATCH", "/api/v1/messages/hello", `{"title":"x"}`, 404},
		{"sender of hr: hello is sent", senderHR, "PATCH", "/api/v1/messages/hello", `{"title":"x"}`, 409},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		w := f.do(t, tc.method, tc.target, tc.tok, body)
		if got := w.Code; got != tc.want {
			t.Errorf("%s: %s %s = %d, want %d", tc.name, tc.method, tc.target, got, tc.want)
		}
	}

	// The lists of notices not sent yet: each sender's apps' only.
	for _, tc := range []struct {
		tok, state string
		want, not  []string
	}{
		{senderHR, "scheduled", []string{`"s-hr-b"`}, []string{`"s-hr2"`}},
		{senderHR, "cancelled", []string{`"s-hr"`}, nil},
		{senderHR2, "scheduled", []string{`"s-hr2"`}, []string{`"s-hr-b"`}},
		{viewer4, "scheduled", nil, []string{`"s-hr2"`, `"s-hr-b"`}},
		{viewer4, "cancelled", nil, []string{`"s-hr"`}},
		{acmeToken, "scheduled", []string{`"s-hr2"`, `"s-hr-b"`}, nil},
	} {
		w := f.do(t, "GET", "/api/v1/messages?state="+tc.state, tc.tok, nil)
		for _, s := range tc.want {
			if !strings.Contains(w.Body.String(), s) {
				t.Errorf("%s: list %s lacks %s: %s", tc.tok, tc.state, s, w.Body)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(w.Body.String(), s) {
				t.Errorf("%s: list %s shows %s: %s", tc.tok, tc.state, s, w.Body)
			}
		}
	}

	// A sent notice to a viewer: its View's numbers, not the audience as
	// asked nor the whole notice's send report.
	w := f.do(t, "GET", "/api/v1/messages/hello", viewer4, nil)
	for _, field := range []string{`"audience"`, `"send"`, `"follow_up"`} {
		if strings.Contains(w.Body.String(), field) {
			t.Errorf("GET hello as a viewer holds %s: %s", field, w.Body)
		}
	}
	// The directory of the compose page is its senders' only.
	for _, path := range []string{"/api/v1/directory/people?app=hr&q=a", "/api/v1/directory/departments?app=hr", "/api/v1/directory/tags?app=hr"} {
		if w := f.do(t, "GET", path, viewer4, nil); w.Code != http.StatusBadRequest {
			t.Errorf("GET %s as a viewer = %d, want 400 (no app of theirs)", path, w.Code)
		}
		if w := f.do(t, "GET", path, senderHR2, nil); w.Code != http.StatusBadRequest {
			t.Errorf("GET %s as a sender of hr2 = %d, want 400", path, w.Code)
		}
	}
}
