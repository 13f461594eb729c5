package dashboard

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// AuditLog reads the audit trail for its page and GET /api/v1/audit
// (audit.MySQL in production).
type AuditLog interface {
	List(ctx context.Context, q audit.Query) ([]audit.Event, int64, error)
}

// defaultAuditLimit is one page of the audit when ?limit= is absent.
const defaultAuditLimit = 100

// auditEventJSON is one event of GET /api/v1/audit.
type auditEventJSON struct {
	ID        string    `json:"id"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	ActorKind string    `json:"actor_kind"`
	Role      string    `json:"role"`
	Action    string    `json:"action"`
	CorpID    string    `json:"corp_id"`
	App       string    `json:"app"`
	MsgID     string    `json:"msgid"`
	People    int64     `json:"people"`
	ClientIP  string    `json:"client_ip"`
	UserAgent string    `json:"user_agent"`
	Outcome   string    `json:"outcome"`
	Detail    string    `json:"detail"`
}

// auditListJSON is the answer of GET /api/v1/audit.
type auditListJSON struct {
	Events     []auditEventJSON `json:"events"`
	NextCursor string           `json:"next_cursor"`
}

// parseAuditQuery reads ?actor=&action=&msgid=&since=&cursor=&limit=;
// a hostile value is a 400 naming its field.
func parseAuditQuery(q url.Values) (audit.Query, error) {
	out := audit.Query{Limit: defaultAuditLimit}
	if a := q.Get("actor"); a != "" {
		if utf8.RuneCountInString(a) > 128 || !utf8.ValidString(a) || hasControl(a) {
			return out, badParam("actor must be at most 128 printable characters")
		}
		out.Actor = a
	}
	if a := q.Get("action"); a != "" {
		if err := yidu.Action(a).Validate(); err != nil {
			return out, badParam("action is not an audited action")
		}
		out.Action = yidu.Action(a)
	}
	if m := q.Get("msgid"); m != "" {
		if _, err := parseMsgID(m); err != nil {
			return out, err
		}
		out.MsgID = m
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil || t.Year() < 2000 || t.Year() > 9999 {
			return out, badParam("since must be an RFC 3339 time")
		}
		out.Since = t
	}
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 || strconv.FormatInt(n, 10) != c {
			return out, badParam("cursor is not a cursor of this list")
		}
		out.Before = n
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return out, badParam("limit must be an integer in 1..%d", audit.MaxLimit)
		}
		out.Limit = n
	}
	return out, nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// handleAudit is GET /api/v1/audit: admins only, the events of the corps
// they administer (an admin of every corp also sees events of no corp,
// such as a password sign-in).
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	out, code, err := s.auditPage(r)
	if errors.Is(err, errBadParam) {
		// Each of parseAuditQuery's messages starts with its parameter.
		msg := err.Error()
		field, _, _ := strings.Cut(strings.TrimPrefix(msg, errBadParam.Error()+": "), " ")
		writeFieldError(w, field, msg)
		return
	}
	if err != nil {
		if code != 0 {
			writeError(w, code, err.Error())
			return
		}
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// errAuditAdmins refuses the audit to a principal who administers no corp.
var errAuditAdmins = errorString("the audit is for admins")

type errorString string

func (e errorString) Error() string { return string(e) }

// auditPage is one page of the audit for r's principal; code is set when
// the answer is not an error of httpStatus (403, 404).
func (s *Server) auditPage(r *http.Request) (auditListJSON, int, error) {
	if s.auditLog == nil {
		return auditListJSON{}, http.StatusNotFound, errorString("the audit log is not configured")
	}
	corps, all := principalFrom(r.Context()).AdminCorps() // those it administers; nil: every corp
	if !all && len(corps) == 0 {
		return auditListJSON{}, http.StatusForbidden, errAuditAdmins
	}
	q, err := parseAuditQuery(r.URL.Query())
	if err != nil {
		return auditListJSON{}, 0, err
	}
	q.Corps = corps
	es, next, err := s.auditLog.List(r.Context(), q)
	if err != nil {
		return auditListJSON{}, 0, err
	}
	out := auditListJSON{Events: make([]auditEventJSON, 0, len(es))}
	for _, e := range es {
		out.Events = append(out.Events, auditEventJSON{ID: strconv.FormatInt(e.ID, 10), At: e.At.UTC(), Actor: e.Actor, ActorKind: e.ActorKind,
			Role: e.Role, Action: string(e.Action), CorpID: e.CorpID, App: e.App, MsgID: e.MsgID, People: e.People,
			ClientIP: e.ClientIP, UserAgent: e.UserAgent, Outcome: e.Outcome, Detail: e.Detail})
	}
	if next > 0 {
		out.NextCursor = strconv.FormatInt(next, 10)
	}
	return out, 0, nil
}

// auditView is the audit page (操作日志): its filter, one page of events
// and the link to the next.
type auditView struct {
	Actor, Action, MsgID string
	Actions              []string
	Events               []auditEventJSON
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
	out, code, err := s.auditPage(r)
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
