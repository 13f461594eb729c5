package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/ledger"
)

// A notice's approval (issue 41) is columns of its campaigns row
// (approval, approval_hash, approval_now) and its trail, one row of
// notice_approvals a step, written with its audit row in one
// transaction. Package campaign decides each step; these methods write
// it with the conditional UPDATE that makes it happen once.

// ApprovalStep is one row of a notice's approval trail (notice_approvals).
type ApprovalStep struct {
	Hash   string    `json:"version_hash"`
	Step   string    `json:"step"` // requested, approved, rejected, held
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Steps of the approval trail.
const (
	StepRequested = "requested"
	StepApproved  = "approved"
	StepRejected  = "rejected"
	StepHeld      = "held"
	// StepNudged and StepWithdrawn are the steps the author adds (issue 49).
	StepNudged    = "nudged"
	StepWithdrawn = "withdrawn"
)

// System is the audit actor of what yidu does by itself (the Runner's
// hold, a request at a notice's time, the messages it sends).
const System = "yidu"

// StepEvent is the audit row of an approval step of n by p at at (nil
// p: yidu itself). Detail carries the version hash ("version=…"), so
// each row says who, when and which version.
func StepEvent(p *access.Principal, n yidu.Notice, act yidu.Action, at time.Time, detail string) audit.Event {
	e := audit.Event{At: at, Actor: System, ActorKind: "system", Action: act, CorpID: n.App.CorpID, App: n.App.Name,
		MsgID: n.MsgID, Outcome: "ok", Detail: detail}
	if p != nil && p.Name != System {
		// access names the actor, as on every row a principal's act leaves.
		pe := p.Event(act, n.App.CorpID, n.App.Name, n.MsgID)
		e.Actor, e.ActorKind, e.Role = pe.Actor, pe.ActorKind, pe.Role
	}
	return e
}

// insertStep writes step st of n's approval trail and its audit row e
// in tx: the step and its row are written together, once (the caller's
// conditional UPDATE in the same transaction decides that it happens).
// With an evidence log, the step is an entry of it (ledger.Approval: the
// row as stored, its version hash included), appended last.
func (s *Store) insertStep(ctx context.Context, tx *sql.Tx, n yidu.Notice, st ApprovalStep, e audit.Event) error {
	actor, reason, at := yidu.Truncate(st.Actor, 128), yidu.Truncate(st.Reason, 500), st.At.UTC().Truncate(time.Millisecond)
	_, err := tx.ExecContext(ctx, `INSERT INTO notice_approvals (corp_id, msgid, version_hash, step, actor, at, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, n.App.CorpID, n.MsgID, st.Hash, st.Step, actor, at, reason)
	if err != nil {
		return err
	}
	if err := audit.Insert(ctx, tx, e); err != nil {
		return err
	}
	f := ledger.Approval{MsgID: n.MsgID, Step: string(st.Step), VersionHash: st.Hash, Actor: actor, At: at, Reason: reason}.Fact()
	if err := appendEvidence(ctx, s.evidence, tx, n.App.CorpID, []ledger.Fact{f}); err != nil {
		return fmt.Errorf("evidence log: %w", err)
	}
	return nil
}

// Audit writes audit row e on its own (a message yidu sent, a version
// published); a failed write is logged and returned.
func (s *Store) Audit(ctx context.Context, e audit.Event) error {
	err := audit.Insert(context.WithoutCancel(ctx), s.db, e)
	if err != nil {
		s.log.ErrorContext(ctx, "audit write failed", "action", string(e.Action), "msgid", e.MsgID, "err", err)
	}
	return err
}

// ClearApproval takes the approval off msgID: it needs none now.
func (s *Store) ClearApproval(ctx context.Context, msgID string) error {
	_, err := execRetry(ctx, s.db, `UPDATE campaigns SET approval = '', approval_hash = '', approval_now = 0 WHERE msgid = ?`, msgID)
	if err != nil {
		return fmt.Errorf("campaign: clear approval of %s: %w", msgID, err)
	}
	return nil
}

// SendOnceApproved marks msgID's pending version hash to be sent as
// soon as it is approved (the author's 立即发送).
func (s *Store) SendOnceApproved(ctx context.Context, msgID, hash string) error {
	_, err := execRetry(ctx, s.db, `UPDATE campaigns SET approval_now = 1 WHERE msgid = ? AND approval_hash = ?`, msgID, hash)
	if err != nil {
		return fmt.Errorf("campaign: ask to send %s once approved: %w", msgID, err)
	}
	return nil
}

// AskApproval makes version st.Hash of n pending (approval_now: now) and
// writes the request step st with its audit row e, unless that version
// is pending already. asks is how many requests n's trail holds now; 0
// when another request asked for this version first.
func (s *Store) AskApproval(ctx context.Context, n yidu.Notice, now bool, st ApprovalStep, e audit.Event) (asks int64, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET approval = 'pending', approval_hash = ?, approval_now = ?, updated_at = ?
			WHERE msgid = ? AND NOT (approval = 'pending' AND approval_hash = ?)`, st.Hash, now, st.At, n.MsgID, st.Hash)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			return nil // another request asked for this version first
		}
		if err := s.insertStep(ctx, tx, n, st, e); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notice_approvals WHERE corp_id = ? AND msgid = ? AND step = ?`,
			n.App.CorpID, n.MsgID, StepRequested).Scan(&asks)
	})
	if err != nil {
		return 0, fmt.Errorf("campaign: ask approval of %s: %w", n.MsgID, err)
	}
	return asks, nil
}

// Decide moves n's pending version st.Hash to approval to, writing step
// st with its audit row e; sendNow makes it due now in the same UPDATE
// (never held: reasonSendNow, claimed by one Runner). again is true when
// the version was no longer pending (decided already, on any replica).
func (s *Store) Decide(ctx context.Context, n yidu.Notice, to yidu.ApprovalState, sendNow bool, st ApprovalStep, e audit.Event) (again bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		set := "approval = ?, updated_at = ?"
		args := []any{string(to), st.At}
		if sendNow {
			// The author asked to send it now: due now, never held
			// (reasonSendNow), claimed by one Runner.
			set += ", state = 'scheduled', state_reason = ?, send_at = IF(send_at IS NULL OR send_at > ?, ?, send_at)"
			args = append(args, reasonSendNow, st.At, st.At)
		}
		args = append(args, n.MsgID, st.Hash)
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET `+set+` WHERE msgid = ? AND approval = 'pending' AND approval_hash = ?`, args...)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			again = true
			return nil
		}
		return s.insertStep(ctx, tx, n, st, e)
	})
	if err != nil {
		return false, fmt.Errorf("campaign: %s %s: %w", st.Step, n.MsgID, err)
	}
	return again, nil
}

