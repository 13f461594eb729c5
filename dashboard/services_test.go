package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
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
		{"no ledger", "n1", reminding{err: campaign.ErrNoLedger}, http.StatusServiceUnavailable, ""},
		{"unknown notice", "n2", reminding{err: errors.New("campaign must not be asked")}, http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := New(tokenOnly{}, tt.acts, oneNotice{}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			r := httptest.NewRequest("POST", "/api/v1/messages/"+tt.msgID+"/remind", nil)
			r.Header.Set("Authorization", "Bearer "+acmeToken)
			w := httptest.NewRecorder()
			srv.Routes().ServeHTTP(w, r)
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
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer "+acmeToken)
		w := httptest.NewRecorder()
		srv.Routes().ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("GET %s = %d %s; want %d", target, w.Code, w.Body, want)
		}
	}
}
