package dashboard

import (
	"context"
	"fmt"
	"net/http"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// Scope (issue 31): every answer about a notice covers the notice's
// recipients ∩ the caller's access.View. package access decides whom a
// principal sees; here the View rides in the request's context from
// withMessage to the bitmaps, so every handler below it (progress,
// departments, recipients, search, export.csv, events, remind) reads
// restricted bitmaps without a check of its own.

type viewKey struct{}

// withView returns ctx carrying v.
func withView(ctx context.Context, v access.View) context.Context {
	return context.WithValue(ctx, viewKey{}, v)
}

// viewFrom returns the View withMessage put in ctx; Everyone when none
// (the caller is an admin path that never went through withMessage).
func viewFrom(ctx context.Context) access.View {
	if v, ok := ctx.Value(viewKey{}).(access.View); ok {
		return v
	}
	return access.Everyone
}

// scoped reports whether ctx carries a View narrower than everyone.
func scoped(ctx context.Context) bool { return !viewFrom(ctx).All() }

// view asks access whom p sees of m. Without an Access (no directory to
// resolve departments) a principal that is not an admin of the corp sees
// nobody: refused, never shown more than its scope.
func (s *Server) view(ctx context.Context, p *access.Principal, m yidu.Message) (access.View, error) {
	if s.access == nil {
		if p.Admin(m.CorpID) {
			return access.Everyone, nil
		}
		return access.View{}, nil
	}
	v, err := s.access.View(ctx, p, m.CorpID, m.App)
	if err != nil {
		return access.View{}, fmt.Errorf("dashboard: scope: %w", err)
	}
	return v, nil
}

// gate finds the route's notice and the caller's View of it: a notice
// with no recipient in the View is errNotFound, like a missing one. The
// returned request carries the View for the handlers.
func (s *Server) gate(r *http.Request) (yidu.Message, *http.Request, error) {
	m, err := s.message(r)
	if err != nil {
		return m, r, err
	}
	v, err := s.view(r.Context(), principalFrom(r.Context()), m)
	if err != nil {
		return m, r, err
	}
	if v.None() {
		return m, r, errNotFound
	}
	if !v.All() {
		// The scope check comes before any restore (issue 38): a scoped
		// caller cannot make yidu rebuild the keys of a notice it may not
		// see. The live keys answer when they exist; MySQL's rows
		// otherwise, one probe per member of the View.
		ok, err := s.prog.Reaches(r.Context(), m, v)
		if err != nil {
			return m, r, err
		}
		if !ok {
			return m, r, errNotFound
		}
	}
	return m, r.WithContext(withView(r.Context(), v)), nil
}
