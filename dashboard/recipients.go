package dashboard

import (
	"net/http"
	"strconv"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/progress"
)

func parseRecipientQuery(r *http.Request, withPaging bool) (progress.Query, error) {
	v := r.URL.Query()
	var rq progress.Query
	var err error
	if rq.State, err = parseState(v.Get("state")); err != nil {
		return rq, err
	}
	if rq.Department, rq.HasDepartment, err = parseDepartment(v.Get("department")); err != nil {
		return rq, err
	}
	if rq.Q, err = parseQuery(v.Get("q")); err != nil {
		return rq, err
	}
	if !withPaging {
		return rq, nil
	}
	if rq.After, rq.HasAfter, err = parseCursor(v.Get("cursor")); err != nil {
		return rq, err
	}
	rq.Limit, err = parseLimit(v.Get("limit"))
	return rq, err
}

// handleRecipients is GET /messages/{msgid}/recipients: a page of the
// recipients within the caller's View (progress.Selection.Page).
func (s *Server) handleRecipients(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	rq, err := parseRecipientQuery(r, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sel, err := s.prog.Select(r.Context(), m, viewFrom(r.Context()), principalFrom(r.Context()), rq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := sel.Page(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A page of recipients is personal data like export.csv: it leaves
	// with its audit row, or not at all (issue 38).
	e := event(r, yidu.ActionRecipients, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = int64(len(out.Items)), recipientsDetail(rq)
	if err := s.record(r, e); err != nil {
		writeError(w, http.StatusServiceUnavailable, "recipients unavailable, try again shortly")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// recipientsDetail is the audit detail of a recipients read: what was
// asked (state, department, the search as typed, clipped).
func recipientsDetail(rq progress.Query) string {
	d := "state=" + string(rq.State)
	if rq.HasDepartment {
		d += " department=" + strconv.FormatInt(rq.Department, 10)
	}
	if rq.Q != "" {
		d += " q=" + strconv.Quote(yidu.Truncate(rq.Q, 64))
	}
	return d
}
