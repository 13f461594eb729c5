package ledger

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu/internal/sqlrows"
)

// Backoff of a day checkpoint's TSA token: a failed try waits
// stampMinBackoff, each failure after doubles it, up to stampMaxBackoff.
// A try's claim lasts at least stampMinBackoff, longer than the TSA
// client's timeout, so no replica asks while another still waits.
const (
	stampMinBackoff = time.Minute
	stampMaxBackoff = time.Hour
	// stampPerTurn bounds the tokens StampDue asks for in one call: a
	// backlog (a TSA down for days, or configured late) drains over turns.
	stampPerTurn = 8
)

func stampBackoff(tries int) time.Duration {
	d := stampMinBackoff << min(max(tries-1, 0), 10)
	return min(d, stampMaxBackoff)
}

// ErrStampClaimed: another replica is asking the TSA for this
// checkpoint's token (or its last try's backoff has not ended).
var ErrStampClaimed = errors.New("ledger: the checkpoint's timestamp is claimed or backed off")

// stamp asks the TSA for the token of c, a day's checkpoint, and stores
// it. MySQL decides who asks: the try is claimed by moving tsa_due past
// its backoff, with a conditional UPDATE that only one replica's
// matches; a failed try stays owed and is asked again by StampDue once
// the backoff ends. A reply is stored only over no token (a replica's
// late answer never replaces one).
func (l *Ledger) stamp(ctx context.Context, c Checkpoint) ([]byte, error) {
	now := l.now().UTC().Truncate(time.Millisecond)
	var tries int
	if err := l.db.QueryRowContext(ctx, "SELECT tsa_tries FROM ledger_checkpoints WHERE corp_id = ? AND size = ?",
		c.Corp, c.Size).Scan(&tries); err != nil {
		return nil, fmt.Errorf("ledger: timestamp of %s checkpoint %d: %w", c.Corp, c.Size, err)
	}
	res, err := l.db.ExecContext(ctx, "UPDATE ledger_checkpoints SET tsa_due = ?, tsa_tries = tsa_tries + 1"+
		" WHERE corp_id = ? AND size = ? AND tsa_token IS NULL AND tsa_due <= ? AND tsa_tries = ?",
		now.Add(stampBackoff(tries+1)), c.Corp, c.Size, now, tries)
	if err != nil {
		return nil, fmt.Errorf("ledger: timestamp of %s checkpoint %d: claim: %w", c.Corp, c.Size, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return nil, fmt.Errorf("ledger: timestamp of %s checkpoint %d: %w", c.Corp, c.Size, ErrStampClaimed)
	}
	sum := sha256.Sum256([]byte(c.Note))
	tok, err := l.stamper.Stamp(ctx, sum[:])
	if err != nil {
		return nil, fmt.Errorf("ledger: timestamp of %s checkpoint %d (try %d): %w", c.Corp, c.Size, tries+1, err)
	}
	if _, err := l.db.ExecContext(ctx, "UPDATE ledger_checkpoints SET tsa_token = ?, tsa_due = NULL WHERE corp_id = ? AND size = ? AND tsa_token IS NULL",
		tok, c.Corp, c.Size); err != nil {
		return nil, fmt.Errorf("ledger: timestamp of %s checkpoint %d: store: %w", c.Corp, c.Size, err)
	}
	l.log.Info("ledger day checkpoint timestamped", "corp", c.Corp, "day", c.Day, "size", c.Size, "try", tries+1)
	return tok, nil
}

// StampDue asks the TSA for the token of every day checkpoint that has
// none and whose backoff ended (a TSA down, slow or answering badly when
// the day closed), oldest first, at most stampPerTurn of them, and
// returns those it stamped. Each failure is logged and joined into the
// error (flushd's checkpoint loop counts it, yidu_loop_item_failures_total
// {loop="checkpoint"}); one checkpoint's failure does not hold the others
// back. Without a Stamper it does nothing. Run it every minute: flushd
// does, after SealDue.
func (l *Ledger) StampDue(ctx context.Context) ([]Checkpoint, error) {
	if l.stamper == nil {
		return nil, nil
	}
	due, err := sqlrows.List(ctx, l.db, func(rows *sql.Rows, c *Checkpoint) (err error) {
		*c, err = scanCheckpoint(rows)
		return err
	}, "SELECT "+checkpointColumns+" FROM ledger_checkpoints WHERE tsa_due <= ? AND tsa_token IS NULL AND day IS NOT NULL"+
		" ORDER BY tsa_due, corp_id, size LIMIT ?", l.now().UTC(), stampPerTurn)
	if err != nil {
		return nil, fmt.Errorf("ledger: checkpoints to timestamp: %w", err)
	}
	var out []Checkpoint
	var errs []error
	for _, c := range due {
		tok, err := l.stamp(ctx, c)
		switch {
		case errors.Is(err, ErrStampClaimed):
			// Another replica took it this turn.
		case err != nil:
			l.log.Warn("ledger: timestamp of a day's checkpoint failed; asked again after a backoff",
				"corp", c.Corp, "day", c.Day, "size", c.Size, "err", err)
			errs = append(errs, err)
		default:
			c.Timestamp = tok
			out = append(out, c)
		}
	}
	return out, errors.Join(errs...)
}
