package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// Seal closes corp's day, which must have ended (in Zone, by the
// ledger's clock): it moves corp's head past the day, so no entry can
// join it afterwards even from a replica whose clock is behind, then
// records the checkpoint whose last entry is the day's last (the day's
// checkpoint, signed like every other), asks the TSA for a timestamp of
// it when the ledger has a Stamper (a failed try is asked again by
// StampDue), and records it as an audit row. A day
// closed before is returned as it was; a day without entries is
// ErrNotFound.
func (l *Ledger) Seal(ctx context.Context, corp, day string) (Checkpoint, error) {
	d, err := time.ParseInLocation(time.DateOnly, day, Zone)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: day %q: %w", day, ErrInvalid)
	}
	now := l.now()
	if day >= Day(now) {
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, ErrNotEnded)
	}
	if c, ok, err := l.dayCheckpoint(ctx, corp, day); err != nil || ok {
		return c, err
	}
	next := d.AddDate(0, 0, 1).Format(time.DateOnly)
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
	}
	defer tx.Rollback()
	var head string
	err = tx.QueryRowContext(ctx, "SELECT CAST(day AS CHAR) FROM ledger_heads WHERE corp_id = ? FOR UPDATE", corp).Scan(&head)
	switch {
	case err == sql.ErrNoRows:
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: no ledger: %w", day, corp, ErrNotFound)
	case err != nil:
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: lock head: %w", day, corp, err)
	case head <= day:
		if _, err := tx.ExecContext(ctx, "UPDATE ledger_heads SET day = ?, day_size = 0 WHERE corp_id = ?", next, corp); err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: move head: %w", day, corp, err)
		}
	}
	// Days only grow with seq: the day's last entry is the last of every
	// day up to it.
	var size uint64
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(first_seq + count - 1), 0) FROM ledger_blocks WHERE corp_id = ? AND day <= ?",
		corp, day).Scan(&size); err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
	}
	if err := tx.Commit(); err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: commit: %w", day, corp, err)
	}
	if size == 0 {
		return Checkpoint{}, fmt.Errorf("ledger: seal %s of %s: no entries: %w", day, corp, ErrNotFound)
	}
	c, err := l.checkpointAt(ctx, corp, size, day)
	if err != nil {
		return Checkpoint{}, err
	}
	if l.stamper != nil && c.Timestamp == nil {
		tok, err := l.stamp(ctx, c)
		switch {
		case errors.Is(err, ErrStampClaimed):
		case err != nil:
			// The checkpoint stands without its token, which it still
			// owes: StampDue asks again once the backoff ends.
			l.log.Warn("ledger: timestamp of the day's checkpoint failed; asked again after a backoff",
				"corp", corp, "day", day, "err", err)
		default:
			c.Timestamp = tok
		}
	}
	l.log.Info("ledger day closed", "corp", corp, "day", day, "size", c.Size, "root", c.Root.String())
	if l.audit != nil {
		if err := l.audit.Record(ctx, audit.Event{At: now, Actor: "yidu", ActorKind: "system", Action: yidu.ActionLedgerRoot,
			CorpID: corp, People: int64(c.Size), Outcome: "ok",
			Detail: fmt.Sprintf("day=%s size=%d root=%s origin=%s", day, c.Size, c.Root, c.Origin)}); err != nil {
			return c, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
		}
	}
	return c, nil
}

// dayCheckpoint is the checkpoint closing corp's day, if there is one (a
// day sealed before the log was one tree, in ledger_roots, counts as
// closed: its checkpoint is the zero one).
func (l *Ledger) dayCheckpoint(ctx context.Context, corp, day string) (Checkpoint, bool, error) {
	c, err := scanCheckpoint(l.db.QueryRowContext(ctx, "SELECT "+checkpointColumns+
		" FROM ledger_checkpoints WHERE corp_id = ? AND day = ?", corp, day))
	switch {
	case err == nil:
		return c, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return Checkpoint{}, false, fmt.Errorf("ledger: checkpoint of %s %s: %w", corp, day, err)
	}
	s, err := l.sealed(ctx, corp, day)
	if err != nil || s == nil {
		return Checkpoint{}, false, err
	}
	return Checkpoint{Corp: corp, Day: day}, true, nil
}

// SealDue closes every day of every corp that has entries, has ended and
// is not closed yet, oldest first; it returns the checkpoints it
// recorded. Run it after midnight (Asia/Shanghai): flushd does, with the
// minute's checkpoints.
func (l *Ledger) SealDue(ctx context.Context) ([]Checkpoint, error) {
	type cd struct{ corp, day string }
	due, err := sqlrows.List(ctx, l.db, func(rows *sql.Rows, c *cd) error { return rows.Scan(&c.corp, &c.day) },
		`SELECT e.corp_id, CAST(e.day AS CHAR) FROM ledger_blocks e
LEFT JOIN ledger_roots r ON r.corp_id = e.corp_id AND r.day = e.day
LEFT JOIN ledger_checkpoints c ON c.corp_id = e.corp_id AND c.day = e.day
WHERE e.day < ? AND r.day IS NULL AND c.day IS NULL GROUP BY e.corp_id, e.day ORDER BY e.day, e.corp_id`, Day(l.now()))
	if err != nil {
		return nil, fmt.Errorf("ledger: days to seal: %w", err)
	}
	var out []Checkpoint
	for _, c := range due {
		r, err := l.Seal(ctx, c.corp, c.day)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
