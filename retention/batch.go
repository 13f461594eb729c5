package retention

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/yidu-io/yidu/internal/opt"
	"log/slog"
	"time"
)

// checkBatch defaults a run's batch size (DefaultPurgeBatch) and logger
// (discarded), and bounds the batch size to 1..MaxPurgeBatch; op names the
// run in the error.
func checkBatch(op string, batch *int, logger **slog.Logger) error {
	if *batch == 0 {
		*batch = DefaultPurgeBatch
	}
	if *batch < 1 || *batch > MaxPurgeBatch {
		return fmt.Errorf("retention: %s: batch size %d must be in 1..%d", op, *batch, MaxPurgeBatch)
	}
	opt.Logger(logger)
	return nil
}

// listNotices runs q, a SELECT of messages rows, narrowed to corpID
// unless it is "", oldest first; scan reads one row, and a row it does
// not keep is left out. One row per notice, so the list fits in memory
// for any archive.
func listNotices[T any](ctx context.Context, db DB, op, q string, args []any, corpID string, scan func(*sql.Rows) (T, bool, error)) ([]T, error) {
	if corpID != "" {
		q += " AND corp_id = ?"
		args = append(args, corpID)
	}
	rows, err := db.QueryContext(ctx, q+" ORDER BY sent_at, corp_id, msgid", args...)
	if err != nil {
		return nil, fmt.Errorf("retention: %s: list notices: %w", op, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		m, keep, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("retention: %s: list notices: %w", op, err)
		}
		if keep {
			out = append(out, m)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retention: %s: list notices: %w", op, err)
	}
	return out, nil
}

// countTables adds to each table's count the notice's rows in it.
func countTables(ctx context.Context, db DB, tables []ownedTable, corpID, msgID string) error {
	for _, c := range tables {
		var n int64
		if err := queryCount(ctx, db, &n, "SELECT COUNT(*) FROM "+c.table+" WHERE corp_id = ? AND msgid = ?", corpID, msgID); err != nil {
			return fmt.Errorf("count %s: %w", c.table, err)
		}
		*c.n += n
	}
	return nil
}

// deleteTables deletes the notice's rows of each table through its owner,
// in DELETEs of at most batch rows, adding what each deletes to the
// table's count; each (may be nil) is told how long each DELETE took.
func deleteTables(ctx context.Context, db DB, tables []ownedTable, corpID, msgID string, batch int, each func(time.Duration)) error {
	for _, c := range tables {
		for {
			start := time.Now()
			n, err := c.delete(ctx, db, c.table, corpID, msgID, batch)
			if err != nil {
				return err
			}
			if each != nil {
				each(time.Since(start))
			}
			*c.n += n
			if n < int64(batch) {
				break
			}
		}
	}
	return nil
}
