package campaign

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
)

// Members resolves the WeCom member a verified callback names
// (access.Access.WeCom): access.ErrNotMember when they are not an active
// member of the corp, access.ErrNoRole when they hold no role.
type Members interface {
	WeCom(ctx context.Context, corp, userID string) (*access.Principal, error)
}

// CardPress is what an approval card's press decided (PressCard).
type CardPress struct {
	// Ignored: the presser is not a member of the corp; nothing was
	// decided and nothing is recorded.
	Ignored bool
	// Notice is the notice as the press left it; Again that it was
	// decided so already (a WeCom retry, or another replica's).
	Notice yidu.Notice
	Again  bool
	// Refused is why the press changed nothing (the author's own, no
	// approver, a card of an older version, ...); Audit its row, which
	// the edge writes. A decision taken is recorded by Decide with its
	// step; a press on a notice decided already records nothing (a
	// WeCom retry looks the same).
	Refused error
	Audit   *audit.Event
}

// PressCard applies a press of an approval card by WeCom member userID
// of corpID (the receiver's verified callback) on taskID: the member as
// access resolves them, a named approver with no role of their own as
// themselves (they approve by name), then Press. A refusal is no error
// (WeCom must not retry it) but Refused with its audit row; an error is
// a failure to decide (the callback answers it 5xx and WeCom retries).
func (s *Service) PressCard(ctx context.Context, corpID, app, userID, taskID, key string) (CardPress, error) {
	if s.o.Members == nil {
		return CardPress{}, errors.New("campaign: approval cards' presses are not configured")
	}
	p, err := s.o.Members.WeCom(ctx, corpID, userID)
	switch {
	case errors.Is(err, access.ErrNoRole):
		// A named approver needs no role of their own.
		p, err = access.NewPrincipal(userID, access.KindWeCom, false, nil), nil
	case errors.Is(err, access.ErrNotMember):
		return CardPress{Ignored: true}, nil
	}
	if err != nil {
		return CardPress{}, fmt.Errorf("campaign: presser %s: %w", userID, err)
	}
	n, again, err := s.Press(ctx, p, corpID, app, taskID, key)
	switch {
	case err == nil:
		return CardPress{Notice: n, Again: again}, nil
	case errors.Is(err, ErrForbidden), errors.Is(err, ErrApproval), errors.Is(err, ErrNotApprovalCard),
		errors.Is(err, yidu.ErrNotFound), errors.Is(err, yidu.ErrInvalid), errors.Is(err, yidu.ErrNotEditable):
		e := refusedPress(s.o.Now().UTC(), corpID, app, userID, taskID, err)
		return CardPress{Refused: err, Audit: &e}, nil
	}
	return CardPress{}, err
}

// refusedPress is the audit row of a press refused for why: the member,
// outcome refused, as the page's refusals are.
func refusedPress(at time.Time, corpID, app, userID, taskID string, why error) audit.Event {
	m, prefix, _ := yidu.ParseApprovalTaskID(taskID)
	return audit.Event{At: at, Actor: yidu.Truncate(userID, 128), ActorKind: string(access.KindWeCom), Action: yidu.ActionApprove,
		CorpID: corpID, App: app, MsgID: string(m), Outcome: "refused",
		Detail: yidu.Truncate("version="+prefix+" via=card: "+why.Error(), 500)}
}
