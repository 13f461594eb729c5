package dashboard

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
)

// refusedWrites are the API's write routes as a viewer of 北区 tries
// them (who sees hr's notice hello and may do nothing to it): the status
// and the one audit row each refusal leaves ("" for none), from
// access.Decide's Decision (issue 47: never from the route or the
// status). TestRefusedRoutesCovered checks that every write route is
// here.
var refusedWrites = []struct {
	name, method, route, target, body string
	code                              int
	row                               string
}{
	{"PATCH a new version", "PATCH", "/api/v1/messages/{msgid}", "/api/v1/messages/hello", `{"content":{"markdown":"改写"},"reacknowledge":true}`, http.StatusForbidden, "edit/hello"},
	{"PATCH a field", "PATCH", "/api/v1/messages/{msgid}", "/api/v1/messages/hello", `{"title":"改写"}`, http.StatusForbidden, "edit/hello"},
	{"cancel", "POST", "/api/v1/messages/{msgid}/cancel", "/api/v1/messages/hello/cancel", "", http.StatusForbidden, "cancel/hello"},
	{"send now", "POST", "/api/v1/messages/{msgid}/send", "/api/v1/messages/hello/send", "", http.StatusForbidden, "send/hello"},
	{"remind", "POST", "/api/v1/messages/{msgid}/remind", "/api/v1/messages/hello/remind", "", http.StatusForbidden, "remind/hello"},
	{"recall", "POST", "/api/v1/messages/{msgid}/recall", "/api/v1/messages/hello/recall", "", http.StatusForbidden, "recall/hello"},
	{"follow-up", "PUT", "/api/v1/messages/{msgid}/follow_up", "/api/v1/messages/hello/follow_up", `{"reminders":["2h"]}`, http.StatusForbidden, "follow_up_change/hello"},
	{"cancel a round", "POST", "/api/v1/messages/{msgid}/follow_up/cancel-round", "/api/v1/messages/hello/follow_up/cancel-round", "", http.StatusForbidden, "follow_up_change/hello"},
	{"end standing", "PATCH", "/api/v1/messages/{msgid}/standing", "/api/v1/messages/hello/standing", `{"until":null}`, http.StatusForbidden, "edit/hello"},
	{"upload", "POST", "/api/v1/attachments", "/api/v1/attachments?app=hr", "--x--", http.StatusForbidden, "upload/"},
	{"create a template of hr", "POST", "/api/v1/templates", "/api/v1/templates", `{"app":"hr","name":"n","title":"t"}`, http.StatusBadRequest, "template/"},
	{"change a template of hr", "PUT", "/api/v1/templates/{id}", "/api/v1/templates/1", `{"app":"hr","name":"n","title":"t"}`, http.StatusBadRequest, "template/"},
	{"delete a template", "DELETE", "/api/v1/templates/{id}", "/api/v1/templates/1", "", http.StatusNotFound, "template/"},
	// An app the caller may not send through is, to them, unknown: bad
	// input, no row (as the compose page's directory answers).
	{"post through hr", "POST", "/api/v1/messages", "/api/v1/messages", `{"app":"hr","msgid":"x1","title":"t","touser":["u1"]}`, http.StatusBadRequest, ""},
	// The approval's steps open through campaign's ForApprover: a notice
	// the caller neither wrote nor approves is not found to them.
	{"approve", "POST", "/api/v1/messages/{msgid}/approval", "/api/v1/messages/hello/approval", `{"approve":true,"version_hash":"x"}`, http.StatusNotFound, ""},
	{"nudge", "POST", "/api/v1/messages/{msgid}/approval/nudge", "/api/v1/messages/hello/approval/nudge", "", http.StatusNotFound, ""},
	{"withdraw", "POST", "/api/v1/messages/{msgid}/approval/withdraw", "/api/v1/messages/hello/approval/withdraw", "", http.StatusNotFound, ""},
}

