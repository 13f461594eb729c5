package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
)

// The HTTP edge over small fakes of the three services: what each
// service answers is translated to a status and a body, whatever decided
// it. The services' decisions are tested in their packages on MySQL and
// Redis.

// tokenOnly is Identities with one bearer token, an admin of corp acme.
type tokenOnly struct{ Identities }

func (tokenOnly) Bearer(tok string) (*access.Principal, bool) {
	return access.NewPrincipal("t", access.KindToken, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "acme"}}}), tok == acmeToken
}

// serveAs answers method target from srv as the bearer of acmeToken;
// a body is JSON ("" for none).
func serveAs(srv *Server, method, target, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	r.Header.Set("Authorization", "Bearer "+acmeToken)
	w := httptest.NewRecorder()
	srv.Routes().ServeHTTP(w, r)
	return w
}

// oneNotice is Progress that finds one notice, seen whole.
type oneNotice struct{ Progress }

func (oneNotice) Find(_ context.Context, _ *access.Principal, id string) (yidu.Message, access.View, error) {
	if id != "n1" {
		return yidu.Message{}, access.View{}, yidu.ErrNotFound
	}
	return yidu.Message{CorpID: "acme", MsgID: "n1", App: "hr"}, access.Everyone, nil
}

func (o oneNotice) Locate(ctx context.Context, _ []string, id string) (yidu.Message, bool, error) {
	m, _, err := o.Find(ctx, nil, id)
	return m, err == nil, nil
}

// reminding is Campaign whose Remind answers rep, err.
type reminding struct {
	Campaign
	rep campaign.RemindReport
	err error
}

func (c reminding) Remind(context.Context, campaign.Remind) (campaign.RemindReport, error) {
	return c.rep, c.err
}

// TestRemindTranslated: campaign's answers to a reminder become 200 with
// the report, 429 when it is claimed elsewhere or too soon, 403, 409
// for a recalled notice; an unknown notice is 404 without asking
// campaign.
func TestRemindTranslated(t *testing.T) {
	next := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		msgID  string
		acts   reminding
		code   int
		output string
	}{
		{"reminded", "n1", reminding{rep: campaign.RemindReport{RemindReport: yidu.RemindReport{Reminded: 6, SendReport: yidu.SendReport{Batches: 1}}, Unread: 7, Skipped: 1, NextAllowedAt: next}}, 200,
			`{"reminded":6,"next_allowed_at":"2026-03-02T10:00:00Z","unread":7,"batches":1,"refused":0,"unknown":0,"invalid":0,"skipped":1}`},
		{"claimed by another replica", "n1", reminding{err: campaign.ErrBusy}, http.StatusTooManyRequests, ""},
		{"too soon", "n1", reminding{err: &campaign.TooSoonError{Next: next}}, http.StatusTooManyRequests, ""},
		{"forbidden", "n1", reminding{err: errors.Join(campaign.ErrForbidden)}, http.StatusForbidden, ""},
		{"recalled", "n1", reminding{err: yidu.ErrRecalled}, http.StatusConflict, ""},
		{"no ledger", "n1", reminding{err: campaign.ErrNoReminderLog}, http.StatusServiceUnavailable, ""},
		{"unknown notice", "n2", reminding{err: errors.New("campaign must not be asked")}, http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(tokenOnly{}, tt.acts, oneNotice{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			w := serveAs(srv, "POST", "/api/v1/messages/"+tt.msgID+"/remind", "")
			if w.Code != tt.code {
				t.Fatalf("remind = %d %s; want %d", w.Code, w.Body, tt.code)
			}
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q is not JSON: %v", w.Body, err)
			}
			if tt.output != "" && w.Body.String() != tt.output+"\n" {
				t.Errorf("body = %s; want %s", w.Body, tt.output)
			}
			if tt.output == "" && body["error"] == "" {
				t.Errorf("body = %s; want an error", w.Body)
			}
		})
	}
}

// noDirectory is Campaign without a directory to pick from.
type noDirectory struct{ Campaign }

func (noDirectory) Picker(context.Context, *access.Principal, yidu.App) (campaign.Picker, error) {
	return campaign.Picker{}, campaign.ErrNoDirectory
}

