package progress

import (
	"context"
	"fmt"
	"slices"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// Catalog is implemented by an Archive that finds tracked messages
// (tracker.Registry.GetMessage); without it Find finds nothing.
type Catalog interface {
	// GetMessage finds msgID within corps (nil: any).
	GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
}

// Viewer says whom a principal sees of a notice of app in corp
// (access.Access.View).
type Viewer interface {
	View(ctx context.Context, p *access.Principal, corp, app string) (access.View, error)
}

// ViewOf returns whom who sees of m (Options.Viewer decides). Without a
// Viewer (no directory to resolve departments) a principal that is not
// an admin of the corp sees nobody: refused, never shown more than its
// scope.
func (p *Progress) ViewOf(ctx context.Context, who *access.Principal, m yidu.Message) (access.View, error) {
	if p.viewer == nil {
		if who.Admin(m.CorpID) {
			return access.Everyone, nil
		}
		return access.View{}, nil
	}
	v, err := p.viewer.View(ctx, who, m.CorpID, m.App)
	if err != nil {
		return access.View{}, fmt.Errorf("progress: scope: %w", err)
	}
	return v, nil
}

// Find returns the message msgID and whom who sees of it. A message of
// a corp where who holds no role, or with no recipient in who's View, is
// yidu.ErrNotFound, exactly like a missing one; the scope check comes
// before any restore (Reaches).
func (p *Progress) Find(ctx context.Context, who *access.Principal, msgID string) (yidu.Message, access.View, error) {
	notFound := fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	cat, ok := p.archive.(Catalog)
	if who == nil || !ok {
		return yidu.Message{}, access.View{}, notFound
	}
	corps := who.Corps()
	if corps != nil && len(corps) == 0 {
		return yidu.Message{}, access.View{}, notFound
	}
	m, ok, err := cat.GetMessage(ctx, corps, msgID)
	if err != nil {
		return yidu.Message{}, access.View{}, fmt.Errorf("progress: get message: %w", err)
	}
	if !ok || (corps != nil && !slices.Contains(corps, m.CorpID)) {
		return yidu.Message{}, access.View{}, notFound
	}
	v, err := p.ViewOf(ctx, who, m)
	if err != nil {
		return m, access.View{}, err
	}
	if v.None() {
		return m, access.View{}, notFound
	}
	if ok, err := p.Reaches(ctx, m, v); err != nil || !ok {
		if err == nil {
			err = notFound
		}
		return m, access.View{}, err
	}
	return m, v, nil
}