// Nudge writes the nudge step st of n's pending version with its audit
// row e, after tooSoon (given the last request or nudge of that version)
// let it: its error is returned as it is. nudges is how many nudges n's
// trail holds now.
func (s *Store) Nudge(ctx context.Context, n yidu.Notice, st ApprovalStep, e audit.Event, tooSoon func(last time.Time) error) (nudges int64, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var last sql.NullTime
		if err := tx.QueryRowContext(ctx, `SELECT MAX(at) FROM notice_approvals WHERE corp_id = ? AND msgid = ? AND version_hash = ?
			AND step IN (?, ?) FOR UPDATE`, n.App.CorpID, n.MsgID, n.ApprovalHash, StepRequested, StepNudged).Scan(&last); err != nil {
			return err
		}
		if last.Valid {
			if err := tooSoon(last.Time); err != nil {
				return err
			}
		}
		if err := s.insertStep(ctx, tx, n, st, e); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notice_approvals WHERE corp_id = ? AND msgid = ? AND step = ?`,
			n.App.CorpID, n.MsgID, StepNudged).Scan(&nudges)
	})
	return nudges, err
}

// Withdraw makes n, waiting for approval of its version, a draft with no
// approval asked, writing step st with its audit row e; changed is false
// when n changed meanwhile (nothing written).
func (s *Store) Withdraw(ctx context.Context, n yidu.Notice, st ApprovalStep, e audit.Event) (changed bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE campaigns SET approval = '', approval_hash = '', approval_now = 0,
			state = ?, updated_at = ? WHERE msgid = ? AND approval = 'pending' AND approval_hash = ? AND state IN (?, ?, ?)`,
			yidu.StateDraft, st.At, n.MsgID, n.ApprovalHash, yidu.StateDraft, yidu.StateScheduled, yidu.StateHeld)
		if err != nil {
			return err
		}
		if c, _ := res.RowsAffected(); c == 0 {
			return nil
		}
		changed = true
		return s.insertStep(ctx, tx, n, st, e)
	})
	return changed, err
}

// RequestedBy is who last asked approval of version hash of n and when;
// found is false if nobody did.
func (s *Store) RequestedBy(ctx context.Context, n yidu.Notice, hash string) (actor string, at time.Time, found bool, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT actor, at FROM notice_approvals WHERE corp_id = ? AND msgid = ? AND version_hash = ? AND step = ?
		ORDER BY id DESC LIMIT 1`, n.App.CorpID, n.MsgID, hash, StepRequested).Scan(&actor, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", time.Time{}, false, nil
	}
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("campaign: who asked approval of %s: %w", n.MsgID, err)
	}
	return actor, at, true, nil
}

// ApprovalTrail returns every step of n's approvals, oldest first.
func (s *Store) ApprovalTrail(ctx context.Context, n yidu.Notice) ([]ApprovalStep, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version_hash, step, actor, at, reason FROM notice_approvals
		WHERE corp_id = ? AND msgid = ? ORDER BY id`, n.App.CorpID, n.MsgID)
	if err != nil {
		return nil, fmt.Errorf("campaign: approval trail: %w", err)
	}
	defer rows.Close()
	out := []ApprovalStep{}
	for rows.Next() {
		var st ApprovalStep
		if err := rows.Scan(&st.Hash, &st.Step, &st.Actor, &st.At, &st.Reason); err != nil {
			return nil, fmt.Errorf("campaign: approval trail: %w", err)
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// KeepRevision keeps n's title and content (a material revision waiting
// for approval) on its row while it is sent.
func (s *Store) KeepRevision(ctx context.Context, n yidu.Notice, at time.Time) error {
	body, err := contentColumn(n.Content)
	if err != nil {
		return err
	}
	if _, err := execRetry(ctx, s.db, `UPDATE campaigns SET title = ?, content = ?, updated_at = ? WHERE msgid = ? AND corp_id = ? AND state = 'sent'`,
		n.Title, body, at, n.MsgID, n.App.CorpID); err != nil {
		return fmt.Errorf("campaign: keep the revision of %s: %w", n.MsgID, err)
	}
	return nil
}
