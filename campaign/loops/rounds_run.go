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

// run claims and sends one round (or resumes it). A round larger than
// what is left of the app's daily quota records and sends the part that
// fits, and waits (pending, spread_until set) for the next working day,
// when it records the next part from who is unread then and was not
// reminded in this round yet.
func (r *Rounds) run(ctx context.Context, corpID, msgID string, round int) error {
	if r.Gate != nil {
		if wait, err := r.Gate(ctx, corpID, msgID); err != nil {
			return err
		} else if wait {
			r.Log.DebugContext(ctx, "follow-up round waits for approval", "msgid", msgID, "round", round)
			return nil
		}
	}
	ok, err := r.claim(ctx, corpID, msgID, round)
	if err != nil || !ok {
		return err
	}
	n, err := r.notice(ctx, corpID, msgID)
	if err != nil {
		return err
	}
	if n.recalled {
		return r.finish(ctx, n, round, "cancelled")
	}
	var policy string
	if err := r.DB.QueryRowContext(ctx, `SELECT policy FROM follow_ups WHERE corp_id = ? AND msgid = ?`, corpID, msgID).Scan(&policy); err == nil {
		_ = json.Unmarshal([]byte(policy), &n.policy)
	}
	s, err := n.policy.Compile(n.sentAt, r.MinGap)
	if err != nil {
		s, _ = (&yidu.Policy{}).Compile(n.sentAt, 0) // any time of any day
	}
	var recorded, pending int
	var spread sql.NullTime
	if err := r.DB.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM follow_up_batches b WHERE b.corp_id = x.corp_id AND b.msgid = x.msgid AND b.round = x.round AND b.kind = 'reminder'),
			(SELECT COUNT(*) FROM follow_up_batches b WHERE b.corp_id = x.corp_id AND b.msgid = x.msgid AND b.round = x.round AND b.kind = 'reminder' AND b.state = 'pending'),
			x.spread_until
		FROM follow_up_rounds x WHERE x.corp_id = ? AND x.msgid = ? AND x.round = ?`, corpID, msgID, round).Scan(&recorded, &pending, &spread); err != nil {
		return fmt.Errorf("campaign: batches: %w", err)
	}
	if pending == 0 && (recorded == 0 || spread.Valid) {
		q, err := r.dailyQuota(ctx, n, r.Now())
		if err != nil {
			return err
		}
		people, rest, err := r.record(ctx, n, round, recorded, q, s)
		if err != nil {
			return err
		}
		if recorded == 0 && people == 0 && rest == 0 {
			if err := r.finish(ctx, n, round, "skipped"); err != nil {
				return err
			}
			return r.stop(ctx, n, "everyone_read")
		}
		spread.Valid = spread.Valid || rest > 0
	}
	if stopped, err := r.sendBatches(ctx, n, round); err != nil || stopped {
		return err
	}
	if spread.Valid {
		left, _, err := r.candidates(ctx, n, round, true)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return r.postpone(ctx, n, round, s, len(left))
		}
	}
	if n.policy.EscalateAfter == round {
		if err := r.escalate(ctx, n, round); err != nil {
			return err
		}
	}
	return r.finish(ctx, n, round, "sent")
}

// postpone puts a spread round back to pending until the next working
// day, with rest people still to remind, and says until when it will
// take (spread_until). A next day past the policy's deadline ends the
// round with the people it reached.
func (r *Rounds) postpone(ctx context.Context, n notice, round int, s *yidu.FollowUpSchedule, rest int) error {
	now, loc := r.Now(), r.zone(n.app)
	next := s.NextDay(now, loc)
	if d := s.Deadline(); d != nil && next.After(*d) {
		return r.finish(ctx, n, round, "sent")
	}
	q, err := r.dailyQuota(ctx, n, next)
	if err != nil {
		return err
	}
	until := spreadUntil(s, now, loc, rest, q.limit)
	if _, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET state = 'pending', due_at = ?, spread_until = ?, owner = NULL, lease_until = NULL,
			sent_to = (SELECT COUNT(*) FROM reminder_log l WHERE l.corp_id = ? AND l.msgid = ? AND l.round = ? AND l.kind = 'reminder' AND l.outcome = 'sent')
		WHERE `+roundWhere+` AND state = 'sending' AND owner = ?`,
		next, until, n.corpID, n.msgID, round, n.corpID, n.msgID, round, r.Owner); err != nil {
		return fmt.Errorf("campaign: postpone round: %w", err)
	}
	r.Log.Info("follow-up round spread over days (daily quota)", "msgid", n.msgID, "round", round, "rest", rest, "next", next, "until", until)
	return nil
}

