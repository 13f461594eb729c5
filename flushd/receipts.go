package flushd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu/delta"
)

// receipt is an acknowledgement to queue for its member's receipt: the
// page event and its ledger entry's seq (0 without a ledger).
type receipt struct {
	p   pageRow
	seq uint64
}

// queueReceipts queues a WeCom receipt (ack_receipts, issue 48) for each
// acknowledgement in rs, in db (the transaction that recorded it, when
// there is one). A redelivered acknowledgement finds its row and queues
// nothing. The tracker's receipt loop sends them; whether the notice's app
// sends receipts is its decision.
func queueReceipts(ctx context.Context, db DB, corpID, msgID string, rs []receipt, now time.Time) error {
	if len(rs) == 0 {
		return nil
	}
	var q strings.Builder
	args := make([]any, 0, 7*len(rs))
	writeValues(&q, "INSERT IGNORE INTO ack_receipts (corp_id, msgid, uid, version, seq, acked_at, next_at) VALUES ", "(?,?,?,?,?,?,?)", len(rs))
	for _, r := range rs {
		args = append(args, corpID, msgID, r.p.uid, r.p.Version, r.seq, datetime(r.p.At), now.UTC())
	}
	if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
		return fmt.Errorf("flushd: receipts of %s/%s (%d): %w", corpID, msgID, len(rs), err)
	}
	return nil
}

// acks are the acknowledgements among pages, with no ledger seq.
func acks(pages []pageRow) []receipt {
	var out []receipt
	for _, p := range pages {
		if p.Source == delta.SourceAck {
			out = append(out, receipt{p: p})
		}
	}
	return out
}

// ClaimReceipts claims for claim (a replica's name and the time) until
// until at most limit due receipts, the earliest due first: queued, due
// by now, unclaimed or with a lapsed claim. tracker.Registry.SendReceipts
// reads the rows claimed and sends them; whether a notice's app sends
// receipts is its decision.
func ClaimReceipts(ctx context.Context, db DB, claim string, now, until time.Time, limit int) error {
	if _, err := db.ExecContext(ctx, `UPDATE ack_receipts SET owner = ?, lease_until = ?
WHERE state = 'queued' AND next_at <= ? AND (lease_until IS NULL OR lease_until < ?) ORDER BY next_at LIMIT ?`,
		claim, until, now, now, limit); err != nil {
		return fmt.Errorf("flushd: claim receipts: %w", err)
	}
	return nil
}

// ReceiptKey names one receipt: a member's acknowledgement of a version.
type ReceiptKey struct {
	CorpID, MsgID string
	UID, Version  uint32
}

// SetReceipt releases receipt k's claim and records what sending it came
// to: set is the caller's constant list of ack_receipts assignments
// (state, attempts, next_at, sent_at, errcode), args their values.
func SetReceipt(ctx context.Context, db DB, k ReceiptKey, set string, args ...any) error {
	const key = "corp_id = ? AND msgid = ? AND uid = ? AND version = ?"
	if _, err := db.ExecContext(ctx, "UPDATE ack_receipts SET owner = NULL, lease_until = NULL, "+set+" WHERE "+key,
		append(args, k.CorpID, k.MsgID, k.UID, k.Version)...); err != nil {
		return fmt.Errorf("flushd: receipt of %s uid %d: %w", k.MsgID, k.UID, err)
	}
	return nil
}
