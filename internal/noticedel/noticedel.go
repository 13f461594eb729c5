// Package noticedel runs the batched DELETE of a notice's rows, and the
// UPDATE that blanks what names people in them, that each owner of a
// table group offers the retention package (flushd the read archive,
// tracker the sends, audit the audit trail): the statements stay with
// their owner, the way they are run is one.
package noticedel

import (
	"context"
	"database/sql"
	"fmt"
)

// Execer is a *sql.DB (each statement committed on its own) or a *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Batch runs the statement of owner's deletes for table, which deletes at
// most limit rows of message msgID ("DELETE … WHERE corp_id = ? AND msgid
// = ? ORDER BY … LIMIT ?"), and returns how many it deleted; a table not
// in deletes is an error, owner names the package in it.
func Batch(ctx context.Context, db Execer, owner string, deletes map[string]string, table, corpID, msgID string, limit int) (int64, error) {
	q, ok := deletes[table]
	if !ok {
		return 0, fmt.Errorf("%s: delete from %s: not a table of %s's", owner, table, owner)
	}
	res, err := db.ExecContext(ctx, q, corpID, msgID, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: delete from %s: %w", owner, table, err)
	}
	return res.RowsAffected()
}

// Blank runs owner's statement q, an UPDATE that blanks what names people
// in message msgID's rows ("UPDATE … WHERE corp_id = ? AND msgid = ? AND
// (… not yet blank)"), and returns how many rows it changed; what names
// the rows in the error.
func Blank(ctx context.Context, db Execer, owner, what, q, corpID, msgID string) (int64, error) {
	res, err := db.ExecContext(ctx, q, corpID, msgID)
	if err != nil {
		return 0, fmt.Errorf("%s: anonymise %s of %s: %w", owner, what, msgID, err)
	}
	return res.RowsAffected()
}
