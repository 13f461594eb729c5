package flushd

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
)

// spyDB counts batch UPDATEs (and their uids) and fails every statement
// while fail is set, standing in for an unreachable MySQL.
type spyDB struct {
	DB
	fail atomic.Bool

	mu      sync.Mutex
	updates []int // uids per batch UPDATE, in order
}

var errDown = errors.New("test: mysql is down")

func (s *spyDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.fail.Load() {
		return nil, errDown
	}
	if strings.HasPrefix(q, updatePrefix) {
		var reads [][]any
		if err := json.Unmarshal([]byte(args[0].(string)), &reads); err != nil {
			return nil, fmt.Errorf("test: batch UPDATE with a bad JSON argument: %w", err)
		}
		s.mu.Lock()
		s.updates = append(s.updates, len(reads))
		s.mu.Unlock()
	}
	return s.DB.ExecContext(ctx, q, args...)
}

func (s *spyDB) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	if s.fail.Load() {
		return nil, errDown
	}
	return s.DB.QueryContext(ctx, q, args...)
}

func (s *spyDB) batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.updates...)
}

// insertRecipients writes unread recipient rows for uids [from, to) of a
// message, 5000 rows per INSERT.
func insertRecipients(tb testing.TB, db *sql.DB, corpID, msgID string, from, to uint32) {
	tb.Helper()
	for lo := from; lo < to; lo += 5000 {
		hi := min(lo+5000, to)
		var b strings.Builder
		args := make([]any, 0, 3*(hi-lo))
		b.WriteString("INSERT INTO message_read_record (corp_id, msgid, uid) VALUES ")
		for uid := lo; uid < hi; uid++ {
			if uid > lo {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?)")
			args = append(args, corpID, msgID, uid)
		}
		_, err := db.ExecContext(context.Background(), b.String(), args...)
		testenv.Check(tb, "insert recipients", err)
	}
}

// row is a message_read_record row as tests compare it.
type row struct {
	read   bool
	at     int64 // unix seconds, 0 when NULL
	source uint8
}

// readRows returns the message's rows by uid.
func readRows(tb testing.TB, db *sql.DB, corpID, msgID string) map[uint32]row {
	tb.Helper()
	return messageRows(tb, db, "is_read, read_time, source", corpID, msgID, func(scan func(...any) error) row {
		var (
			r  row
			at sql.NullTime
		)
		testenv.Check(tb, "scan", scan(&r.read, &at, &r.source))
		r.at = unixOrZero(at)
		return r
	})
}

// messageRows selects uid and cols of the message's rows and returns what
// scanRow makes of each (it scans cols) by uid.
func messageRows[T any](tb testing.TB, db *sql.DB, cols, corpID, msgID string, scanRow func(scan func(...any) error) T) map[uint32]T {
	tb.Helper()
	rs, err := db.QueryContext(context.Background(),
		"SELECT uid, "+cols+" FROM message_read_record WHERE corp_id = ? AND msgid = ?", corpID, msgID)
	testenv.Check(tb, "select "+cols, err)
	defer rs.Close()
	out := map[uint32]T{}
	for rs.Next() {
		var uid uint32
		r := scanRow(func(dest ...any) error { return rs.Scan(append([]any{&uid}, dest...)...) })
		out[uid] = r
	}
	testenv.Check(tb, "rows", rs.Err())
	return out
}

// unixOrZero is t in unix seconds, 0 when NULL.
func unixOrZero(t sql.NullTime) int64 {
	if !t.Valid {
		return 0
	}
	return t.Time.Unix()
}

// countRead returns how many rows of the database are read.
func countRead(tb testing.TB, db *sql.DB) int {
	tb.Helper()
	var n int
	testenv.Check(tb, "count read", db.QueryRow("SELECT COUNT(*) FROM message_read_record WHERE is_read = 1").Scan(&n))
	return n
}

// base is a read_time all tests build on: 2025-01-01T00:00:00Z.
const base = 1735689600

func msgName(i int) string { return fmt.Sprintf("task-%03d", i) }

// signals is a row's first time of each signal (unix seconds, 0 when NULL).
type signals struct{ button, link, enter int64 }

// signalRows returns each row's signal times by uid.
func signalRows(tb testing.TB, db *sql.DB, corpID, msgID string) map[uint32]signals {
	tb.Helper()
	return messageRows(tb, db, "button_at, link_at, enter_at", corpID, msgID, func(scan func(...any) error) signals {
		var b, l, e sql.NullTime
		testenv.Check(tb, "scan", scan(&b, &l, &e))
		return signals{unixOrZero(b), unixOrZero(l), unixOrZero(e)}
	})
}