// TestNoDirectoryTranslated: campaign's ErrNoDirectory is 501 on the
// compose page's directory endpoints, after the app is checked (400).
func TestNoDirectoryTranslated(t *testing.T) {
	srv, err := New(tokenOnly{}, noDirectory{}, oneNotice{}, Options{Apps: []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for target, want := range map[string]int{
		"/api/v1/directory/departments?app=hr":  http.StatusNotImplemented,
		"/api/v1/directory/tags?app=hr":         http.StatusNotImplemented,
		"/api/v1/directory/departments?app=ops": http.StatusBadRequest,
	} {
		w := serveAs(srv, "GET", target, "")
		if w.Code != want {
			t.Errorf("GET %s = %d %s; want %d", target, w.Code, w.Body, want)
		}
	}
}

// signingIn is Identities whose password sign-in answers err (nil: a
// session "s1" of an admin of acme), with one audit row it says the
// attempt is due.
type signingIn struct {
	tokenOnly
	err error
}

func (s signingIn) SignIn(_ context.Context, _, user, _ string) (access.Attempt, error) {
	row := audit.Event{Actor: user, ActorKind: "password", Action: yidu.ActionSignInFailed, Outcome: "refused", Detail: "as access said"}
	if s.err != nil {
		return access.Attempt{Audit: []audit.Event{row}}, s.err
	}
	p, _ := s.Bearer(acmeToken)
	row.Action, row.Outcome = yidu.ActionSignIn, "ok"
	return access.Attempt{ID: "s1", Session: &access.SignIn{Principal: p, CSRF: "c1", Expires: time.Now().Add(time.Hour)},
		Audit: []audit.Event{row}}, nil
}

func (signingIn) TTL() time.Duration { return time.Hour }

// TestSignInTranslated: access's answer to a password sign-in is a
// redirect with the session cookie, or the form again with 401 (wrong
// name or password), 429 with Retry-After (its limits) or 503 (the
// session store down), never a cookie, and the rows access said it is
// due are written as given; a bearer token it does not know is 401.
func TestSignInTranslated(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		code       int
		retryAfter string
		cookie     bool
	}{
		{"signed in", nil, http.StatusSeeOther, "", true},
		{"wrong password", fmt.Errorf("access: sign in: %w", access.ErrBadPassword), http.StatusUnauthorized, "", false},
		{"rate limited", access.ErrRateLimited, http.StatusTooManyRequests, "60", false},
		{"sessions down", errors.New("redis: connection refused"), http.StatusServiceUnavailable, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorderFake{}
			srv, err := New(signingIn{err: tt.err}, reminding{}, oneNotice{}, Options{Audit: rec})
			testenv.Check(t, "New", err)
			defer srv.Close()
			r := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"username": {"alice"}, "password": {"x"}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			w := httptest.NewRecorder()
			srv.Routes().ServeHTTP(w, r)
			got := slices.ContainsFunc(w.Result().Cookies(), func(c *http.Cookie) bool { return c.Name == sessionCookie && c.Value != "" })
			if w.Code != tt.code || got != tt.cookie || w.Header().Get("Retry-After") != tt.retryAfter {
				t.Errorf("sign-in = %d, cookie %v, Retry-After %q; want %d, %v, %q", w.Code, got, w.Header().Get("Retry-After"), tt.code, tt.cookie, tt.retryAfter)
			}
			// The rows access said the attempt is due are written as given.
			if len(rec.events) != 1 || rec.events[0].Actor != "alice" || rec.events[0].Detail != "as access said" {
				t.Errorf("rows %+v; want access's one row", rec.events)
			}
		})
	}
	srv, err := New(signingIn{}, reminding{}, oneNotice{}, Options{})
	testenv.Check(t, "New", err)
	defer srv.Close()
	r := httptest.NewRequest("GET", "/api/v1/messages/n1", nil)
	r.Header.Set("Authorization", "Bearer not-"+acmeToken)
	w := httptest.NewRecorder()
	srv.Routes().ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized {
		t.Errorf("unknown token = %d; want 401", w.Code)
	}
}

// finding is Progress whose Find answers err for every notice but n1,
// and whose Select answers selErr.
type finding struct {
	oneNotice
	err, selErr error
}

func (f finding) Find(ctx context.Context, p *access.Principal, id string) (yidu.Message, access.View, error) {
	if id == "n1" {
		return f.oneNotice.Find(ctx, p, id)
	}
	return yidu.Message{}, access.View{}, f.err
}

