package dashboard

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
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

// gate finds the route's notice and the caller's View of it
// (progress.Find): a notice the caller may not see, or with no recipient
// in its View, is errNotFound, like a missing one. The returned request
// carries the View for the handlers.
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
	return m, r.WithContext(withView(r.Context(), v)), nil
}
