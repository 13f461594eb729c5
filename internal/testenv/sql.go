package testenv

import (
	"context"
	"database/sql"
	"strings"
	"testing"
)

// Column returns the one column of every row query returns, in order.
func Column[T any](tb testing.TB, db *sql.DB, query string, args ...any) []T {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), query, args...)
	Check(tb, "query", err)
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		Check(tb, "scan", rows.Scan(&v))
		out = append(out, v)
	}
	Check(tb, "rows", rows.Err())
	return out
}

// Placeholders returns n "?" separated by commas, for IN (…) lists.
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// CaseFlush returns the batch UPDATE the flush contract first named, and
// its arguments: read_time and source of message corp/msg set by CASE uid
// WHEN ? THEN ? … END, one WHEN per read, on the unread rows of the reads'
// uids. flushd's benchmarks measure the Writer against it and the embedded
// MySQL must run it. read gives read i's uid, read_time and source as the
// driver is to bind them.
func CaseFlush(corp, msg string, n int, read func(i int) (uid, at, source any)) (string, []any) {
	var q strings.Builder
	args := make([]any, 0, 5*n+2)
	q.WriteString("UPDATE message_read_record SET is_read = 1, read_time = CASE uid")
	for i := range n {
		uid, at, _ := read(i)
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, uid, at)
	}
	q.WriteString(" END, source = CASE uid")
	for i := range n {
		uid, _, source := read(i)
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, uid, source)
	}
	q.WriteString(" END WHERE corp_id = ? AND msgid = ? AND is_read = 0 AND uid IN (" + Placeholders(n) + ")")
	args = append(args, corp, msg)
	for i := range n {
		uid, _, _ := read(i)
		args = append(args, uid)
	}
	return q.String(), args
}