// candidates are the round's people at this moment: the live recipients
// not read, not a standing notice's joiners, active in the directory, and
// (reminded) not already in the round's reminder_log.
func (r *Rounds) candidates(ctx context.Context, n notice, round int, reminded bool) ([]uint32, map[uint32]Member, error) {
	rec, ok, err := r.Reads.RecipientBitmap(ctx, n.corpID, n.msgID)
	if err != nil || !ok {
		return nil, nil, fmt.Errorf("campaign: recipients of %s (found %v): %w", n.msgID, ok, err)
	}
	read, _, err := r.Reads.ReadBitmap(ctx, n.corpID, n.msgID)
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: reads of %s: %w", n.msgID, err)
	}
	joiners, err := r.Joiners.Enrolled(ctx, n.corpID, n.msgID)
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: joiners of %s: %w", n.msgID, err)
	}
	unread := roaring.AndNot(rec, read)
	unread.AndNot(joiners) // a standing notice's joiners have rounds of their own (standing_joiners.go)
	if reminded {
		done, err := sqlrows.List(ctx, r.DB, func(rows *sql.Rows, uid *uint32) error { return rows.Scan(uid) },
			`SELECT uid FROM reminder_log WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder'`, n.corpID, n.msgID, round)
		if err != nil {
			return nil, nil, fmt.Errorf("campaign: reminded: %w", err)
		}
		unread.AndNot(roaring.BitmapOf(done...))
	}
	members, err := r.People.Active(ctx, n.corpID, unread.ToArray())
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: members: %w", err)
	}
	uids := make([]uint32, 0, len(members))
	it := unread.Iterator()
	for it.HasNext() {
		if uid := it.Next(); hasMember(members, uid) {
			uids = append(uids, uid) // one who left, or is not in the directory, is skipped
		}
	}
	return uids, members, nil
}

func hasMember(m map[uint32]Member, uid uint32) bool {
	_, ok := m[uid]
	return ok
}

