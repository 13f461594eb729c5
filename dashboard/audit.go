package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/yidu-io/yidu/audit"
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

// record fills e's time, client and user agent from r and writes it.
func (s *Server) record(r *http.Request, e audit.Event) error {
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

// actorOf is the audit actor of r's principal: its name (a user's or a
// token's), never its secret. When the access package lands, Role comes
// from its roles.
func actorOf(r *http.Request) (name, kind string) {
	p := principalFrom(r.Context())
	if p == nil {
		return "", ""
	}
	if p.session != nil {
		return p.name, "password"
	}
	return p.name, "token"
}
