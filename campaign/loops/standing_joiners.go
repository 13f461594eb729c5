package loops

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// A standing notice's joiners have reminder rounds of their own,
// counted from their own card (issue 51); the notice's rounds are its
// first recipients' (Rounds.candidates leaves the joiners out).

// reminderLog records a joiner's round like a notice's round
// (reminder_log), so evidence and the remind interval see it.
func (l *StandingLoop) reminderLog(ctx context.Context, j joinerDue, round int, at time.Time) error {
	_, err := l.DB.ExecContext(ctx, `INSERT IGNORE INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
		VALUES (?, ?, ?, 'reminder', ?, ?, ?, ?, 'sent')`, j.corp, j.msgid, round, j.uid, j.userid, standingRoundBatch, at.UTC().Truncate(time.Second))
	return err
}

// joinerDue is an enrolled joiner with a follow-up policy.
type joinerDue struct {
	corp, msgid, app, userid string
	uid                      uint32
	sentAt, deadline         time.Time
	policy                   yidu.Policy
	done                     int
}

// joinerRounds runs each unread joiner's own rounds: the notice's policy
// counted from their own card, up to their own deadline. A round is
// claimed by its standing_rounds row (one replica), then sent, then
// marked; a claim whose holder died is taken over after its lease, and
// sent again with the same task_id (WeCom's duplicate check).
func (l *StandingLoop) joinerRounds(ctx context.Context) error {
	now := l.Now()
	due, err := sqlrows.List(ctx, l.DB, func(rows *sql.Rows, j *joinerDue) error {
		var policy string
		if err := rows.Scan(&j.corp, &j.msgid, &j.app, &j.uid, &j.userid, &j.sentAt, &j.deadline, &policy, &j.done); err != nil {
			return err
		}
		if json.Unmarshal([]byte(policy), &j.policy) != nil {
			j.policy = yidu.Policy{} // unreadable: no rounds
		}
		return nil
	}, `SELECT e.corp_id, e.msgid, m.app, e.uid, e.userid, e.sent_at, e.deadline, f.policy,
			(SELECT COUNT(*) FROM standing_rounds r WHERE r.corp_id = e.corp_id AND r.msgid = e.msgid AND r.uid = e.uid AND r.state <> 'sending')
		FROM standing_enrolments e
		JOIN follow_ups f ON f.corp_id = e.corp_id AND f.msgid = e.msgid
		JOIN messages m ON m.corp_id = e.corp_id AND m.msgid = e.msgid
		WHERE e.sent_at IS NOT NULL AND e.status IN ('sent', 'unknown') AND m.recalled_at IS NULL AND e.deadline > ?`, now)
	if err != nil {
		return fmt.Errorf("campaign: joiners' rounds: %w", err)
	}
	reads := map[string]*roaring.Bitmap{}
	for _, j := range due {
		if len(j.policy.Reminders) == 0 {
			continue // no rounds, or a policy that does not decode
		}
		p := j.policy
		d := j.deadline
		p.Deadline = &d
		s, err := p.Compile(j.sentAt, l.MinGap)
		if err != nil {
			continue
		}
		round, at, ok := s.Due(j.sentAt, now, l.zone(j.app), j.done)
		if !ok {
			continue
		}
		read, seen := reads[j.corp+"/"+j.msgid]
		if !seen {
			read, _, err = l.Reads.ReadBitmap(ctx, j.corp, j.msgid)
			if err != nil {
				l.Log.Warn("joiners' rounds: reads unknown; later", "msgid", j.msgid, "err", err)
				continue
			}
			reads[j.corp+"/"+j.msgid] = read
		}
		if err := l.safely(ctx, fmt.Sprintf("%s joiner %d round %d", j.msgid, j.uid, round), func() error { return l.joinerRound(ctx, j, round, at, read != nil && read.Contains(j.uid)) }); err != nil {
			l.Log.Error("joiner's round", "msgid", j.msgid, "round", round, "err", err)
		}
	}
	return nil
}

func (l *StandingLoop) joinerRound(ctx context.Context, j joinerDue, round int, at time.Time, read bool) error {
	now := l.Now()
	state := "sending"
	if read {
		state = "skipped" // read already: the round is not sent
	}
	res, err := l.DB.ExecContext(ctx, `INSERT IGNORE INTO standing_rounds (corp_id, msgid, uid, round, state, due_at, owner, lease_until)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, j.corp, j.msgid, j.uid, round, state, at, l.Owner, now.Add(l.TTL))
	if err != nil {
		return fmt.Errorf("campaign: claim joiner's round: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		// Claimed before: taken over only from a holder whose lease ran out.
		if res, err = l.DB.ExecContext(ctx, `UPDATE standing_rounds SET owner = ?, lease_until = ?
			WHERE corp_id = ? AND msgid = ? AND uid = ? AND round = ? AND state = 'sending' AND lease_until < ?`,
			l.Owner, now.Add(l.TTL), j.corp, j.msgid, j.uid, round, now); err != nil {
			return fmt.Errorf("campaign: take over joiner's round: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
	}
	if read {
		return nil
	}
	m, ok, err := l.Tracker.GetMessage(ctx, []string{j.corp}, j.msgid)
	if err != nil || !ok {
		return err
	}
	task := fmt.Sprintf("%s@j%d-%d", j.msgid, j.uid, round)
	if _, err := l.Tracker.RemindBatch(ctx, m, task, standingRoundBatch, []string{j.userid}); err != nil {
		return err
	}
	if err := l.reminderLog(ctx, j, round, now); err != nil {
		return fmt.Errorf("campaign: joiner's round record: %w", err)
	}
	if _, err := l.DB.ExecContext(ctx, `UPDATE standing_rounds SET state = 'sent', sent_at = ?, owner = NULL, lease_until = NULL
		WHERE corp_id = ? AND msgid = ? AND uid = ? AND round = ?`, now, j.corp, j.msgid, j.uid, round); err != nil {
		return fmt.Errorf("campaign: joiner's round: %w", err)
	}
	return nil
}
