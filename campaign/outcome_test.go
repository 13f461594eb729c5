package campaign

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// TestOutcome: the audit outcome of the service's answers, the table the
// dashboard's status once stood for: refusals for the caller's role, the
// notice's state or a limit; failures for the rest; no row for invalid
// input.
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		err     error
		want    string
		audited bool
	}{
		{nil, "ok", true},
		{yidu.Fieldf("title", "title: empty"), "", false},
		{fmt.Errorf("x: %w", yidu.ErrInvalid), "", false},
		{ErrNoFollowUps, "", false},
		{fmt.Errorf("%w: viewer", ErrForbidden), "refused", true},
		{&AudienceError{Field: "audience", Reason: "outside"}, "refused", true},
		{access.Decide(nil, yidu.ActionRecall, access.Target{}).Err(), "refused", true},
		{ErrBusy, "refused", true},
		{&TooSoonError{}, "refused", true},
		{ErrNotApproved, "refused", true},
		{yidu.ErrNotEditable, "refused", true},
		{yidu.ErrNotFound, "refused", true},
		{yidu.ErrConflict, "refused", true},
		{yidu.ErrRecalled, "refused", true},
		{yidu.ErrNotRecallable, "refused", true},
		{yidu.ErrRateLimited, "refused", true},
		{context.Canceled, "refused", true},
		{yidu.ErrRecallIncomplete, "failed", true},
		{yidu.ErrNoSender, "failed", true},
		{ErrNoReminderLog, "failed", true},
		{context.DeadlineExceeded, "failed", true},
		{errors.New("mysql: connection reset"), "failed", true},
	} {
		if got, audited := Outcome(tc.err); got != tc.want || audited != tc.audited {
			t.Errorf("Outcome(%v) = %q, %v; want %q, %v", tc.err, got, audited, tc.want, tc.audited)
		}
	}
}
