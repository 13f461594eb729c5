package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
)

// Auditor records who did what (audit.MySQL in production). A nil one in
// Options records nothing.
//
// A failed audit write is never silent: it counts in
// yidu_dashboard_audit_failures_total and logs at error level. An export
// fails closed (PIPL: personal data leaves only with its trace); sign-in
// and sign-out proceed (refusing them would lock admins out when MySQL is
// down, and the log line keeps the trace).
type Auditor interface {
	Record(ctx context.Context, e audit.Event) error
}

type noAudit struct{}

func (noAudit) Record(context.Context, audit.Event) error { return nil }

// recorded marks that a request wrote its audit row (auditRefusals).
type recorded struct{ done bool }

type recordedKey struct{}

// refusedActions are the audited acts of the write routes, by chi's
// pattern: a 403 on one of them is recorded as that act, refused.
var refusedActions = map[string]yidu.Action{
	"/api/v1/messages/{msgid}/":                       yidu.ActionEdit,
	"/api/v1/messages/{msgid}/cancel":                 yidu.ActionCancel,
	"/api/v1/messages/{msgid}/send":                   yidu.ActionSend,
	"/api/v1/messages/{msgid}/remind":                 yidu.ActionRemind,
	"/api/v1/messages/{msgid}/recall":                 yidu.ActionRecall,
	"/api/v1/messages/{msgid}/follow_up":              yidu.ActionFollowUpChange,
	"/api/v1/messages/{msgid}/follow_up/cancel-round": yidu.ActionFollowUpChange,
	"/api/v1/messages":                                yidu.ActionSend,
}

// auditRefusals records a write the caller's role may not do (403) that
// its handler did not record itself: a refused attempt leaves a row with
// the caller's name as any act does (issue 38). Reads refused are not
// acts and record nothing.
func (s *Server) auditRefusals(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if safeMethod(r.Method) {
			next.ServeHTTP(w, r)
			return
		}
		mark := &recorded{}
		r = r.WithContext(context.WithValue(r.Context(), recordedKey{}, mark))
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status != http.StatusForbidden || mark.done {
			return
		}
		route := ""
		if rc := chi.RouteContext(r.Context()); rc != nil {
			route = rc.RoutePattern()
		}
		act, ok := refusedActions[route]
		if !ok {
			return
		}
		msgID := ""
		if rc := chi.RouteContext(r.Context()); rc != nil {
			msgID = yidu.Truncate(rc.URLParam("msgid"), 128)
		}
		corp, app := s.whereIs(r, msgID)
		e := event(r, act, corp, app, msgID)
		e.Outcome, e.Detail = "refused", r.Method+" "+route
		_ = s.record(r, e)
	})
}

// whereIs is the corp and app of msgID within the caller's corps (a
// message, else a notice), for a refused act's audit row; "" when none.
func (s *Server) whereIs(r *http.Request, msgID string) (corp, app string) {
	p := principalFrom(r.Context())
	if msgID == "" || p == nil {
		return "", ""
	}
	corps := p.Corps()
	if m, ok, err := s.prog.Locate(r.Context(), corps, msgID); err == nil && ok {
		return m.CorpID, m.App
	}
	if n, ok, err := s.acts.Locate(r.Context(), corps, msgID); err == nil && ok {
		return n.App.CorpID, n.App.Name
	}
	return "", ""
}

// record fills e's time, client and user agent from r and writes it.
func (s *Server) record(r *http.Request, e audit.Event) error {
	if m, ok := r.Context().Value(recordedKey{}).(*recorded); ok {
		m.done = true
	}
	e.At = s.now()
	e.ClientIP = s.clientIP(r)
	e.UserAgent = r.UserAgent()
	if e.Outcome == "" {
		e.Outcome = "ok"
	}
	if err := s.audit.Record(r.Context(), e); err != nil {
		s.met.auditFailures.Inc()
		s.log.ErrorContext(r.Context(), "audit write failed", "action", string(e.Action), "msgid", e.MsgID, "err", err)
		return fmt.Errorf("dashboard: audit %s: %w", e.Action, err)
	}
	return nil
}

// actorOf is the audit actor of r's principal: its name (a WeCom
// member's UserID, a password user's name, a token's name), never its
// secret, and how it proved who it is.
func actorOf(r *http.Request) (name, kind string) {
	p := principalFrom(r.Context())
	if p == nil {
		return "", ""
	}
	name = p.Name
	if p.Kind == access.KindWeCom && p.UserID != "" {
		name = p.UserID
	}
	kind = string(p.Kind)
	if p.Kind == access.KindUser {
		kind = "password"
	}
	return name, kind
}

// event is the audit event of r's principal acting on corp (its role
// there, from access) through app on msgid.
func event(r *http.Request, action yidu.Action, corp, app, msgID string) audit.Event {
	actor, kind := actorOf(r)
	e := audit.Event{Actor: actor, ActorKind: kind, Action: action, CorpID: corp, App: app, MsgID: msgID}
	if p := principalFrom(r.Context()); p != nil && corp != "" {
		e.Role = string(p.Role(corp))
	}
	return e
}

// outcome is an audit outcome for an HTTP status: ok, refused (the
// caller's fault) or failed.
func outcome(code int) string {
	switch {
	case code < 400:
		return "ok"
	case code < 500:
		return "refused"
	default:
		return "failed"
	}
}

// recordDone records e after the action ran: err nil is "ok", else the outcome
// of err's status. Input refused as invalid (400, 413), before or by the
// store, records nothing (hostile input writes nothing); an action that ran, or was refused by
// the store, leaves one row. A failed write is counted and logged by
// record; the action's answer stands.
func (s *Server) recordDone(r *http.Request, e audit.Event, err error) {
	if err != nil {
		code, _ := httpStatus(err)
		if code == http.StatusBadRequest || code == http.StatusRequestEntityTooLarge {
			return // invalid input: nothing ran, nothing is written
		}
		e.Outcome = outcome(code)
	}
	_ = s.record(r, e)
}

// recordActs records the audit rows a service says an act is due
// (recordDone each).
func (s *Server) recordActs(r *http.Request, corp, app string, acts []campaign.Act) {
	for _, a := range acts {
		ev := event(r, a.Action, corp, app, a.MsgID)
		ev.People, ev.Detail = a.People, a.Detail
		s.recordDone(r, ev, a.Err)
	}
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