func (f finding) Select(context.Context, yidu.Message, access.View, *access.Principal, progress.Query) (*progress.Selection, error) {
	return nil, f.selErr
}

// TestFindTranslated: progress's answers on a notice's routes: not found
// (or not in the caller's View) is 404, a backend down or slow is 503,
// anything else 500; a department the directory does not know is 400.
func TestFindTranslated(t *testing.T) {
	tests := []struct {
		name   string
		target string
		prog   finding
		code   int
	}{
		{"not found", "/api/v1/messages/n2/progress", finding{err: fmt.Errorf("%w: n2", yidu.ErrNotFound)}, http.StatusNotFound},
		{"unavailable", "/api/v1/messages/n2/progress", finding{err: fmt.Errorf("progress: counts: %w", progress.ErrUnavailable)}, http.StatusServiceUnavailable},
		{"MySQL down", "/api/v1/messages/n2", finding{err: fmt.Errorf("progress: get message: %w", &net.OpError{Op: "dial", Err: errors.New("refused")})}, http.StatusServiceUnavailable},
		{"deadline", "/api/v1/messages/n2/recipients", finding{err: context.DeadlineExceeded}, http.StatusServiceUnavailable},
		{"a bug", "/api/v1/messages/n2/progress", finding{err: errors.New("progress: boom")}, http.StatusInternalServerError},
		{"unknown department", "/api/v1/messages/n1/recipients?department=99", finding{selErr: fmt.Errorf("%w: 99", progress.ErrUnknownDepartment)}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(tokenOnly{}, reminding{}, tt.prog, Options{})
			testenv.Check(t, "New", err)
			defer srv.Close()
			w := serveAs(srv, "GET", tt.target, "")
			var body map[string]any
			if w.Code != tt.code || json.Unmarshal(w.Body.Bytes(), &body) != nil || body["error"] == "" {
				t.Errorf("GET %s = %d %s; want %d with an error", tt.target, w.Code, w.Body, tt.code)
			}
		})
	}
}

// drafting is Campaign holding one draft, d1 of app hr, whose edit,
// cancel and send now answer err.
type drafting struct {
	Campaign
	err error
}

func (drafting) Notice(_ context.Context, _ *access.Principal, id string) (yidu.Notice, error) {
	if id != "d1" {
		return yidu.Notice{}, yidu.ErrNotFound
	}
	return yidu.Notice{MsgID: "d1", App: yidu.App{Name: "hr", CorpID: "acme", AgentID: 1}, Title: "草稿", State: yidu.StateDraft}, nil
}

func (d drafting) Cancel(_ context.Context, _ *access.Principal, n yidu.Notice) (yidu.Notice, []campaign.Act, error) {
	n.State = yidu.StateCancelled
	return n, nil, d.err
}

func (d drafting) Edit(_ context.Context, _ *access.Principal, n yidu.Notice, p yidu.Patch, _ *yidu.Policy) (yidu.Notice, []campaign.Act, error) {
	if p.Title != nil {
		n.Title = *p.Title
	}
	return n, nil, d.err
}

func (d drafting) SendNow(_ context.Context, _ *access.Principal, n yidu.Notice) (yidu.Notice, []campaign.Act, error) {
	return n, nil, d.err
}