// record takes the round's people at this moment (candidates; after a
// part sent on an earlier day, those not reminded yet), as many as q
// leaves for today, and records them in batches numbered from first
// (follow_up_batches and reminder_log, one transaction) before anything
// is sent. rest are the people left for a later day; with any, the
// round's spread_until is set in the same transaction.
func (r *Rounds) record(ctx context.Context, n notice, round, first int, q quota, s *yidu.FollowUpSchedule) (people, rest int, err error) {
	uids, members, err := r.candidates(ctx, n, round, first > 0)
	if err != nil {
		return 0, 0, err
	}
	if left := q.left(); len(uids) > left {
		uids, rest = uids[:left], len(uids)-left
	}
	now := r.Now()
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("campaign: record round: %w", err)
	}
	defer tx.Rollback()
	batch, count := roaring.New(), first
	flush := func() error {
		if batch.IsEmpty() {
			return nil
		}
		b, err := batch.ToBytes()
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO follow_up_batches (corp_id, msgid, round, kind, batch, state, uids, people, created_at)
			VALUES (?, ?, ?, 'reminder', ?, 'pending', ?, ?, ?)`, n.corpID, n.msgID, round, count, b, batch.GetCardinality(), now); err != nil {
			return err
		}
		args := make([]any, 0, batch.GetCardinality()*8)
		stmt := []byte(`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES `)
		it := batch.Iterator()
		for i := 0; it.HasNext(); i++ {
			uid := it.Next()
			if i > 0 {
				stmt = append(stmt, ',')
			}
			stmt = append(stmt, "(?, ?, ?, 'reminder', ?, ?, ?, ?, 'pending')"...)
			args = append(args, n.corpID, n.msgID, round, uid, members[uid].UserID, count, now.UTC().Truncate(time.Second))
		}
		if _, err := tx.ExecContext(ctx, string(stmt), args...); err != nil {
			return err
		}
		count++
		batch = roaring.New()
		return nil
	}
	for _, uid := range uids {
		batch.Add(uid)
		people++
		if batch.GetCardinality() == RoundBatch {
			if err := flush(); err != nil {
				return 0, 0, fmt.Errorf("campaign: record batch: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return 0, 0, fmt.Errorf("campaign: record batch: %w", err)
	}
	if rest > 0 {
		loc := r.zone(n.app)
		if _, err := tx.ExecContext(ctx, `UPDATE follow_up_rounds SET spread_until = ? WHERE `+roundWhere,
			spreadUntil(s, now, loc, rest, q.limit), n.corpID, n.msgID, round); err != nil {
			return 0, 0, fmt.Errorf("campaign: spread round: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("campaign: record round: %w", err)
	}
	return people, rest, nil
}

// sendBatches sends the round's batches still pending, in order, each
// marked sent after WeCom answered. stopped: the lease was lost or the
// round cancelled, after the current batch.
func (r *Rounds) sendBatches(ctx context.Context, n notice, round int) (stopped bool, err error) {
	type pending struct {
		batch int
		uids  *roaring.Bitmap
	}
	todo, err := sqlrows.List(ctx, r.DB, func(rows *sql.Rows, p *pending) error {
		var b []byte
		if err := rows.Scan(&p.batch, &b); err != nil {
			return err
		}
		p.uids = roaring.New()
		if err := p.uids.UnmarshalBinary(b); err != nil {
			return fmt.Errorf("batch %d: %w", p.batch, err)
		}
		return nil
	}, `SELECT batch, uids FROM follow_up_batches
		WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND state = 'pending' ORDER BY batch`, n.corpID, n.msgID, round)
	if err != nil {
		return false, fmt.Errorf("campaign: pending batches: %w", err)
	}
	for _, p := range todo {
		held, cancelled, err := r.renew(ctx, n.corpID, n.msgID, round)
		if err != nil {
			return true, err
		}
		if !held {
			return true, nil
		}
		if cancelled {
			return true, r.finish(ctx, n, round, "cancelled")
		}
		members, err := r.People.Active(ctx, n.corpID, p.uids.ToArray())
		if err != nil {
			return true, fmt.Errorf("campaign: members: %w", err)
		}
		users := make([]string, 0, len(members))
		byUser := make(map[string]uint32, len(members))
		for uid, m := range members {
			users = append(users, m.UserID)
			byUser[m.UserID] = uid
		}
		taskID := yidu.RoundTaskID(yidu.MsgID(n.msgID), round, p.batch)
		invalid, err := r.Sender.RemindBatch(ctx, n.msg, taskID, p.batch, users)
		if err != nil {
			// Unknown outcome: the batch stays pending; the next owner
			// resends it with the same task_id (WeCom's duplicate check).
			return true, fmt.Errorf("campaign: send batch %d of round %d: %w", p.batch, round, err)
		}
		if err := r.mark(ctx, n, round, p.batch, invalid, byUser); err != nil {
			return true, err
		}
	}
	return false, nil
}

// mark records a batch WeCom answered: the batch sent, each person's
// outcome.
func (r *Rounds) mark(ctx context.Context, n notice, round, batch int, invalid []string, byUser map[string]uint32) error {
	tx, err := r.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `UPDATE reminder_log SET outcome = 'sent'
		WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND batch = ?`, n.corpID, n.msgID, round, batch); err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	for _, u := range invalid {
		if uid, ok := byUser[u]; ok {
			if _, err := tx.ExecContext(ctx, `UPDATE reminder_log SET outcome = 'invalid'
				WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND uid = ?`, n.corpID, n.msgID, round, uid); err != nil {
				return fmt.Errorf("campaign: mark batch: %w", err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE follow_up_batches SET state = 'sent', sent_at = ?
		WHERE corp_id = ? AND msgid = ? AND round = ? AND kind = 'reminder' AND batch = ?`, r.Now(), n.corpID, n.msgID, round, batch); err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("campaign: mark batch: %w", err)
	}
	return nil
}
