package campaign

import (
	"context"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/loop"
)

// An approval card WeCom did not take (issue 46) is an audit row
// "failed" and a row of approval_card_retries: the card is sent again
// with backoff (CardRetryBackoff, doubling, at most CardRetryMax apart)
// up to MaxCardAttempts tries in all, each try claimed in MySQL
// (Lease) so exactly one replica sends it, and each one an audit row of
// its own. A try for a version that no longer waits for approval (it
// was decided, or edited into a new one, which asks anew) is dropped.

// Card retry bounds.
const (
	MaxCardAttempts  = 6
	CardRetryBackoff = 30 * time.Second
	CardRetryMax     = 30 * time.Minute
)

// cardRetryBackoff is the wait after the attempts-th try failed.
func cardRetryBackoff(attempts int) time.Duration {
	d := CardRetryBackoff << min(max(attempts-1, 0), 20)
	return min(d, CardRetryMax)
}

func (s *Service) cardLease() store.Lease { return store.CardLease(s.owner()) }

// owner names this replica in approval_card_retries.owner.
func (s *Service) owner() string {
	s.ownerOnce.Do(func() { s.ownerName = store.DefaultOwner() })
	return s.ownerName
}

// cardFailed records that the approval card task of n (version hash, to
// recipients people) did not reach WeCom: it is tried again after the
// backoff.
func (s *Service) cardFailed(ctx context.Context, n yidu.Notice, hash, task string, recipients uint64, sendErr error) {
	if s.st == nil {
		return
	}
	c := store.Card{CorpID: n.App.CorpID, MsgID: n.MsgID, TaskID: task}
	if err := s.st.CardFailed(ctx, c, hash, recipients, s.o.Now().UTC().Add(cardRetryBackoff(1)), sendErr); err != nil {
		s.log.ErrorContext(ctx, "approval card retry not recorded", "corp", n.App.CorpID, "msgid", n.MsgID, "err", err)
	}
}

// RetryApprovalCards sends again every approval card due for a retry
// that this replica claims; each card runs under g (its own recover and
// backoff). It returns how many it tried.
func (s *Service) RetryApprovalCards(ctx context.Context, g *loop.Guard) (int, error) {
	if s.st == nil || s.o.Notify == nil {
		return 0, nil
	}
	due, err := s.st.DueCards(ctx, s.o.Now().UTC())
	if err != nil {
		return 0, err
	}
	tried := 0
	for _, c := range due {
		ran, _ := g.Do(ctx, "approval card "+c.TaskID, func(ctx context.Context) error {
			return s.retryCard(ctx, c)
		})
		if ran {
			tried++
		}
	}
	return tried, nil
}

// retryCard claims and sends one approval card again.
func (s *Service) retryCard(ctx context.Context, c store.Card) error {
	l, now := s.cardLease(), s.o.Now().UTC()
	hash, recipients, attempts, ok, err := s.st.ClaimCard(ctx, l, now, c)
	if err != nil || !ok {
		return err
	}
	finish := func(state, set string, args ...any) error {
		return s.st.FinishCard(ctx, l, c, state, set, args...)
	}
	corpID, msgID, task := c.CorpID, c.MsgID, c.TaskID
	n, err := s.st.Get(ctx, []string{corpID}, msgID)
	if err != nil {
		return err
	}
	if n.Approval != yidu.ApprovalPending || n.ApprovalHash != hash || n.App.Approval == nil {
		return finish("stale", "")
	}
	approvers := s.cardApprovers(n)
	sendErr := s.o.Notify.AskApproval(ctx, n, hash, task, recipients, approvers)
	s.told(ctx, n, fmt.Sprintf("to=approvers count=%d step=%s version=%s attempt=%d", len(approvers), store.StepRequested, hash, attempts), sendErr)
	switch {
	case sendErr == nil:
		return finish("sent", "last_error = ''")
	case attempts >= MaxCardAttempts:
		s.log.ErrorContext(ctx, "approval card given up", "corp", corpID, "msgid", msgID, "attempts", attempts, "err", sendErr)
		return finish("failed", "last_error = ?", yidu.Truncate(sendErr.Error(), 255))
	}
	if err := finish("pending", "next_at = ?, last_error = ?", now.Add(cardRetryBackoff(attempts)), yidu.Truncate(sendErr.Error(), 255)); err != nil {
		return err
	}
	return fmt.Errorf("campaign: approval card %s, attempt %d: %w", task, attempts, sendErr)
}

// cardApprovers are the UserIDs n's approval card goes to: its WeCom
// approvers but its author (nobody approves their own).
func (s *Service) cardApprovers(n yidu.Notice) []string {
	var out []string
	for _, a := range n.App.Approval.WeComApprovers() {
		if a != n.CreatedBy {
			out = append(out, a)
		}
	}
	return out
}
