package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/jitter"
)

// RowsPerStatement is the most rows one INSERT writes.
const RowsPerStatement = 1000

// DefaultLeaseTTL is how long a claim lasts without renewal.
const DefaultLeaseTTL = 30 * time.Second

// DefaultOwner is host-pid-random: unique per process, readable in
// campaigns.owner.
func DefaultOwner() string {
	h, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", h, os.Getpid(), hex.EncodeToString(b[:]))
}

// or is v, or d when v is not positive.
func or[T int | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// execRetry runs one autocommit statement, again when InnoDB chose it as
// a deadlock's victim (1213) or it waited too long for a lock (1205):
// replicas claiming, renewing and holding rows of the same index range at
// once deadlock now and then, and the statement did nothing, so running
// it again is safe. About 1.3 s at most.
func execRetry(ctx context.Context, db *sql.DB, stmt string, args ...any) (sql.Result, error) {
	const attempts = 7
	var (
		res sql.Result
		err error
	)
	for i := range attempts {
		res, err = db.ExecContext(ctx, stmt, args...)
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || (me.Number != 1213 && me.Number != 1205) {
			return res, err
		}
		// Jittered: the statements that deadlocked together must not run
		// again together.
		t := time.NewTimer(jitter.Apply(time.Duration(10<<i) * time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	return res, err
}

// Lease claims a row of a table that has the columns state, owner and
// lease_until (campaigns; the follow-up rounds reuse it for their own
// table) so that exactly one replica works on it at a time.
//
// A claim is one conditional UPDATE: it moves the row from one of the
// given states to 'sending', or takes over a 'sending' row whose lease ran
// out (its owner died or hung), and names the new owner. MySQL's row lock
// makes the UPDATE atomic: of any number of replicas claiming at once,
// exactly one sees a changed row. The owner renews the lease while it
// works (Renew) and ends it by moving the row to a final state (Finish)
// or letting the next replica take it at once (Release). Every statement
// but the claim is guarded by owner, so a replica whose lease was taken
// over cannot overwrite the new owner's work.
type Lease struct {
	// Table is the table's name (a constant of the caller, never input).
	Table string
	// Owner names this replica (host, pid and a random part).
	Owner string
	// TTL is how long a claim lasts without Renew.
	TTL time.Duration
}

// Claim moves the row selected by where (e.g. "msgid = ?") to 'sending'
// for l.Owner until now+TTL, when it is in one of from or is a 'sending'
// row whose lease ended (lease_until <= now). set adds assignments of the claim
// (e.g. "started_at = COALESCE(started_at, ?)") with their args first in
// args. It reports whether this call claimed the row.
func (l Lease) Claim(ctx context.Context, db *sql.DB, now time.Time, from []yidu.NoticeState, set string, where string, args ...any) (bool, error) {
	states := make([]string, len(from))
	q := make([]any, 0, len(args)+len(from)+4)
	q = append(q, l.Owner, now.Add(l.TTL))
	q = append(q, args...) // set's, then where's
	for i, s := range from {
		states[i] = "?"
		q = append(q, string(s))
	}
	q = append(q, now)
	if set != "" {
		set = ", " + set
	}
	stmt := fmt.Sprintf(`UPDATE %s SET state = 'sending', owner = ?, lease_until = ?, attempts = attempts + 1%s
		WHERE %s AND (state IN (%s) OR (state = 'sending' AND lease_until <= ?))`,
		l.Table, set, where, strings.Join(states, ", "))
	return l.changedOne(ctx, db, "claim", stmt, q...)
}

// Renew extends l.Owner's lease of the row to now+TTL; false means the
// lease is lost (another replica took over, or the row left 'sending'):
// the caller must stop.
func (l Lease) Renew(ctx context.Context, db *sql.DB, now time.Time, where string, args ...any) (bool, error) {
	q := append([]any{now.Add(l.TTL)}, args...)
	q = append(q, l.Owner)
	ok, err := l.changedOne(ctx, db, "renew", fmt.Sprintf(`UPDATE %s SET lease_until = ?
		WHERE %s AND state = 'sending' AND owner = ?`, l.Table, where), q...)
	if err != nil {
		return false, err
	}
	// MySQL counts a row whose values did not change as unaffected; a
	// renewal in the same millisecond is still held.
	return ok || l.holds(ctx, db, where, args...), nil
}

func (l Lease) holds(ctx context.Context, db *sql.DB, where string, args ...any) bool {
	var n int
	q := append(append([]any{}, args...), l.Owner)
	err := db.QueryRowContext(ctx, fmt.Sprintf(`SELECT COUNT(*) FROM %s WHERE %s AND state = 'sending' AND owner = ?`, l.Table, where), q...).Scan(&n)
	return err == nil && n == 1
}

// Finish moves l.Owner's 'sending' row to state with set's assignments
// (args first for set, then where's); false means the lease was lost and
// nothing was written.
func (l Lease) Finish(ctx context.Context, db *sql.DB, state yidu.NoticeState, set string, where string, args ...any) (bool, error) {
	if set != "" {
		set = ", " + set
	}
	q := append([]any{string(state)}, args...)
	q = append(q, l.Owner)
	return l.changedOne(ctx, db, "finish", fmt.Sprintf(`UPDATE %s SET state = ?, owner = NULL, lease_until = NULL%s
		WHERE %s AND state = 'sending' AND owner = ?`, l.Table, set, where), q...)
}

// changedOne runs stmt (execRetry) and reports whether it changed exactly
// one row: the lease's row. Its errors name act and the table.
func (l Lease) changedOne(ctx context.Context, db *sql.DB, act, stmt string, args ...any) (bool, error) {
	res, err := execRetry(ctx, db, stmt, args...)
	if err != nil {
		return false, fmt.Errorf("campaign: %s %s: %w", act, l.Table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("campaign: %s %s: %w", act, l.Table, err)
	}
	return n == 1, nil
}

// Release ends l.Owner's lease at until and keeps the row 'sending', so
// the first poll of any replica after until resumes it: now for a
// shutdown in the middle of a send, later for a send to retry.
func (l Lease) Release(ctx context.Context, db *sql.DB, until time.Time, where string, args ...any) error {
	q := append([]any{until}, args...)
	q = append(q, l.Owner)
	_, err := execRetry(ctx, db, fmt.Sprintf(`UPDATE %s SET lease_until = ?
		WHERE %s AND state = 'sending' AND owner = ?`, l.Table, where), q...)
	if err != nil {
		return fmt.Errorf("campaign: release %s: %w", l.Table, err)
	}
	return nil
}
