package dashboard

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/dashboard/internal/trail"
)

// AuditLog reads the audit trail for its page and GET /api/v1/audit
// (audit.MySQL in production): trail's.
type AuditLog = trail.Log

// auditView is the audit page (操作日志): its filter, one page of events
// and the link to the next.
type auditView struct {
	Actor, Action, MsgID string
	Actions              []string
	Events               []trail.EventJSON
	Next                 string
}

// handleAuditPage is /audit, the page over GET /api/v1/audit's answer,
// rendered on the server (no script; CSP unchanged).
func (s *Server) handleAuditPage(w http.ResponseWriter, r *http.Request) {
	d := pageFor(r, "audit.title")
	q := r.URL.Query()
	v := &auditView{Actor: q.Get("actor"), Action: q.Get("action"), MsgID: q.Get("msgid")}
	for _, a := range yidu.Actions() {
		v.Actions = append(v.Actions, string(a))
	}
	d.Audit = v
	out, code, err := s.trail.Page(r)
	switch {
	case errors.Is(err, errBadParam):
		d.Error = "audit.bad_filter"
		s.render(w, http.StatusBadRequest, "audit.html", d)
		return
	case code == http.StatusForbidden:
		d.Error = "audit.admins_only"
		s.render(w, code, "audit.html", d)
		return
	case err != nil:
		if code == 0 {
			s.log.ErrorContext(r.Context(), "audit page", "err", err)
		}
		d.Error = "audit.unavailable"
		s.render(w, cmp.Or(code, http.StatusServiceUnavailable), "audit.html", d)
		return
	}
	v.Events = out.Events
	if out.NextCursor != "" {
		nq := url.Values{"cursor": {out.NextCursor}}
		for _, k := range []string{"actor", "action", "msgid", "since", "limit"} {
			if x := q.Get(k); x != "" {
				nq.Set(k, x)
			}
		}
		v.Next = "/audit?" + nq.Encode()
	}
	s.render(w, http.StatusOK, "audit.html", d)
}
