package dashboard

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
)

// Scope (issue 31): every answer about a notice covers the notice's
// recipients ∩ the caller's access.View (handle/view.go); gate finds
// the notice and the View.

// withView, viewFrom and scoped carry the View in the request's context
// (handle's).
var (
	withView = handle.WithView
	viewFrom = handle.ViewFrom
	scoped   = handle.Scoped
)

// gate finds the route's notice and the caller's View of it
// (progress.Find): a notice the caller may not see, or with no recipient
// in its View, is errNotFound, like a missing one. The returned request
// carries the View for the handlers. A route that declared its act
// (Server.act) has it decided here: a refusal is access.ErrRefused, its
// audit row written.
func (s *Server) gate(r *http.Request) (yidu.Message, *http.Request, error) {
	id, err := parseMsgID(chi.URLParam(r, "msgid"))
	if err != nil {
		return yidu.Message{}, r, err
	}
	m, v, err := s.prog.Find(r.Context(), principalFrom(r.Context()), id)
	if errors.Is(err, yidu.ErrNotFound) {
		return m, r, errNotFound
	}
	if err != nil {
		return m, r, err
	}
	// The act the route declared, decided once the caller is known to
	// see the notice (a notice it does not see stays 404, never 403).
	if d := s.decideRoute(r, m); !d.Allowed {
		_ = s.record(r, d.Event)
		return m, r, d.Err()
	}
	return m, r.WithContext(withView(r.Context(), v)), nil
}
