package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
)

// acting is Campaign whose Remind and Recall answer err.
type acting struct {
	Campaign
	err error
}

func (c acting) Remind(_ context.Context, r campaign.Remind) (campaign.RemindReport, error) {
	return campaign.RemindReport{Acts: c.acts(yidu.ActionRemind, r.Message.MsgID)}, c.err
}

func (c acting) Recall(_ context.Context, r campaign.Recall) (campaign.RecallReport, error) {
	return campaign.RecallReport{Acts: c.acts(yidu.ActionRecall, r.Message.MsgID)}, c.err
}

// acts is the row campaign says the act is due, with its answer.
func (c acting) acts(a yidu.Action, msgID string) []campaign.Act {
	return []campaign.Act{{Action: a, MsgID: msgID, Err: c.err}}
}

// TestRemindRecallShareRule (issue 47): a reminder and a recall the
// caller's role allows write the row campaign says is due, whatever it
// answered, with the outcome campaign.Outcome gives it, and none for
// invalid input: one rule for both (they had different exceptions: a
// reminder busy, too soon or of a recalled notice, and a recall busy,
// left no row, unlike every other act).
func TestRemindRecallShareRule(t *testing.T) {
	for _, err := range []error{nil, campaign.ErrBusy, &campaign.TooSoonError{Next: time.Now().Add(time.Hour)}, yidu.ErrRecalled,
		fmt.Errorf("%w: outside the audience", campaign.ErrForbidden), yidu.ErrNotRecallable, campaign.ErrNoReminderLog,
		yidu.Fieldf("state", "state: not a state")} {
		want, audited := campaign.Outcome(err)
		for _, act := range []yidu.Action{yidu.ActionRemind, yidu.ActionRecall} {
			t.Run(fmt.Sprintf("%s/%v", act, err), func(t *testing.T) {
				var rows []string
				srv, nerr := New(tokenOnly{}, acting{err: err}, oneNotice{}, Options{Audit: auditRows{&rows}})
				if nerr != nil {
					t.Fatal(nerr)
				}
				defer srv.Close()
				w := serveAs(srv, "POST", "/api/v1/messages/n1/"+string(act), "")
				if err == nil && w.Code != http.StatusOK {
					t.Fatalf("%s = %d %s; want 200", act, w.Code, w.Body)
				}
				if !audited {
					if len(rows) != 0 {
						t.Errorf("rows = %q; want none for invalid input", rows)
					}
					return
				}
				if w := fmt.Sprintf("%s %s n1 0", act, want); len(rows) != 1 || rows[0] != w {
					t.Errorf("rows = %q; want one, %q", rows, w)
				}
			})
		}
	}
}
