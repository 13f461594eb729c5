package campaign

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/loops"
)

// The follow-up of a notice (issue 30): its policy, kept and run by
// the rounds (Options.Rounds, loops.Rounds), which the service checks,
// defaults and authorizes.

// DefaultFollowUp is the follow-up policy a new notice of app gets when
// its request named none (set false): the app's apps[].follow_up, when
// the server runs rounds. nil: none.
func (s *Service) DefaultFollowUp(app yidu.App, set bool) *yidu.Policy {
	if set || app.FollowUp == nil || s.o.Rounds == nil {
		return nil
	}
	p := *app.FollowUp
	return &p
}

// CheckFollowUp checks a posted policy for a notice sent at sendAt before
// anything is sent or stored; nil p is no policy. The error names the
// field inside follow_up.
func (s *Service) CheckFollowUp(p *yidu.Policy, sendAt time.Time) error {
	if p == nil {
		return nil
	}
	if s.o.Rounds == nil {
		return ErrNoFollowUps
	}
	return InFollowUp(s.o.Rounds.CheckPolicy(*p, sendAt))
}

// MayFollowUp says whether p may change m's follow-up (ErrForbidden), and
// whether the server runs follow-ups (ErrNoFollowUps): the dashboard asks
// before it reads the body, so a caller without the right learns nothing
// from the body's errors.
func (s *Service) MayFollowUp(p *access.Principal, m yidu.Message) error {
	if err := mustSend(p, m.CorpID, m.App, "manage this notice's follow-up"); err != nil {
		return err
	}
	if s.o.Rounds == nil {
		return ErrNoFollowUps
	}
	return nil
}

// FollowUpOf is m's follow-up policy and rounds as the notice's own
// answer shows them; found false when it has none or the server runs no
// rounds.
func (s *Service) FollowUpOf(ctx context.Context, m yidu.Message) (loops.FollowUp, bool, error) {
	if s.o.Rounds == nil {
		return loops.FollowUp{}, false, nil
	}
	fu, ok, err := s.o.Rounds.FollowUpOf(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return loops.FollowUp{}, false, fmt.Errorf("campaign: follow-up of %s: %w", m.MsgID, err)
	}
	return fu, ok, nil
}

// FollowUp is m's follow-up for p, who must manage it (MayFollowUp) and
// see the whole notice (whole: the rounds count every unread recipient,
// more than a scoped View holds).
func (s *Service) FollowUp(ctx context.Context, p *access.Principal, m yidu.Message, whole bool) (loops.FollowUp, bool, error) {
	if !whole {
		return loops.FollowUp{}, false, fmt.Errorf("%w: your role may not manage this notice's follow-up", ErrForbidden)
	}
	if err := s.MayFollowUp(p, m); err != nil {
		return loops.FollowUp{}, false, err
	}
	return s.FollowUpOf(ctx, m)
}

// SetFollowUp sets or changes the follow-up policy of a sent notice of the
// caller's app (the whole notice's: rounds to every unread recipient).
func (s *Service) SetFollowUp(ctx context.Context, p *access.Principal, m yidu.Message, pol yidu.Policy) (acts []Act, err error) {
	defer due(&acts, &err, Act{Action: yidu.ActionFollowUpChange, MsgID: m.MsgID, Detail: "policy"})
	if err := s.MayFollowUp(p, m); err != nil {
		return nil, err
	}
	// Its rounds reach every unread recipient: a sender kept to an
	// audience sets one only on a notice inside it. A notice not
	// approved takes one, and its rounds wait (Rounds.Gate).
	if err := s.authorize(ctx, VerbFollowUp, p, MessageTarget(m)); err != nil {
		return nil, err
	}
	return nil, s.o.Rounds.SetPolicy(ctx, m.CorpID, m.MsgID, pol, p.Name)
}

// StoreFollowUp stores the follow-up policy of a notice the caller just
// registered (sent now): the posted one, or the app's default.
func (s *Service) StoreFollowUp(ctx context.Context, p *access.Principal, m yidu.Message, pol yidu.Policy) error {
	if err := mustSend(p, m.CorpID, m.App, "manage this notice's follow-up"); err != nil {
		return err
	}
	if s.o.Rounds == nil {
		return ErrNoFollowUps
	}
	if m.Recalled() {
		return yidu.Fieldf("follow_up", "follow_up: the notice was recalled")
	}
	return InFollowUp(s.o.Rounds.StorePolicy(ctx, m.CorpID, m.MsgID, pol, m.SentAt, p.Name))
}

// CancelRound stops the notice's current round; false when none is due
// or sending (its row refused: nothing to cancel).
func (s *Service) CancelRound(ctx context.Context, p *access.Principal, m yidu.Message) (ok bool, acts []Act, err error) {
	defer func() {
		a := Act{Action: yidu.ActionFollowUpChange, MsgID: m.MsgID, Detail: "cancel_round", Err: err}
		if err == nil && !ok {
			a.Err = fmt.Errorf("%w: no round is due or sending", yidu.ErrConflict)
		}
		acts = append(acts, a)
	}()
	if err := s.MayFollowUp(p, m); err != nil {
		return false, nil, err
	}
	if err := s.authorize(ctx, VerbFollowUp, p, MessageTarget(m)); err != nil {
		return false, nil, err
	}
	ok, err = s.o.Rounds.CancelRound(ctx, m.CorpID, m.MsgID)
	return ok, nil, err
}

// InFollowUp names a policy's field as a field of the posted follow_up
// ("deadline: ..." becomes "follow_up.deadline: ...").
func InFollowUp(err error) error {
	var fe *yidu.FieldError
	if !errors.As(err, &fe) || strings.HasPrefix(fe.Field, "follow_up") {
		return err
	}
	in := *fe // the input it quotes, if any, with it
	in.Field, in.Reason = "follow_up."+fe.Field, "follow_up."+fe.Reason
	return &in
}
