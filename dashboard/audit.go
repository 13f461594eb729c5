package dashboard

import (
	"context"
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// Auditor records who did what (audit.MySQL in production; handle's).
// A nil one in Options records nothing.
type Auditor = handle.Auditor

// Acts (issue 47): access.Decide decides each act and gives the audit
// row it is due; a route declares its act (act), gate asks Decide once
// it has found the notice, and a refusal leaves the Decision's row.
// What the service then answers is recorded with campaign.Outcome's
// outcome: no row is derived from a route or an HTTP status.

type actKey struct{}

// actOf is the act a route declared (act) and how it narrows its
// target (standingRule).
type actOf struct {
	act    yidu.Action
	narrow []func(*access.Target)
}

// act declares the route's act: gate decides it (access.Decide) for the
// notice it finds, refusing with the Decision's audit row.
func (s *Server) act(act yidu.Action, narrow ...func(*access.Target)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), actKey{}, actOf{act: act, narrow: narrow})))
		})
	}
}

// standingRule narrows an edit to a standing notice's rule (its end).
func standingRule(t *access.Target) { t.Standing = true }

// decideRoute decides the act r's route declared on m; allowed when it
// declared none (a read).
func (s *Server) decideRoute(r *http.Request, m yidu.Message) access.Decision {
	a, ok := r.Context().Value(actKey{}).(actOf)
	if !ok {
		return access.Decision{Allowed: true}
	}
	t := access.Target{Corp: m.CorpID, App: m.App, MsgID: m.MsgID}
	for _, f := range a.narrow {
		f(&t)
	}
	return s.decide(r, a.act, t)
}

// decide, record, event, recordDone and recordActs
// are the handler groups' Base's (dashboard/internal/handle): an act's
// audit row written with the request's address.
func (s *Server) decide(r *http.Request, act yidu.Action, t access.Target) access.Decision {
	return handle.Decide(r, act, t)
}

func (s *Server) record(r *http.Request, e audit.Event) error { return s.base.Record(r, e) }

var event = handle.Event

func (s *Server) recordDone(r *http.Request, e audit.Event, err error) { s.base.RecordDone(r, e, err) }

func (s *Server) recordActs(r *http.Request, corp, app string, acts []campaign.Act) {
	s.base.RecordActs(r, corp, app, acts)
}

// signOutEvent is the sign-out event of the session id names, its actor
// resolved before the session ends; live is false when id names none.
func (s *Server) signOutEvent(r *http.Request, id string) (e audit.Event, live bool) {
	sess, ok, err := s.auth.Lookup(r.Context(), id)
	if err != nil || !ok {
		return audit.Event{}, false
	}
	rp := r.WithContext(withCaller(r.Context(), sess.Principal, sess))
	return event(rp, yidu.ActionSignOut, sess.Principal.Corp, "", ""), true
}
