package loops

import (
	"context"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
)

// SendsPerSeat is WeCom's daily allowance of an app per account: "每应用不可
// 超过账号上限数*200人次/天" (访问频率限制, doc path 90454; message/send
// counts one recipient-send per person addressed, doc path 90236). A
// send to 1,000 people is 1,000.
const SendsPerSeat = 200

// quota is an app's allowance for one day in its zone.
type quota struct {
	limit int // recipient-sends a day; < 0: unlimited
	used  int // what yidu sent through the app that day
}

// left is what may still be sent today (a big number when unlimited).
func (q quota) left() int {
	if q.limit < 0 {
		return int(^uint(0) >> 1)
	}
	return max(q.limit-q.used, 0)
}

// dailyQuota returns n's app's allowance for the day of now in the app's
// zone: apps[].daily_quota, or by default the corp's active members in
// the synced directory × SendsPerSeat (WeCom counts seats, the account
// limit, which yidu does not know: the members are a floor of it). An
// app with no quota function, or a corp with no synced directory, is
// unlimited. used counts what yidu itself sent through the app that day:
// every batch of message_sends (first sends, "remind now", rounds:
// tracker writes each before its call), the leaders' digests and the
// round reminders recorded and not yet sent.
func (r *Rounds) dailyQuota(ctx context.Context, n notice, now time.Time) (quota, error) {
	if r.DailyQuota == nil {
		return quota{limit: -1}, nil
	}
	q := quota{limit: r.DailyQuota(n.app)}
	if q.limit == 0 {
		var members int
		if r.Seats != nil {
			var err error
			if members, err = r.Seats.CountActive(ctx, n.corpID); err != nil {
				return q, fmt.Errorf("campaign: members of %s: %w", n.corpID, err)
			}
		}
		if members == 0 {
			return quota{limit: -1}, nil
		}
		q.limit = members * SendsPerSeat
	}
	loc := r.zone(n.app)
	l := now.In(loc)
	from := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, loc).UTC()
	to := time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc).UTC()
	var sends, logged int
	if err := r.DB.QueryRowContext(ctx, `SELECT COALESCE(SUM(s.users), 0) FROM message_sends s
		JOIN messages m ON m.corp_id = s.corp_id AND m.msgid = s.msgid
		WHERE m.corp_id = ? AND m.app = ? AND s.sent_at >= ? AND s.sent_at < ? AND s.status IN (?, ?)`,
		n.corpID, n.app, from, to, string(yidu.SendSent), string(yidu.SendUnknown)).Scan(&sends); err != nil {
		return q, fmt.Errorf("campaign: sends today: %w", err)
	}
	if err := r.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM reminder_log l
		JOIN messages m ON m.corp_id = l.corp_id AND m.msgid = l.msgid
		WHERE m.corp_id = ? AND m.app = ? AND l.reminded_at >= ? AND l.reminded_at < ?
			AND ((l.kind = 'digest' AND l.outcome IN ('sent', 'pending')) OR (l.kind = 'reminder' AND l.outcome = 'pending'))`,
		n.corpID, n.app, from, to).Scan(&logged); err != nil {
		return q, fmt.Errorf("campaign: reminders today: %w", err)
	}
	q.used = sends + logged
	return q, nil
}

// spreadUntil is when a round with rest people still to remind after
// today will have reached them all, at limit a day from the next working
// day on: the end of the working time of its last day.
func spreadUntil(s *yidu.FollowUpSchedule, now time.Time, loc *time.Location, rest, limit int) time.Time {
	d := s.NextDay(now, loc)
	if limit > 0 {
		for rest -= limit; rest > 0; rest -= limit {
			d = s.NextDay(d, loc)
		}
	}
	return s.DayEnd(d, loc)
}
