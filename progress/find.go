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

// Locate finds msgID within corps (nil: any) without asking whom a
// caller sees of it: for the audit row of a refused act, which names
// the corp and app acted on. Without a Catalog it finds nothing.
func (p *Progress) Locate(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error) {
	cat, ok := p.archive.(Catalog)
	if !ok {
		return yidu.Message{}, false, nil
	}
	m, ok, err := cat.GetMessage(ctx, corps, msgID)
	if err != nil {
		return yidu.Message{}, false, fmt.Errorf("progress: get message: %w", err)
	}
	return m, ok, nil
}

// Sends is implemented by an Archive that keeps a notice's send batches
// (tracker.Registry.SendOutcomes); without it a notice has no send
// report.
type Sends interface {
	SendOutcomes(ctx context.Context, corpID, msgID string) ([]yidu.BatchOutcome, error)
}

// Outcomes are m's send batches as recorded, reminders' included (nil
// without Sends).
func (p *Progress) Outcomes(ctx context.Context, m yidu.Message) ([]yidu.BatchOutcome, error) {
	s, ok := p.archive.(Sends)
	if !ok {
		return nil, nil
	}
	out, err := s.SendOutcomes(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return nil, fmt.Errorf("progress: send outcomes: %w", err)
	}
	return out, nil
}