// TestNoticeActsTranslated: campaign's answers to an edit, cancel and
// send now of a notice not sent yet: done (200, 202), a refusal of the caller (403,
// an audience's field named), a state that forbids it (409 naming
// "state"), an approval pending (409), a field wrong (400 naming it),
// scheduling not configured (503), a notice it does not know (404).
func TestNoticeActsTranslated(t *testing.T) {
	tests := []struct {
		name, target string
		err          error
		code         int
		field        string
	}{
		{"edited", "/api/v1/messages/d1", nil, http.StatusOK, ""},
		{"edited to a title too long", "/api/v1/messages/d1", yidu.Fieldf("title", "title: at most 128 characters on a card"), http.StatusBadRequest, "title"},
		{"edited to a tag outside the sender's audience", "/api/v1/messages/d1", &campaign.AudienceError{Field: "audience.tags", Reason: "tag 5"}, http.StatusForbidden, "audience.tags"},
		{"edited once sending", "/api/v1/messages/d1", fmt.Errorf("%w: sending", yidu.ErrNotEditable), http.StatusConflict, "state"},
		{"canceled", "/api/v1/messages/d1/cancel", nil, http.StatusOK, ""},
		{"sent now", "/api/v1/messages/d1/send", nil, http.StatusAccepted, ""},
		{"not the caller's", "/api/v1/messages/d1/send", fmt.Errorf("%w: a sender of another app", campaign.ErrForbidden), http.StatusForbidden, ""},
		{"outside the sender's audience", "/api/v1/messages/d1/send", &campaign.AudienceError{Field: "audience.departments", Reason: "department 3"}, http.StatusForbidden, "audience.departments"},
		{"started sending", "/api/v1/messages/d1/cancel", fmt.Errorf("%w: sending", yidu.ErrNotEditable), http.StatusConflict, "state"},
		{"approval pending", "/api/v1/messages/d1/send", fmt.Errorf("%w: waiting for its approver", campaign.ErrApproval), http.StatusConflict, ""},
		{"a field wrong", "/api/v1/messages/d1/send", yidu.Fieldf("send_at", "send_at: in the past"), http.StatusBadRequest, "send_at"},
		{"not configured", "/api/v1/messages/d1/send", campaign.ErrNoCampaigns, http.StatusServiceUnavailable, ""},
		{"unknown", "/api/v1/messages/d2/cancel", errors.New("campaign must not be asked"), http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(tokenOnly{}, drafting{err: tt.err}, oneNotice{}, Options{Apps: []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1}}})
			testenv.Check(t, "New", err)
			defer srv.Close()
			method, patch := "POST", ""
			if !strings.HasSuffix(tt.target, "/cancel") && !strings.HasSuffix(tt.target, "/send") {
				method, patch = "PATCH", `{"title":"新标题"}`
			}
			w := serveAs(srv, method, tt.target, patch)
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tt.code {
				t.Fatalf("%s %s = %d %s; want %d", method, tt.target, w.Code, w.Body, tt.code)
			}
			if f, _ := body["field"].(string); f != tt.field {
				t.Errorf("field = %q; want %q (%s)", f, tt.field, w.Body)
			}
			if tt.err == nil && body["msgid"] != "d1" {
				t.Errorf("body = %s; want the notice", w.Body)
			}
		})
	}
}

// posting is Campaign whose Post answers res, err.
type posting struct {
	Campaign
	res campaign.Posted
	err error
}

func (p posting) Post(context.Context, *access.Principal, campaign.Post) (campaign.Posted, error) {
	return p.res, p.err
}

func (posting) FollowUpOf(context.Context, yidu.Message) (loops.FollowUp, bool, error) {
	return loops.FollowUp{}, false, nil
}

// warming is oneNotice that builds no department tree.
type warming struct{ oneNotice }

func (warming) WarmDepartments(context.Context, string) {}

// auditRows is Auditor keeping "action outcome msgid people" per row.
type auditRows struct{ rows *[]string }

func (a auditRows) Record(_ context.Context, e audit.Event) error {
	*a.rows = append(*a.rows, fmt.Sprintf("%s %s %s %d", e.Action, e.Outcome, e.MsgID, e.People))
	return nil
}

