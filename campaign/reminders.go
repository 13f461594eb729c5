package campaign

import (
	"context"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
)

// ManualReminder is one 提醒未读 of a notice, and what it achieved
// (zh-CN.md: 提醒效果: 提醒后 1 小时内已读 N 人).
type ManualReminder struct {
	At time.Time `json:"at"`
	// By is who reminded; Scope "all" (a sender's) or "led" (a leader's).
	By    string `json:"by"`
	Scope string `json:"scope"`
	// People is how many it reminded; ReadWithin1h and ReadSince how
	// many of them read (under read_rule acknowledged: acknowledged) at
	// most an hour after it, and at all after it.
	People       int `json:"people"`
	ReadWithin1h int `json:"read_within_1h"`
	ReadSince    int `json:"read_since"`
}

// reminderHistory reads the 提醒未读 rows of a notice (store.ReminderLog).
type reminderHistory interface {
	ManualReminders(ctx context.Context, corpID, msgID string) ([]store.ReminderRow, error)
}

// ManualReminders is m's history of 提醒未读, oldest first (the message
// page's 提醒记录, issue 49). Update cards of a new version (scope
// reack:vN) are not reminders and are left out.
func (s *Service) ManualReminders(ctx context.Context, m yidu.Message) ([]ManualReminder, error) {
	h, ok := s.o.Reminders.(reminderHistory)
	if !ok {
		return []ManualReminder{}, nil
	}
	rows, err := h.ManualReminders(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return nil, err
	}
	out := []ManualReminder{}
	for _, r := range rows {
		at := r.At.UTC()
		if n := len(out); n == 0 || !out[n-1].At.Equal(at) || out[n-1].By != r.By || out[n-1].Scope != r.Scope {
			out = append(out, ManualReminder{At: at, By: r.By, Scope: r.Scope})
		}
		mr := &out[len(out)-1]
		mr.People++
		// read_time is in whole seconds: a read in the reminder's second
		// counts as after it, as reminder_effect does.
		if r.Read && !r.ReadTime.Before(at.Truncate(time.Second)) {
			mr.ReadSince++
			if !r.ReadTime.After(at.Add(time.Hour)) {
				mr.ReadWithin1h++
			}
		}
	}
	return out, nil
}
