// Package sqlrows reads a query's rows into a slice the same way in every
// package that owns a table: the query and the scan of one row stay with
// the owner, the loop around them is one.
package sqlrows

import (
	"context"
	"database/sql"
)

// Querier is *sql.DB, *sql.Conn or *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// List runs query on q and scans each row into a new element with scan,
// in order (nil for no rows). The rows are closed when it returns, so the
// caller may run statements for each element on the same connection.
func List[T any](ctx context.Context, q Querier, scan func(*sql.Rows, *T) error, query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := scan(rows, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
