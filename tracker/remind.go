package tracker

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/yidu-io/yidu"
)

// Remind sends a reminder card to userIDs (campaign.Service passes the
// unread people it found due), SendBatch per call; reminder K's batch N
// carries task_id "<msgid>@r<K>-<N>" so a press on it counts as a read of
// m. The card is the notice's (body and link) with "提醒" (reminderDesc)
// under the title. Every batch is recorded in message_sends with kind
// "remind" (so recall recalls it). Who may remind whom, and the least
// interval between two reminders of a person, are campaign.Service's to
// decide. A recalled message is not reminded (yidu.ErrRecalled).
func (r *Registry) Remind(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	return r.remind(ctx, m, userIDs, reminderDesc)
}

// reconfirmDesc is the card of a material new version of a notice read
// under read_rule acknowledged (issue 39).
const reconfirmDesc = "通知已更新，请重新确认"

// Reconfirm sends userIDs (those who acknowledged an earlier version;
// campaign.Service.Reconfirm decides, once each) the notice's card with
// 通知已更新，请重新确认 under the title: a reminder in every other way
// (task ids, message_sends kind "remind", recall).
func (r *Registry) Reconfirm(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	return r.remind(ctx, m, userIDs, reconfirmDesc)
}

func (r *Registry) remind(ctx context.Context, m yidu.Message, userIDs []string, desc string) (yidu.RemindReport, error) {
	var rep yidu.RemindReport
	if r.sender == nil {
		return rep, yidu.ErrNoSender
	}
	if !yidu.MsgID(m.MsgID).Valid() || !yidu.CorpID(m.CorpID).Valid() {
		return rep, yidu.Invalidf("bad message")
	}
	if m.Recalled() {
		return rep, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	c, err := r.card(r.appOf(m), m, desc)
	if err != nil {
		return rep, err
	}
	// A member whose UserID breaks WeCom's rule cannot be addressed (it
	// would fail the whole batch): skipped and counted, never the others'
	// reminder.
	users := make([]string, 0, len(userIDs))
	for _, u := range userIDs {
		if yidu.UserID(u).Valid() {
			users = append(users, u)
		} else {
			rep.BadUserIDs++
		}
	}
	r.met.badUserIDs.Add(float64(rep.BadUserIDs))
	users = slices.Compact(slices.Sorted(slices.Values(users)))
	if len(users) == 0 {
		return rep, nil
	}
	if !r.allowNotice(m.App) {
		return rep, fmt.Errorf("%w: app %s", yidu.ErrRateLimited, m.App)
	}
	var k int
	if err := r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = 0",
		m.CorpID, m.MsgID, kindRemind).Scan(&k); err != nil {
		return rep, fmt.Errorf("tracker: count reminders: %w", err)
	}
	k++
	stopped := false
	for n := 0; n*SendBatch < len(users); n++ {
		chunk := users[n*SendBatch : min((n+1)*SendBatch, len(users))]
		if stopped {
			rep.Outcomes = append(rep.Outcomes, yidu.BatchOutcome{Batch: n, Status: yidu.SendUnsent, Users: len(chunk), Reminder: true})
			continue
		}
		taskID := yidu.ReminderTaskID(yidu.MsgID(m.MsgID), k, n)
		body, err := c.request(chunk, taskID)
		if err != nil {
			return rep, fmt.Errorf("tracker: card body: %w", err)
		}
		o, err := r.batch(ctx, kindRemind, m, n, sendBatch{users: chunk}, body, nil, &rep.SendReport)
		if err != nil {
			return rep, err
		}
		rep.Outcomes = append(rep.Outcomes, o)
		stopped = stops(o)
	}
	rep.Reminded = rep.Sent
	r.log.Info("reminded", "corp", m.CorpID, "msgid", m.MsgID, "reminder", k, "batches", rep.Batches,
		"sent", rep.Sent, "invalid", rep.Invalid, "refused", rep.Refused, "unknown", rep.Unknown, "bad_userids", rep.BadUserIDs)
	return rep, nil
}

// LastReminder returns when msgID was last reminded, from message_sends, so
// a restart does not reopen the dashboard's reminder interval.
func (r *Registry) LastReminder(ctx context.Context, corpID, msgID string) (time.Time, bool, error) {
	var at sql.NullTime
	if err := r.db.QueryRowContext(ctx, "SELECT MAX(sent_at) FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ?", corpID, msgID, kindRemind).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("tracker: last reminder: %w", err)
	}
	return at.Time.UTC(), at.Valid, nil
}
