package loops

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
)

// SetPolicy stores m's follow-up policy after checking it. A recalled
// notice takes none. The error wraps yidu.ErrInvalid and names the field.
func (r *Rounds) SetPolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, by string) error {
	n, err := r.notice(ctx, corpID, msgID)
	if err != nil {
		return err
	}
	if n.recalled {
		return yidu.Fieldf("follow_up", "follow_up: the notice was recalled")
	}
	return r.StorePolicy(ctx, corpID, msgID, p, n.sentAt, by)
}

// CheckPolicy checks p for a notice sent at sendAt, writing nothing: the
// dashboard calls it before it sends or stores the notice, so a bad
// policy leaves nothing behind. The error wraps yidu.ErrInvalid.
func (r *Rounds) CheckPolicy(p yidu.Policy, sendAt time.Time) error {
	return p.Validate(sendAt, r.MinGap)
}

// StorePolicy stores the policy of a notice sent (or to be sent) at
// sendAt, whether or not it is registered yet: a scheduled notice's or a
// draft's policy waits keyed by its msgid, and plan starts it once the
// Runner has registered the notice (plan joins messages).
func (r *Rounds) StorePolicy(ctx context.Context, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error {
	return r.storePolicy(ctx, r.DB, corpID, msgID, p, sendAt, by)
}

// execer is a *sql.DB or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// StorePolicyIn is StorePolicy in tx (a compose's transaction, with its
// notice's row).
func (r *Rounds) StorePolicyIn(ctx context.Context, tx *sql.Tx, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error {
	return r.storePolicy(ctx, tx, corpID, msgID, p, sendAt, by)
}

// storePolicy is StorePolicy through ex.
func (r *Rounds) storePolicy(ctx context.Context, ex execer, corpID, msgID string, p yidu.Policy, sendAt time.Time, by string) error {
	if err := p.Validate(sendAt, r.MinGap); err != nil {
		return err
	}
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("campaign: policy: %w", err)
	}
	_, err = ex.ExecContext(ctx, `INSERT INTO follow_ups (corp_id, msgid, policy, updated_by, updated_at) VALUES (?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE policy = VALUES(policy), updated_by = VALUES(updated_by), updated_at = VALUES(updated_at), stopped_reason = NULL`,
		corpID, msgID, string(b), by, r.Now())
	if err != nil {
		return fmt.Errorf("campaign: store policy: %w", err)
	}
	return nil
}

// finish ends the round in state, with sent_to the people it reached.
func (r *Rounds) finish(ctx context.Context, n notice, round int, state string) error {
	_, err := r.lease().Finish(ctx, r.DB, yidu.NoticeState(state), `finished_at = ?,
			sent_to = (SELECT COUNT(*) FROM reminder_log l WHERE l.corp_id = ? AND l.msgid = ? AND l.round = ? AND l.kind = 'reminder' AND l.outcome = 'sent')`,
		roundWhere, r.Now(), n.corpID, n.msgID, round, n.corpID, n.msgID, round)
	return err
}

// CancelRound stops the notice's current round: a pending one does not
// start; one sending stops after its current batch.
func (r *Rounds) CancelRound(ctx context.Context, corpID, msgID string) (bool, error) {
	res, err := r.DB.ExecContext(ctx, `UPDATE follow_up_rounds SET cancelled_at = ?,
			state = CASE WHEN state = 'pending' THEN 'cancelled' ELSE state END
		WHERE corp_id = ? AND msgid = ? AND state IN ('pending', 'sending') AND cancelled_at IS NULL`, r.Now(), corpID, msgID)
	if err != nil {
		return false, fmt.Errorf("campaign: cancel round: %w", err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// RoundReport is one round done, as the message JSON's follow_up.rounds
// shows it (docs/api.md).
type RoundReport struct {
	Round int `json:"round"`
	// At is when the round started sending.
	At            time.Time `json:"at"`
	State         string    `json:"state"`
	SentTo        int       `json:"sent_to"`
	ReadWithin1h  int       `json:"read_within_1h"`
	ReadWithin24h int       `json:"read_within_24h"`
	Escalated     bool      `json:"escalated"`
	// SpreadUntil is when a round larger than the app's remaining daily
	// quota will have reached everyone (null: within its day).
	SpreadUntil *time.Time `json:"spread_until"`
}

// FollowUp is a notice's follow-up as the message JSON's "follow_up"
// carries it.
type FollowUp struct {
	Policy    yidu.Policy   `json:"policy"`
	NextRound int           `json:"next_round,omitempty"`
	NextAt    *time.Time    `json:"next_at"`
	Stopped   string        `json:"stopped,omitempty"`
	Rounds    []RoundReport `json:"rounds"`
}

// FollowUpOf returns the notice's follow-up; ok is false for a notice
// without a policy. The read counts are reminder_effect's (migration
// 00012), so the page and an analyst's query agree.
func (r *Rounds) FollowUpOf(ctx context.Context, corpID, msgID string) (FollowUp, bool, error) {
	fu := FollowUp{Rounds: []RoundReport{}}
	var policy string
	var stopped sql.NullString
	err := r.DB.QueryRowContext(ctx, `SELECT policy, stopped_reason FROM follow_ups WHERE corp_id = ? AND msgid = ?`,
		corpID, msgID).Scan(&policy, &stopped)
	if errors.Is(err, sql.ErrNoRows) {
		return fu, false, nil
	}
	if err != nil {
		return fu, false, fmt.Errorf("campaign: follow-up: %w", err)
	}
	if err := json.Unmarshal([]byte(policy), &fu.Policy); err != nil {
		return fu, false, fmt.Errorf("campaign: policy of %s: %w", msgID, err)
	}
	fu.Stopped = stopped.String
	rows, err := r.DB.QueryContext(ctx, `SELECT x.round, COALESCE(x.started_at, x.due_at), x.due_at, x.state, x.sent_to, x.escalated, x.spread_until,
			COALESCE(e.read_within_1h, 0), COALESCE(e.read_within_24h, 0)
		FROM follow_up_rounds x
		LEFT JOIN reminder_effect e ON e.corp_id = x.corp_id AND e.msgid = x.msgid AND e.round = x.round
		WHERE x.corp_id = ? AND x.msgid = ? ORDER BY x.round`, corpID, msgID)
	if err != nil {
		return fu, false, fmt.Errorf("campaign: rounds: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rr RoundReport
		var spread sql.NullTime
		var due time.Time
		if err := rows.Scan(&rr.Round, &rr.At, &due, &rr.State, &rr.SentTo, &rr.Escalated, &spread, &rr.ReadWithin1h, &rr.ReadWithin24h); err != nil {
			return fu, false, fmt.Errorf("campaign: rounds: %w", err)
		}
		if spread.Valid {
			rr.SpreadUntil = &spread.Time
			if rr.State == "pending" {
				// A spread round waiting for its next part is the next
				// thing to send.
				fu.NextRound, fu.NextAt = rr.Round, &due
			}
		}
		fu.Rounds = append(fu.Rounds, rr)
	}
	if err := rows.Err(); err != nil {
		return fu, false, fmt.Errorf("campaign: rounds: %w", err)
	}
	if fu.Stopped != "" {
		return fu, true, nil
	}
	n, err := r.notice(ctx, corpID, msgID)
	if errors.Is(err, yidu.ErrInvalid) {
		return fu, true, nil // not registered yet (scheduled, draft): no round is planned
	}
	if err != nil {
		return fu, false, err
	}
	s, err := fu.Policy.Compile(n.sentAt, r.MinGap)
	if err != nil {
		return fu, true, nil // a policy the minimum now refuses: shown, not scheduled
	}
	if times := s.Times(n.sentAt, r.zone(n.app)); fu.NextAt == nil && len(fu.Rounds) < len(times) {
		fu.NextRound = len(fu.Rounds) + 1
		at := times[len(fu.Rounds)]
		fu.NextAt = &at
	}
	return fu, true, nil
}
