// Package sqlrows reads a query's rows into a slice or a map the same way
// in every package that owns a table: the query and the scan of one row stay with
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

// Map runs query on q, whose rows are two columns, a key and its value,
// and reads them into a map (empty, not nil, for no rows; a key read
// twice keeps its last value). The rows are closed when it returns.
func Map[K comparable, V any](ctx context.Context, q Querier, query string, args ...any) (map[K]V, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[K]V{}
	for rows.Next() {
		var k K
		var v V
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
