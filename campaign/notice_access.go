package campaign

import (
	"context"
	"fmt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// Notice returns the notice msgID (a draft, a scheduled or a sent one)
// as p may see it. A notice of campaign is its senders': an admin of
// the corp or a sender of its app. To anyone else, a viewer or a leader
// included, it is yidu.ErrNotFound, like one of another corp.
func (s *Service) Notice(ctx context.Context, p *access.Principal, msgID string) (yidu.Notice, error) {
	if s.o.Store == nil || p == nil {
		return yidu.Notice{}, fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	corps := p.Corps()
	if corps != nil && len(corps) == 0 {
		return yidu.Notice{}, fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	n, err := s.o.Store.Get(ctx, corps, msgID)
	if err != nil {
		return yidu.Notice{}, err
	}
	if !p.MaySend(n.App.CorpID, n.App.Name) {
		return yidu.Notice{}, fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	return n, nil
}
