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
	if s.st == nil || p == nil {
		return yidu.Notice{}, fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	corps := p.Corps()
	if corps != nil && len(corps) == 0 {
		return yidu.Notice{}, fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	n, err := s.st.Get(ctx, corps, msgID)
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
	if s.st == nil || (corps != nil && len(corps) == 0) {
		return nil, "", nil
	}
	title = strings.ToLower(title)
	keep := func(n yidu.Notice) bool {
		return p.MaySend(n.App.CorpID, n.App.Name) && (title == "" || strings.Contains(strings.ToLower(n.Title), title))
	}
	return s.st.List(ctx, corps, state, app, cursor, limit, keep)
}

// Sent is the notice campaign sent as the registered message msgID of
// corp: found is false for a message registered through the API. The
// audience as asked (UserIDs, departments, tags of the whole notice) is
// its senders' only: audience is false for anyone else (a scoped viewer
// sees the state, not whom else it was for).
func (s *Service) Sent(ctx context.Context, p *access.Principal, corp, msgID string) (n yidu.Notice, found, audience bool, err error) {
	if s.st == nil {
		return yidu.Notice{}, false, false, nil
	}
	n, err = s.st.Get(ctx, []string{corp}, msgID)
	if errors.Is(err, yidu.ErrNotFound) {
		return yidu.Notice{}, false, false, nil
	}
	if err != nil {
		return yidu.Notice{}, false, false, err
	}
	return n, true, p.MaySend(n.App.CorpID, n.App.Name), nil
}

// ForApprover is the notice msgID of an approval request as p sees it:
// its senders as Notice does; an approver of its app who is no sender
// of it too (MayApprove). Anyone else gets Notice's answer.
func (s *Service) ForApprover(ctx context.Context, p *access.Principal, msgID string) (yidu.Notice, error) {
	n, err := s.Notice(ctx, p, msgID)
	if !errors.Is(err, yidu.ErrNotFound) || s.st == nil {
		return n, err
	}
	n, gerr := s.st.Get(ctx, nil, msgID)
	if gerr != nil || MayApprove(p, n) != nil {
		return yidu.Notice{}, err
	}
	return n, nil
}

// Locate finds the notice msgID within corps (nil: every corp) for a
// refused act's audit row, whoever asked.
func (s *Service) Locate(ctx context.Context, corps []string, msgID string) (yidu.Notice, bool, error) {
	if s.st == nil {
		return yidu.Notice{}, false, nil
	}
	n, err := s.st.Get(ctx, corps, msgID)
	if errors.Is(err, yidu.ErrNotFound) {
		return yidu.Notice{}, false, nil
	}
	return n, err == nil, err
}

// pendingStates are the states of notices not yet sent, in the order the
// list page shows them: what needs the sender first.
var pendingStates = []yidu.NoticeState{yidu.StateHeld, yidu.StateFailed, yidu.StateSending, yidu.StateScheduled, yidu.StateDraft}

// Pending is p's notices not yet sent (held, failed, sending, scheduled,
// drafts; of app when it is not empty), newest first within each state,
// at most a list page of each: the list page's first section.
func (s *Service) Pending(ctx context.Context, p *access.Principal, app string) ([]yidu.Notice, error) {
	var out []yidu.Notice
	if p == nil {
		return nil, nil
	}
	for _, st := range pendingStates {
		ns, _, err := s.Notices(ctx, p, st, "", app, "", yidu.DefaultListLimit)
		if err != nil {
			return out, fmt.Errorf("campaign: pending %s notices: %w", st, err)
		}
		out = append(out, ns...)
	}
	return out, nil
}
