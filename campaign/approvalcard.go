package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/cards"
)

// ErrNotApprovalCard: a press on a card that is not an approval card of
// a notice of this app (the callback then treats it as before).
var ErrNotApprovalCard = errors.New("not an approval card")

// Press applies a press of an approval card's 批准 by p (the member the
// verified callback names) on taskID: the approval of the version the
// card asked for. A press on a card of an older version, another key,
// or a second press changes nothing (again true, or ErrApproval).
func (s *Service) Press(ctx context.Context, p *access.Principal, corpID, app, taskID, key string) (yidu.Notice, bool, error) {
	m, prefix, ok := yidu.ParseApprovalTaskID(taskID)
	if !ok {
		return yidu.Notice{}, false, ErrNotApprovalCard
	}
	if s.st == nil {
		return yidu.Notice{}, false, ErrNoCampaigns
	}
	n, err := s.st.Get(ctx, []string{corpID}, string(m))
	if err != nil {
		return yidu.Notice{}, false, err
	}
	if n.App.Name != app {
		return yidu.Notice{}, false, ErrNotApprovalCard
	}
	if key != cards.ApproveKey {
		return n, false, yidu.Invalidf("key: only 批准 comes back; 驳回 asks for a reason on the page")
	}
	if !strings.HasPrefix(n.ApprovalHash, prefix) {
		return yidu.Notice{}, false, fmt.Errorf("%w: %s changed since this card was sent", ErrApproval, n.MsgID)
	}
	// Its refusal's row is PressCard's (the card's version, its why).
	n, again, _, err := s.Decide(ctx, p, n, Decision{Hash: n.ApprovalHash, Approve: true, Via: "card"})
	return n, again, err
}

// Previewer sends 发给我预览 cards (cards.Notifier).
type Previewer interface {
	Preview(ctx context.Context, n yidu.Notice, userID, taskID string) error
}

// ErrNoPreview: the server cannot send WeCom cards to preview (no
// dashboard.public_url), or the caller has no WeCom UserID to send to.
var ErrNoPreview = errors.New("preview through WeCom is not available")

// PreviewToMe sends n's card to the caller alone: an approver of n (its
// author included, to see what they asked for) signed in with WeCom.
func (s *Service) PreviewToMe(ctx context.Context, p *access.Principal, n yidu.Notice) (string, error) {
	if err := MayApprove(p, n); err != nil && !errors.Is(err, ErrOwnNotice) {
		return "", err
	}
	pv, ok := s.o.Notify.(Previewer)
	if !ok || p.UserID == "" {
		return "", fmt.Errorf("%w: sign in with WeCom, on a server with dashboard.public_url", ErrNoPreview)
	}
	task := yidu.PreviewTaskID(yidu.MsgID(n.MsgID), s.o.Now().UnixNano()/int64(time.Millisecond))
	if err := pv.Preview(ctx, n, p.UserID, task); err != nil {
		return "", fmt.Errorf("campaign: preview: %w", err)
	}
	return p.UserID, nil
}
