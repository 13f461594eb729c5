package dashboard

import (
	"net/http"

	"github.com/yidu-io/yidu"
)

// handleDepartments is GET /messages/{msgid}/departments: the breakdown
// within the caller's View (progress.Departments).
func (s *Server) handleDepartments(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	out, loading, err := s.prog.Departments(r.Context(), m, viewFrom(r.Context()), principalFrom(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if loading {
		// The corp's first tree since the start is still loading: say so
		// now (the page polls again).
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusOK, map[string]any{"msgid": m.MsgID, "departments": out, "loading": true})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"msgid": m.MsgID, "departments": out})
}
