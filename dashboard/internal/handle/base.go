package handle

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/webedge"
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

// NoAudit records nothing (Options.Audit nil).
type NoAudit struct{}

// Record records nothing.
func (NoAudit) Record(context.Context, audit.Event) error { return nil }

// Base is what the handlers of every group share: the audit, the
// client's address and the answer of an error. The dashboard builds one
// and hands it to each group.
type Base struct {
	Log *slog.Logger
	// Now is the clock of the audit rows.
	Now   func() time.Time
	Audit Auditor
	// AuditFailures counts audit writes that failed.
	AuditFailures prometheus.Counter
	// Proxies are the trusted proxies the client's address comes through.
	Proxies clientip.Proxies
	// Answer answers err (the dashboard's error table: status, words and
	// the field it names).
	Answer func(w http.ResponseWriter, r *http.Request, err error)
}

// Fail answers err (Base.Answer).
func (b *Base) Fail(w http.ResponseWriter, r *http.Request, err error) { b.Answer(w, r, err) }

// ClientIP is the client's address for the sign-in limits and the
// audit, through the trusted proxies (webedge.ClientIP, the receiver's
// rule too).
func (b *Base) ClientIP(r *http.Request) string { return webedge.ClientIP(b.Proxies, r) }

// Decide is access.Decide of r's principal.
func Decide(r *http.Request, act yidu.Action, t access.Target) access.Decision {
	return access.Decide(webedge.Caller(r.Context()), act, t)
}

// Refused records a refused Decision's row and answers 403 with its
// reason; it reports whether d refused.
func (b *Base) Refused(w http.ResponseWriter, r *http.Request, d access.Decision) bool {
	if d.Allowed {
		return false
	}
	_ = b.Record(r, d.Event)
	webedge.WriteError(w, http.StatusForbidden, d.Reason)
	return true
}

// Disclose records e, the row of personal data (evidence, an export, a
// page of recipients) about to leave, and answers 503 when it cannot:
// fail closed, no one's data leaves without its audit row. It reports
// whether the data may leave.
func (b *Base) Disclose(w http.ResponseWriter, r *http.Request, e audit.Event, what string) bool {
	if err := b.Record(r, e); err != nil {
		webedge.WriteError(w, http.StatusServiceUnavailable, what+" unavailable, try again shortly")
		return false
	}
	return true
}

// Record fills e's time, client and user agent from r and writes it.
func (b *Base) Record(r *http.Request, e audit.Event) error {
	e.At = b.Now()
	e.ClientIP = b.ClientIP(r)
	e.UserAgent = r.UserAgent()
	if e.Outcome == "" {
		e.Outcome = "ok"
	}
	if err := b.Audit.Record(r.Context(), e); err != nil {
		b.AuditFailures.Inc()
		b.Log.ErrorContext(r.Context(), "audit write failed", "action", string(e.Action), "msgid", e.MsgID, "err", err)
		return fmt.Errorf("dashboard: audit %s: %w", e.Action, err)
	}
	return nil
}

// Event is the audit row of r's principal acting on corp through app
// on msgid (access.Principal.Event: the one rule naming the actor).
func Event(r *http.Request, action yidu.Action, corp, app, msgID string) audit.Event {
	return webedge.Caller(r.Context()).Event(action, corp, app, msgID)
}

// RecordDone records e after the act ran with the outcome the service's
// answer err is due (campaign.Outcome): ok, refused or failed; invalid
// input, refused before or by the store, records nothing (hostile input
// writes nothing). A failed write is counted and logged by Record; the
// act's answer stands.
func (b *Base) RecordDone(r *http.Request, e audit.Event, err error) {
	if err == nil {
		_ = b.Record(r, e) // its outcome as set, else ok
		return
	}
	if o, ok := campaign.Outcome(err); ok {
		e.Outcome = o
		_ = b.Record(r, e)
	}
}

// RecordActs records the audit rows a service says an act is due
// (RecordDone each).
func (b *Base) RecordActs(r *http.Request, corp, app string, acts []campaign.Act) {
	for _, a := range acts {
		ev := Event(r, a.Action, corp, app, a.MsgID)
		ev.People, ev.Detail = a.People, a.Detail
		b.RecordDone(r, ev, a.Err)
	}
}
