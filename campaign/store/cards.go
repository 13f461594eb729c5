package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// An approval card WeCom did not take (issue 46) is a row of
// approval_card_retries, claimed with Lease for each try so exactly one
// replica sends it.

// Card is one approval card to send again.
type Card struct {
	CorpID, MsgID, TaskID string
}

const cardWhere = "corp_id = ? AND msgid = ? AND task_id = ?"

// CardLease is the claim of approval_card_retries rows by owner.
func CardLease(owner string) Lease {
	return Lease{Table: "approval_card_retries", Owner: owner, TTL: DefaultLeaseTTL}
}

// CardFailed records that approval card c (version hash, to recipients
// people) did not reach WeCom: it is due again at next.
func (s *Store) CardFailed(ctx context.Context, c Card, hash string, recipients uint64, next time.Time, sendErr error) error {
	_, err := execRetry(context.WithoutCancel(ctx), s.db, `INSERT IGNORE INTO approval_card_retries
		(corp_id, msgid, task_id, version_hash, recipients, state, next_at, attempts, last_error) VALUES (?, ?, ?, ?, ?, 'pending', ?, 1, ?)`,
		c.CorpID, c.MsgID, c.TaskID, hash, recipients, next, yidu.Truncate(sendErr.Error(), 255))
	return err
}

// DueCards are the approval cards due for a retry at now (or whose
// claim ran out), at most 50, the longest due first.
func (s *Store) DueCards(ctx context.Context, now time.Time) ([]Card, error) {
	due, err := sqlrows.List(ctx, s.db, func(rows *sql.Rows, c *Card) error { return rows.Scan(&c.CorpID, &c.MsgID, &c.TaskID) },
		`SELECT corp_id, msgid, task_id FROM approval_card_retries
		WHERE (state = 'pending' AND next_at <= ?) OR (state = 'sending' AND lease_until <= ?) ORDER BY next_at LIMIT 50`, now, now)
	if err != nil {
		return nil, fmt.Errorf("campaign: due approval cards: %w", err)
	}
	return due, nil
}

// ClaimCard claims card c for l.Owner at now; ok false: another replica
// holds it or it is not pending. Claimed, it answers the version hash,
// recipients and how many tries this one is.
func (s *Store) ClaimCard(ctx context.Context, l Lease, now time.Time, c Card) (hash string, recipients uint64, attempts int, ok bool, err error) {
	// Due again only at its next try: a replica that listed it due before
	// another sent it and put it back must not send it again at once.
	ok, err = l.Claim(ctx, s.db, now, []yidu.NoticeState{"pending"}, "", cardWhere+" AND next_at <= ?", c.CorpID, c.MsgID, c.TaskID, now)
	if err != nil || !ok {
		return "", 0, 0, false, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT version_hash, recipients, attempts FROM approval_card_retries WHERE `+cardWhere,
		c.CorpID, c.MsgID, c.TaskID).Scan(&hash, &recipients, &attempts); err != nil {
		return "", 0, 0, false, fmt.Errorf("campaign: approval card %s: %w", c.TaskID, err)
	}
	return hash, recipients, attempts, true, nil
}

// FinishCard ends l's claim of card c in state with set's assignments
// (args first).
func (s *Store) FinishCard(ctx context.Context, l Lease, c Card, state, set string, args ...any) error {
	_, err := l.Finish(context.WithoutCancel(ctx), s.db, yidu.NoticeState(state), set, cardWhere, append(args, c.CorpID, c.MsgID, c.TaskID)...)
	return err
}
