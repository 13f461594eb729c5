package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// What the Runner (campaign/loops) reads and writes of the campaigns
// table: the due notices, their holds, and the claim of each send.

// SendLease is the claim of campaigns rows by owner for ttl.
func SendLease(owner string, ttl time.Duration) Lease {
	return Lease{Table: "campaigns", Owner: owner, TTL: ttl}
}

// Due are at most limit notices due at now (scheduled) or whose send's
// lease ran out, by send_at; first are those of them due for their
// first send.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) (due, first []string, err error) {
	rows, err := s.db.QueryContext(ctx, `SELECT msgid, state FROM campaigns
		WHERE (state = 'scheduled' AND send_at <= ?) OR (state = 'sending' AND lease_until <= ?)
		ORDER BY send_at LIMIT ?`, now, now, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: due notices: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			return nil, nil, fmt.Errorf("campaign: due notices: %w", err)
		}
		due = append(due, id)
		if state == string(yidu.StateScheduled) {
			first = append(first, id)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("campaign: due notices: %w", err)
	}
	return due, first, nil
}

// Late are at most limit scheduled notices due before before that no
// person asked to send now.
func (s *Store) Late(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return s.ids(ctx, "late notices", `SELECT msgid FROM campaigns
		WHERE state = 'scheduled' AND send_at < ? AND state_reason <> ? LIMIT ?`, before, reasonSendNow, limit)
}

// Unapproved are at most limit scheduled notices due at now whose
// approval is pending or rejected.
func (s *Store) Unapproved(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return s.ids(ctx, "unapproved due notices", `SELECT msgid FROM campaigns
		WHERE state = 'scheduled' AND send_at <= ? AND approval IN ('pending', 'rejected') LIMIT ?`, now, limit)
}

func (s *Store) ids(ctx context.Context, what, q string, args ...any) ([]string, error) {
	ids, err := sqlrows.List(ctx, s.db, func(rows *sql.Rows, id *string) error { return rows.Scan(id) }, q, args...)
	if err != nil {
		return nil, fmt.Errorf("campaign: %s: %w", what, err)
	}
	return ids, nil
}

// Hold is which scheduled notice a hold moves to held.
type Hold int

// Holds.
const (
	// HoldLate: still scheduled, due before the hold's time, and no
	// person asked to send it now.
	HoldLate Hold = iota
	// HoldUnapproved: still scheduled and its approval pending or rejected.
	HoldUnapproved
	// HoldScheduled: still scheduled.
	HoldScheduled
)

// Hold moves n to held with reason at at when it is still as h says
// (before: HoldLate's bound), writing audit row e, and step st of its
// approval trail unless nil, in the same transaction. held is false when
// it was claimed, edited or held by another replica meanwhile.
func (s *Store) Hold(ctx context.Context, n yidu.Notice, h Hold, before time.Time, reason string, at time.Time, st *ApprovalStep, e audit.Event) (held bool, err error) {
	where, args := "msgid = ? AND state = 'scheduled'", []any{reason, at, n.MsgID}
	switch h {
	case HoldLate:
		where += " AND send_at < ? AND state_reason <> ?"
		args = append(args, before, reasonSendNow)
	case HoldUnapproved:
		where += " AND approval IN ('pending', 'rejected')"
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET state = 'held', state_reason = ?, updated_at = ? WHERE `+where, args...)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			return nil // claimed, edited or held by another replica meanwhile
		}
		held = true
		if st != nil {
			return s.insertStep(ctx, tx, n, *st, e)
		}
		return audit.Insert(ctx, tx, e)
	})
	if err == nil && held {
		s.met.transitions.WithLabelValues(string(yidu.StateHeld)).Inc()
	}
	return held, err
}

// ClaimSend claims msgID for l: from scheduled (a first send) or from
// sending with an expired lease (a resume). Only a notice that needs no
// approval, or is approved, is claimed (issue 41). The first claim sets
// started_at and sent_late_by; MySQL evaluates the assignments left to
// right, so sent_late_by reads started_at before it is set.
func (s *Store) ClaimSend(ctx context.Context, l Lease, now time.Time, msgID string) (bool, error) {
	ok, err := l.Claim(ctx, s.db, now, []yidu.NoticeState{yidu.StateScheduled},
		`sent_late_by = IF(started_at IS NULL, GREATEST(0, TIMESTAMPDIFF(SECOND, send_at, ?)), sent_late_by),
		started_at = COALESCE(started_at, ?), updated_at = ?`,
		"msgid = ? AND approval IN ('', 'approved')", now, now, now, msgID)
	if err != nil {
		return false, err
	}
	if !ok {
		s.met.claims.WithLabelValues("lost").Inc()
	}
	return ok, nil
}

// Sending counts the send of claimed notice n (won, or resumed) and its
// lateness.
func (s *Store) Sending(n yidu.Notice) {
	if n.Attempts > 1 {
		s.met.claims.WithLabelValues("resumed").Inc()
		return
	}
	s.met.claims.WithLabelValues("won").Inc()
	s.met.lateness.Observe(n.SentLateBy.Seconds())
}

// RenewSend renews l's claim of msgID; false: it was lost.
func (s *Store) RenewSend(ctx context.Context, l Lease, msgID string) (bool, error) {
	return l.Renew(ctx, s.db, s.now().UTC(), "msgid = ?", msgID)
}

// ReleaseSend lets any replica claim msgID again from until.
func (s *Store) ReleaseSend(ctx context.Context, l Lease, until time.Time, msgID string) error {
	return l.Release(context.WithoutCancel(ctx), s.db, until, "msgid = ?", msgID)
}

// FinishSend ends l's claim of msgID in state with reason; false: the
// claim was lost first.
func (s *Store) FinishSend(ctx context.Context, l Lease, msgID string, state yidu.NoticeState, reason string) (bool, error) {
	now := s.now().UTC()
	ok, err := l.Finish(context.WithoutCancel(ctx), s.db, state, "state_reason = ?, finished_at = ?, updated_at = ?",
		"msgid = ?", reason, now, now, msgID)
	if err == nil && ok {
		s.met.transitions.WithLabelValues(string(state)).Inc()
	}
	return ok, err
}
