package campaign

import (
	"context"
	"errors"

	"github.com/yidu-io/yidu"
)

// Outcome is the audit outcome of an act the service answered err
// (issue 47: the service says what its answer means, the edge never
// derives it from an HTTP status): "ok" for nil; "refused" when the act
// was not done for the caller's role, the notice's state or a limit
// (forbidden, not found, conflict, no longer editable, recalled, not
// approved, busy, too soon, WeCom's rate limit, the client gone);
// "failed" for anything else (a backend down, WeCom failing, a recall
// left incomplete). audited is false for invalid input (yidu.ErrInvalid):
// nothing ran, and hostile input writes nothing.
func Outcome(err error) (outcome string, audited bool) {
	switch {
	case err == nil:
		return "ok", true
	case errors.Is(err, yidu.ErrInvalid):
		return "", false
	case errors.Is(err, yidu.ErrNoSender):
		return "failed", true
	case errors.Is(err, ErrForbidden), errors.Is(err, yidu.ErrRateLimited),
		errors.Is(err, yidu.ErrConflict), errors.Is(err, yidu.ErrNotEditable), errors.Is(err, yidu.ErrNotFound),
		errors.Is(err, ErrBusy), errors.Is(err, ErrApproval), errors.As(err, new(*TooSoonError)),
		errors.Is(err, yidu.ErrRecalled), errors.Is(err, yidu.ErrNotRecallable), errors.Is(err, context.Canceled):
		return "refused", true
	}
	return "failed", true
}

// due appends to *acts the row a is due with the act's answer *err:
// each act defers it, so its refusal or failure leaves its row too.
func due(acts *[]Act, err *error, a Act) {
	a.Err = *err
	*acts = append(*acts, a)
}
