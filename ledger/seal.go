package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// Seal records the root of corp's day, which must have ended (in Zone, by
// the ledger's clock): ledger_roots and, when the ledger has an audit
// Recorder, an audit row. Sealing first moves corp's head past day, in
// one transaction with reading the day's leaves, so no entry can join
// the day afterwards even from a replica whose clock is behind. A day
// sealed before is returned as it was.
func (l *Ledger) Seal(ctx context.Context, corp, day string) (DayRoot, error) {
	d, err := time.ParseInLocation(time.DateOnly, day, Zone)
	if err != nil {
		return DayRoot{}, fmt.Errorf("ledger: day %q: %w", day, ErrInvalid)
	}
	now := l.now()
	if day >= Day(now) {
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, ErrNotEnded)
	}
	if s, err := l.sealed(ctx, corp, day); err != nil || s != nil {
		return derefRoot(s), err
	}
	next := d.AddDate(0, 0, 1).Format(time.DateOnly)
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
	}
	defer tx.Rollback()
	var head string
	err = tx.QueryRowContext(ctx, "SELECT CAST(day AS CHAR) FROM ledger_heads WHERE corp_id = ? FOR UPDATE", corp).Scan(&head)
	switch {
	case err == sql.ErrNoRows:
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: no ledger: %w", day, corp, ErrNotFound)
	case err != nil:
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: lock head: %w", day, corp, err)
	case head <= day:
		if _, err := tx.ExecContext(ctx, "UPDATE ledger_heads SET day = ?, day_size = 0 WHERE corp_id = ?", next, corp); err != nil {
			return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: move head: %w", day, corp, err)
		}
	}
	// Another replica may have sealed the day while we waited for the head.
	var done int
	switch err := tx.QueryRowContext(ctx, "SELECT 1 FROM ledger_roots WHERE corp_id = ? AND day = ?", corp, day).Scan(&done); {
	case err == nil:
		tx.Rollback()
		s, err := l.sealed(ctx, corp, day)
		return derefRoot(s), err
	case err != sql.ErrNoRows:
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
	}
	r := DayRoot{Corp: corp, Day: day, Sealed: true, SealedAt: now.UTC().Truncate(time.Millisecond)}
	leaves, first, err := dayLeaves(ctx, tx, corp, day)
	if err != nil {
		return DayRoot{}, err
	}
	r.FirstSeq = first
	r.Size, r.Root = uint64(len(leaves)), Root(leaves)
	if _, err := tx.ExecContext(ctx, "INSERT INTO ledger_roots (corp_id, day, size, root, first_seq, sealed_at) VALUES (?, ?, ?, ?, ?, ?)",
		corp, day, r.Size, r.Root[:], r.FirstSeq, r.SealedAt); err != nil {
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
	}
	if err := tx.Commit(); err != nil {
		return DayRoot{}, fmt.Errorf("ledger: seal %s of %s: commit: %w", day, corp, err)
	}
	l.log.Info("ledger day sealed", "corp", corp, "day", day, "size", r.Size, "root", r.Root.String())
	if l.audit != nil {
		if err := l.audit.Record(ctx, audit.Event{At: now, Actor: "yidu", ActorKind: "system", Action: yidu.ActionLedgerRoot,
			CorpID: corp, People: int64(r.Size), Outcome: "ok",
			Detail: fmt.Sprintf("day=%s size=%d first_seq=%d root=%s", day, r.Size, r.FirstSeq, r.Root)}); err != nil {
			return r, fmt.Errorf("ledger: seal %s of %s: %w", day, corp, err)
		}
	}
	return r, nil
}

// SealDue seals every day of every corp that has entries, has ended and
// is not sealed yet, oldest first; it returns the roots it sealed. Run it
// after midnight (Asia/Shanghai), e.g. from `yidu evidence seal` or a
// timer; a day left unsealed stays provable against its current head.
func (l *Ledger) SealDue(ctx context.Context) ([]DayRoot, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT e.corp_id, CAST(e.day AS CHAR) FROM ledger_blocks e
LEFT JOIN ledger_roots r ON r.corp_id = e.corp_id AND r.day = e.day
WHERE e.day < ? AND r.day IS NULL GROUP BY e.corp_id, e.day ORDER BY e.day, e.corp_id`, Day(l.now()))
	if err != nil {
		return nil, fmt.Errorf("ledger: days to seal: %w", err)
	}
	type cd struct{ corp, day string }
	var due []cd
	for rows.Next() {
		var c cd
		if err := rows.Scan(&c.corp, &c.day); err != nil {
			rows.Close()
			return nil, fmt.Errorf("ledger: days to seal: %w", err)
		}
		due = append(due, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: days to seal: %w", err)
	}
	var out []DayRoot
	for _, c := range due {
		r, err := l.Seal(ctx, c.corp, c.day)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}