// TestPostTranslated: campaign's answer to POST /messages: kept for
// later 201, kept for approval 202, registered 201 (a replay 200) with
// the send report, refused input 400 naming the field and no audit row,
// a msgid held by another message 409; every row campaign says is due is
// written with its outcome, none other.
func TestPostTranslated(t *testing.T) {
	msg := yidu.Message{CorpID: "acme", MsgID: "m1", App: "hr", Title: "t", Recipients: 2}
	sent := yidu.SendReport{Outcomes: []yidu.BatchOutcome{{Batch: 0, Status: yidu.SendSent, Users: 2}}}
	draft := yidu.Notice{MsgID: "d1", App: yidu.App{Name: "hr", CorpID: "acme"}, State: yidu.StateDraft}
	tests := []struct {
		name  string
		acts  posting
		code  int
		field string
		send  string
		rows  []string
	}{
		{"draft", posting{res: campaign.Posted{Notice: draft, Acts: []campaign.Act{{Action: yidu.ActionCompose, MsgID: "d1"}}}}, http.StatusCreated, "", "", []string{"compose ok d1 0"}},
		{"for approval", posting{res: campaign.Posted{Notice: draft, Approval: true, Acts: []campaign.Act{{Action: yidu.ActionCompose, MsgID: "d1"}}}}, http.StatusAccepted, "", "", []string{"compose ok d1 0"}},
		{"sent", posting{res: campaign.Posted{Registered: yidu.Registered{Message: msg, Created: true, Send: sent}, Acts: []campaign.Act{{Action: yidu.ActionSend, MsgID: "m1", People: 2}}}}, http.StatusCreated, "", "sent", []string{"send ok m1 2"}},
		{"replayed", posting{res: campaign.Posted{Registered: yidu.Registered{Message: msg, Send: sent}, Acts: []campaign.Act{{Action: yidu.ActionSend, MsgID: "m1", People: 2}}}}, http.StatusOK, "", "sent", []string{"send ok m1 2"}},
		{"a field wrong", posting{err: yidu.Fieldf("title", "title: required")}, http.StatusBadRequest, "title", "", nil},
		{"msgid of another message", posting{res: campaign.Posted{Acts: []campaign.Act{{Action: yidu.ActionSend, MsgID: "m1", Err: yidu.ErrConflict}}}, err: yidu.ErrConflict}, http.StatusConflict, "", "", []string{"send refused m1 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rows []string
			srv, err := New(tokenOnly{}, tt.acts, warming{}, Options{Apps: []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1}}, Audit: auditRows{&rows}})
			testenv.Check(t, "New", err)
			defer srv.Close()
			w := serveAs(srv, "POST", "/api/v1/messages", `{"app":"hr","title":"t","audience":{"all":true},"send":true}`)
			var body struct {
				Field string `json:"field"`
				Send  *struct {
					Result string `json:"result"`
				} `json:"send"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || w.Code != tt.code || body.Field != tt.field {
				t.Fatalf("POST = %d %s; want %d, field %q", w.Code, w.Body, tt.code, tt.field)
			}
			if got := ""; body.Send != nil {
				got = body.Send.Result
				if got != tt.send {
					t.Errorf("send result = %q; want %q", got, tt.send)
				}
			} else if tt.send != "" {
				t.Errorf("no send report; want %q", tt.send)
			}
			if !slices.Equal(rows, tt.rows) {
				t.Errorf("audit rows = %q; want %q", rows, tt.rows)
			}
		})
	}
}

// noTemplates is Campaign keeping no templates.
type noTemplates struct{ Campaign }

func (noTemplates) ListTemplates(context.Context, *access.Principal, yidu.App) ([]yidu.Template, error) {
	return nil, nil
}

func (noTemplates) CreateTemplate(context.Context, *access.Principal, yidu.Template) (yidu.Template, []campaign.Act, error) {
	return yidu.Template{}, nil, campaign.ErrNoTemplates
}

func (noTemplates) Template(context.Context, *access.Principal, int64) (yidu.Template, []attachment.Attachment, error) {
	return yidu.Template{}, nil, fmt.Errorf("%w: template 7", yidu.ErrNotFound)
}

// TestTemplatesTranslated: a server keeping no templates lists none
// (200, an empty list), refuses to save one (503), and knows none (404).
func TestTemplatesTranslated(t *testing.T) {
	srv, err := New(tokenOnly{}, noTemplates{}, oneNotice{}, Options{Apps: []yidu.App{{Name: "hr", CorpID: "acme", AgentID: 1}}})
	testenv.Check(t, "New", err)
	defer srv.Close()
	for _, tt := range []struct {
		method, target, body string
		code                 int
		want                 string
	}{
		{"GET", "/api/v1/templates?app=hr", "", http.StatusOK, `{"templates":[]}`},
		{"POST", "/api/v1/templates", `{"app":"hr","name":"月度考勤","title":"t"}`, http.StatusServiceUnavailable, "templates are not configured"},
		{"GET", "/api/v1/templates/7", "", http.StatusNotFound, "not found"},
	} {
		w := serveAs(srv, tt.method, tt.target, tt.body)
		if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.want) {
			t.Errorf("%s %s = %d %s; want %d with %s", tt.method, tt.target, w.Code, w.Body, tt.code, tt.want)
		}
	}
}
