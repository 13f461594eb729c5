package handle

import (
	"context"

	"github.com/yidu-io/yidu/access"
)

// Scope (issue 31): every answer about a notice covers the notice's
// recipients ∩ the caller's access.View. package access decides whom a
// principal sees; here the View rides in the request's context from
// the dashboard's withMessage to the bitmaps, so every handler below it
// (progress, departments, recipients, search, export.csv, events,
// remind) reads restricted bitmaps without a check of its own.

type viewKey struct{}

// WithView returns ctx carrying v.
func WithView(ctx context.Context, v access.View) context.Context {
	return context.WithValue(ctx, viewKey{}, v)
}

// ViewFrom returns the View the dashboard's gate put in ctx; nobody when
// none (fail closed: a handler that never went through gate sees no one,
// never everyone).
func ViewFrom(ctx context.Context) access.View {
	if v, ok := ctx.Value(viewKey{}).(access.View); ok {
		return v
	}
	return access.View{}
}

// Scoped reports whether ctx carries a View narrower than everyone, or
// none at all.
func Scoped(ctx context.Context) bool { return !ViewFrom(ctx).All() }
