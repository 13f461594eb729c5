// Package trail answers the audit trail to the corps' admins: GET
// /api/v1/audit (HandleAudit) and the page of the dashboard's /audit
// (Page), filtered by actor, action, msgid and time, a page at a time.
// An admin reads the events of the corps they administer (an admin of
// every corp also those of no corp, such as a password sign-in); whoever
// administers none is refused. Writing the rows is the acts' (package
// handle's Base).
package trail

import (
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
	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/internal/webedge"
)

// Handlers serve the audit trail; the dashboard builds them with New.
type Handlers struct {
	*handle.Base
	// Trail reads the trail (nil: 404).
	Trail Log
}

// New builds the Handlers over base.
func New(base *handle.Base, log Log) *Handlers { return &Handlers{Base: base, Trail: log} }

// Log reads the audit trail for its page and GET /api/v1/audit
// (audit.MySQL in production).
type Log interface {
	List(ctx context.Context, q audit.Query) ([]audit.Event, int64, error)
}

// defaultAuditLimit is one page of the audit when ?limit= is absent.
const defaultAuditLimit = 100

// EventJSON is one event of GET /api/v1/audit.
type EventJSON struct {
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

// ListJSON is the answer of GET /api/v1/audit.
type ListJSON struct {
	Events     []EventJSON `json:"events"`
	NextCursor string      `json:"next_cursor"`
}

// parseQuery reads ?actor=&action=&msgid=&since=&cursor=&limit=;
// a hostile value is a 400 naming its field.
func parseQuery(q url.Values) (audit.Query, error) {
	out := audit.Query{Limit: defaultAuditLimit}
	if a := q.Get("actor"); a != "" {
		if utf8.RuneCountInString(a) > 128 || !utf8.ValidString(a) || hasControl(a) {
			return out, handle.BadParam("actor must be at most 128 printable characters")
		}
		out.Actor = a
	}
	if a := q.Get("action"); a != "" {
		if err := yidu.Action(a).Validate(); err != nil {
			return out, handle.BadParam("action is not an audited action")
		}
		out.Action = yidu.Action(a)
	}
	if m := q.Get("msgid"); m != "" {
		if _, err := handle.ParseMsgID(m); err != nil {
			return out, err
		}
		out.MsgID = m
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil || t.Year() < 2000 || t.Year() > 9999 {
			return out, handle.BadParam("since must be an RFC 3339 time")
		}
		out.Since = t
	}
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n < 1 || strconv.FormatInt(n, 10) != c {
			return out, handle.BadParam("cursor is not a cursor of this list")
		}
		out.Before = n
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > audit.MaxLimit {
			return out, handle.BadParam("limit must be an integer in 1..%d", audit.MaxLimit)
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

// HandleAudit is GET /api/v1/audit: admins only, the events of the corps
// they administer (an admin of every corp also sees events of no corp,
// such as a password sign-in).
func (s *Handlers) HandleAudit(w http.ResponseWriter, r *http.Request) {
	out, code, err := s.Page(r)
	if errors.Is(err, handle.ErrBadParam) {
		// Each of parseQuery's messages starts with its parameter.
		msg := err.Error()
		field, _, _ := strings.Cut(strings.TrimPrefix(msg, handle.ErrBadParam.Error()+": "), " ")
		handle.WriteFieldError(w, field, msg)
		return
	}
	if err != nil {
		if code != 0 {
			webedge.WriteError(w, code, err.Error())
			return
		}
		s.Fail(w, r, err)
		return
	}
	webedge.WriteJSON(w, http.StatusOK, out)
}

// errAuditAdmins refuses the audit to a principal who administers no corp.
var errAuditAdmins = errorString("the audit is for admins")

type errorString string

func (e errorString) Error() string { return string(e) }

// Page is one page of the audit for r's principal; code is set when
// the answer is not an error of httpStatus (403, 404).
func (s *Handlers) Page(r *http.Request) (ListJSON, int, error) {
	if s.Trail == nil {
		return ListJSON{}, http.StatusNotFound, errorString("the audit log is not configured")
	}
	corps, all := webedge.Caller(r.Context()).AdminCorps() // those it administers; nil: every corp
	if !all && len(corps) == 0 {
		return ListJSON{}, http.StatusForbidden, errAuditAdmins
	}
	q, err := parseQuery(r.URL.Query())
	if err != nil {
		return ListJSON{}, 0, err
	}
	q.Corps = corps
	es, next, err := s.Trail.List(r.Context(), q)
	if err != nil {
		return ListJSON{}, 0, err
	}
	out := ListJSON{Events: make([]EventJSON, 0, len(es))}
	for _, e := range es {
		out.Events = append(out.Events, EventJSON{ID: strconv.FormatInt(e.ID, 10), At: e.At.UTC(), Actor: e.Actor, ActorKind: e.ActorKind,
			Role: e.Role, Action: string(e.Action), CorpID: e.CorpID, App: e.App, MsgID: e.MsgID, People: e.People,
			ClientIP: e.ClientIP, UserAgent: e.UserAgent, Outcome: e.Outcome, Detail: e.Detail})
	}
	if next > 0 {
		out.NextCursor = strconv.FormatInt(next, 10)
	}
	return out, 0, nil
}
