package disclose

import (
	"net/http"
	"strconv"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/progress"
)

// HandleRecipients is GET /messages/{msgid}/recipients: a page of the
// recipients within the caller's View (progress.Selection.Page).
func (s *Handlers) HandleRecipients(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	rq, err := handle.ParseRecipientQuery(r, true)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	sel, err := s.Prog.Select(r.Context(), m, viewFrom(r.Context()), principalFrom(r.Context()), rq)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	out, err := sel.Page(r.Context())
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	// A page of recipients is personal data like export.csv: it leaves
	// with its audit row, or not at all (issue 38).
	e := event(r, yidu.ActionRecipients, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = int64(len(out.Items)), recipientsDetail(rq)
	if !s.Disclose(w, r, e, "recipients") {
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
