package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// Notices is a page of the notices in state that p may see (notices not
// sent yet are their senders': a viewer's list is empty, a sender's holds
// its apps' only) whose title contains title, any case, and of app when
// it is not empty. The filter comes before the page, so the cursor names
// none of the others (issue 38).
func (s *Service) Notices(ctx context.Context, p *access.Principal, state yidu.NoticeState, title, app, cursor string, limit int) ([]yidu.Notice, string, error) {
	corps := p.Corps()
	if s.o.Store == nil || (corps != nil && len(corps) == 0) {
		return nil, "", nil
	}
	title = strings.ToLower(title)
	keep := func(n yidu.Notice) bool {
		return p.MaySend(n.App.CorpID, n.App.Name) && (title == "" || strings.Contains(strings.ToLower(n.Title), title))
	}
	return s.o.Store.List(ctx, corps, state, app, cursor, limit, keep)
}

// Sent is the notice campaign sent as the registered message msgID of
// corp: found is false for a message registered through the API. The
// audience as asked (UserIDs, departments, tags of the whole notice) is
// its senders' only: audience is false for anyone else (a scoped viewer
// sees the state, not whom else it was for).
func (s *Service) Sent(ctx context.Context, p *access.Principal, corp, msgID string) (n yidu.Notice, found, audience bool, err error) {
	if s.o.Store == nil {
		return yidu.Notice{}, false, false, nil
	}
	n, err = s.o.Store.Get(ctx, []string{corp}, msgID)
	if errors.Is(err, yidu.ErrNotFound) {
		return yidu.Notice{}, false, false, nil
	}
	if err != nil {
		return yidu.Notice{}, false, false, err
	}
	return n, true, p.MaySend(n.App.CorpID, n.App.Name), nil
}
