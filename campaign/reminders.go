package campaign

import (
	"context"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
)

// ManualReminder is one 提醒未读 of a notice, and what it achieved
// (store.ManualReminder).
type ManualReminder = store.ManualReminder

// reminderHistory reads the 提醒未读 of a notice (store.ReminderLog).
type reminderHistory interface {
	ManualReminders(ctx context.Context, corpID, msgID string) ([]store.ManualReminder, error)
}

// ManualReminders is m's history of 提醒未读, oldest first (the message
// page's 提醒记录, issue 49). Update cards of a new version (scope
// reack:vN) are not reminders and are left out.
func (s *Service) ManualReminders(ctx context.Context, m yidu.Message) ([]ManualReminder, error) {
	h, ok := s.o.Reminders.(reminderHistory)
	if !ok {
		return []ManualReminder{}, nil
	}
	return h.ManualReminders(ctx, m.CorpID, m.MsgID)
}