// TestRefusedWritesAudited is issue 46 item 7's "a refused PATCH, upload
// or template change leaves no audit row", over every write route (issue
// 47): each, by a viewer of 北区, is refused and leaves exactly one row,
// the act's, with outcome refused and the viewer as actor; invalid input
// leaves none.
func TestRefusedWritesAudited(t *testing.T) {
	const viewerTok = "viewer-token-0123456789"
	db := testenv.MySQL(t)
	rec := audit.NewMySQL(db)
	f := newFixtureOpts(t, false, func(o *deps) {
		s, err := store.New(db, store.Options{Directory: o.Mapper, Apps: o.Apps, Now: o.Now})
		testenv.Check(t, "store.New", err)
		atts, err := attachment.New(db, attachment.Options{Now: o.Now})
		testenv.Check(t, "attachment.New", err)
		ns, err := notice.New(db, atts, notice.Options{Now: o.Now})
		testenv.Check(t, "notice.New", err)
		o.Campaigns, o.Audit, o.AuditLog, o.Notices, o.Attachments = s, rec, rec, ns, atts
		o.Templates = store.NewTemplates(db, o.Apps, o.Now)
		o.Tokens = append(o.Tokens, access.Token{Name: "v4", Token: viewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}})
	})
	acc, err := access.New(access.Config{LeadersSee: true}, f.mapper, f.clock.Now)
	testenv.Check(t, "access.New", err)
	f.setAccess(t, acc)
	viewer := access.NewPrincipal("v4", access.KindToken, false, []access.Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: []int64{4}}}})
	for _, tc := range refusedWrites {
		t.Run(tc.name, func(t *testing.T) {
			_, err := db.Exec("DELETE FROM audit_events")
			testenv.Check(t, "clear audit", err)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			w := f.do(t, tc.method, tc.target, viewerTok, body)
			if code := w.Result().StatusCode; code != tc.code {
				t.Fatalf("%s %s = %d %s; want %d", tc.method, tc.target, code, w.Body, tc.code)
			}
			rows := testenv.Column[string](t, db, "SELECT CONCAT(action, '/', msgid, '/', outcome, '/', actor, '/', role) FROM audit_events")
			if tc.row == "" {
				if len(rows) != 0 {
					t.Errorf("audit rows = %v; want none", rows)
				}
				return
			}
			if want := tc.row + "/refused/v4/viewer"; len(rows) != 1 || (rows[0] != want && rows[0] != strings.TrimSuffix(want, "viewer")) {
				t.Fatalf("audit rows = %v; want one, %s", rows, want)
			}
			// A refusal access decided is its Decision's row, field by
			// field (the reason as its detail).
			act, msgID, _ := strings.Cut(tc.row, "/")
			if act == "template" {
				return // refused by campaign's store, or as an unknown app
			}
			target := access.Target{Corp: "acme", App: "hr", MsgID: msgID, Standing: strings.HasSuffix(tc.route, "/standing")}
			d := access.Decide(viewer, yidu.Action(act), target)
			want := d.Event
			want.Outcome = "refused"
			got := testenv.Column[string](t, db, "SELECT CONCAT_WS('|', actor, actor_kind, role, action, corp_id, app, msgid, outcome, detail) FROM audit_events")[0]
			if w := strings.Join([]string{want.Actor, want.ActorKind, want.Role, string(want.Action), want.CorpID, want.App, want.MsgID, want.Outcome, want.Detail}, "|"); d.Allowed || got != w {
				t.Errorf("audit row = %s; want the Decision's, %s (allowed %v)", got, w, d.Allowed)
			}
			if !strings.Contains(w.Body.String(), d.Reason) {
				t.Errorf("answer %s does not give the Decision's reason %q", w.Body, d.Reason)
			}
		})
	}
	t.Run("invalid input leaves none", func(t *testing.T) {
		_, err := db.Exec("DELETE FROM audit_events")
		testenv.Check(t, "clear audit", err)
		if w := f.do(t, "PUT", "/api/v1/templates/1", acmeToken, strings.NewReader(`{"app":"nope"}`)); w.Code != http.StatusBadRequest {
			t.Fatalf("unknown app = %d; want 400", w.Code)
		}
		if rows := testenv.Column[string](t, db, "SELECT action FROM audit_events"); len(rows) != 0 {
			t.Errorf("audit rows for invalid input = %v; want none", rows)
		}
	})
}

// TestRefusedRoutesCovered: every API write route is in refusedWrites
// (a refusal of it is shown to leave its row, or none on purpose), but
// the writes that are reads (previews) and so no act.
func TestRefusedRoutesCovered(t *testing.T) {
	f := newFixture(t)
	apart := map[string]bool{
		"POST /api/v1/audience/preview": true, "POST /api/v1/audience/parse-list": true, "POST /api/v1/content/preview": true,
		"POST /api/v1/messages/{msgid}/approval/preview": true,
	}
	covered := map[string]bool{}
	for _, tc := range refusedWrites {
		covered[tc.method+" "+tc.route] = true
	}
	rt, ok := f.h.(chi.Routes)
	if !ok {
		t.Fatalf("Routes() is %T, not chi.Routes", f.h)
	}
	n := 0
	err := chi.Walk(rt, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		if !strings.HasPrefix(route, "/api/v1/") || safeMethod(method) || apart[method+" "+route] {
			return nil
		}
		n++
		if !covered[method+" "+route] {
			t.Errorf("%s %s: no test shows what its refusal leaves in the audit (refusedWrites)", method, route)
		}
		return nil
	})
	testenv.Check(t, "chi.Walk", err)
	if n < 15 {
		t.Fatalf("walked %d write routes; want the API's", n)
	}
}
