package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/migrations"
)

// startDB starts fresh embedded servers, applies the migrations and returns a
// pool on the embedded MySQL.
func startDB(tb testing.TB) (*Servers, *sql.DB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	db, err := sql.Open("mysql", s.MySQLDSN)
	if err != nil {
		tb.Fatalf("open %s: %v", s.MySQLDSN, err)
	}
	tb.Cleanup(func() { db.Close() })
	if v, err := migrations.Up(ctx, db); err != nil || v < 1 {
		tb.Fatalf("migrations.Up = %d, %v; want version >= 1, nil", v, err)
	}
	return s, db
}

func mustExec(tb testing.TB, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, q string, args ...any) int64 {
	tb.Helper()
	res, err := db.ExecContext(context.Background(), q, args...)
	if err != nil {
		tb.Fatalf("exec %.120s: %v", q, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		tb.Fatalf("rows affected %.120s: %v", q, err)
	}
	return n
}

func queryInt(tb testing.TB, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, q string, args ...any) int64 {
	tb.Helper()
	var n int64
	if err := db.QueryRowContext(context.Background(), q, args...).Scan(&n); err != nil {
		tb.Fatalf("query %.120s: %v", q, err)
	}
	return n
}

// insertRecipients writes message_read_record rows for uids first..first+n-1
// with the multi-row INSERT IGNORE the tracker uses, batch rows a statement.
func insertRecipients(tb testing.TB, db *sql.DB, corp, msg string, first, n, batch int) int64 {
	tb.Helper()
	var total int64
	for lo := first; lo < first+n; lo += batch {
		hi := min(lo+batch, first+n)
		var b strings.Builder
		b.WriteString("INSERT IGNORE INTO message_read_record (corp_id, msgid, uid) VALUES ")
		args := make([]any, 0, 3*(hi-lo))
		for uid := lo; uid < hi; uid++ {
			if uid > lo {
				b.WriteByte(',')
			}
			b.WriteString("(?,?,?)")
			args = append(args, corp, msg, uid)
		}
		total += mustExec(tb, db, b.String(), args...)
	}
	return total
}

type read struct {
	uid    int
	at     time.Time
	source int
}

// flushReads runs the batch UPDATE … CASE flushd was first specified with
// over reads and returns RowsAffected.
func flushReads(tb testing.TB, db *sql.DB, corp, msg string, reads []read) int64 {
	tb.Helper()
	q, args := testenv.CaseFlush(corp, msg, len(reads), func(i int) (uid, at, source any) {
		return reads[i].uid, reads[i].at, reads[i].source
	})
	return mustExec(tb, db, q, args...)
}

func TestMigrationsSchema(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	for _, table := range []string{"uid_seq", "users", "departments", "user_departments", "messages", "message_read_record", "read_orphans", "message_sends"} {
		if _, err := db.ExecContext(ctx, "SELECT COUNT(*) FROM "+table); err != nil {
			t.Errorf("table %s after migrations: %v", table, err)
		}
	}

	// users.userid is utf8mb4_bin and keeps the spelling; userid_key
	// (migration 00002, generated) is yidu.UserID.Fold, by which idmap
	// finds members: ASCII lower-cased, anything else as spelt.
	mustExec(t, db, "INSERT INTO users (corp_id, uid, userid, name) VALUES ('c', 1, 'Alice', '张三'), ('c', 2, 'ÉMILE', 'Émile 😀')")
	var name string
	if err := db.QueryRowContext(ctx, "SELECT name FROM users WHERE corp_id='c' AND userid_key='alice'").Scan(&name); err != nil || name != "张三" {
		t.Errorf("SELECT name of userid_key alice = %q, %v; want %q", name, err, "张三")
	}
	var key string
	if err := db.QueryRowContext(ctx, "SELECT userid_key FROM users WHERE corp_id='c' AND uid=2").Scan(&key); err != nil || key != "ÉMILE" {
		t.Errorf("userid_key of ÉMILE = %q, %v; want it as spelt", key, err)
	}
	err := insertErr(db, "INSERT INTO users (corp_id, uid, userid) VALUES ('c', 3, 'Alice')")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		t.Errorf("duplicate userid: err = %v; want MySQL error 1062", err)
	}

	// updated_at is TIMESTAMP(3) ... ON UPDATE CURRENT_TIMESTAMP(3).
	var before, after time.Time
	if err := db.QueryRowContext(ctx, "SELECT updated_at FROM users WHERE corp_id='c' AND uid=1").Scan(&before); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	mustExec(t, db, "UPDATE users SET name='李四' WHERE corp_id='c' AND uid=1")
	if err := db.QueryRowContext(ctx, "SELECT updated_at FROM users WHERE corp_id='c' AND uid=1").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !after.After(before) {
		t.Errorf("updated_at after UPDATE = %v; want after %v (ON UPDATE CURRENT_TIMESTAMP(3))", after, before)
	}

	// DATETIME(3) keeps milliseconds.
	sent := time.Date(2026, 3, 1, 8, 30, 15, 123_000_000, time.UTC)
	mustExec(t, db, "INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash) VALUES (?,?,?,?,?,?,?,?)",
		"c", "m1", "hr", 1000002, "通知", sent, 3, strings.Repeat("a", 64))
	var got time.Time
	if err := db.QueryRowContext(ctx, "SELECT sent_at FROM messages WHERE corp_id='c' AND msgid='m1'").Scan(&got); err != nil || !got.Equal(sent) {
		t.Errorf("sent_at = %v, %v; want %v", got, err, sent)
	}
}

func insertErr(db *sql.DB, q string, args ...any) error {
	_, err := db.ExecContext(context.Background(), q, args...)
	return err
}

func TestInsertIgnoreMultiRow(t *testing.T) {
	_, db := startDB(t)
	if n := insertRecipients(t, db, "c", "m", 0, 5000, 5000); n != 5000 {
		t.Errorf("INSERT IGNORE of 5000 new rows: RowsAffected = %d; want 5000", n)
	}
	// Overlapping re-registration: 500 exist, 500 are new.
	if n := insertRecipients(t, db, "c", "m", 4500, 1000, 1000); n != 500 {
		t.Errorf("INSERT IGNORE of 500 old + 500 new rows: RowsAffected = %d; want 500", n)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE corp_id='c' AND msgid='m' AND is_read=0"); n != 5500 {
		t.Errorf("rows = %d; want 5500", n)
	}
}

func TestFlushUpdateCase(t *testing.T) {
	_, db := startDB(t)
	// go-mysql-server's cost is rows × uids (see the package doc), so the
	// table stays small while the statement has the full 5000 uids.
	insertRecipients(t, db, "c", "m", 0, 600, 5000)
	insertRecipients(t, db, "c", "other", 0, 10, 5000)
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	reads := make([]read, 5000)
	for i := range reads {
		reads[i] = read{uid: i * 2, at: base.Add(time.Duration(i) * time.Second), source: 1 + i%2}
	}
	// uids 0..9998 step 2: 300 exist (0..598), 4700 are missing (orphans).
	if n := flushReads(t, db, "c", "m", reads); n != 300 {
		t.Errorf("UPDATE … CASE of 5000 uids (300 rows): RowsAffected = %d; want 300", n)
	}
	// A second flush of the same reads changes nothing (is_read=0 guard), and
	// an earlier read_time never overwrites the first.
	// (500 uids: a 5000-uid statement costs go-mysql-server ~10 s to plan.)
	again := append([]read(nil), reads[:500]...)
	for i := range again {
		again[i].at = again[i].at.Add(-time.Hour)
	}
	if n := flushReads(t, db, "c", "m", again); n != 0 {
		t.Errorf("repeated flush: RowsAffected = %d; want 0", n)
	}
	checkFlushed(t, db, 300, func(uid int) (time.Time, int) {
		i := uid / 2
		return base.Add(time.Duration(i) * time.Second), 1 + i%2
	})
}

// checkFlushed checks message c/m after reads of its even uids were
// flushed: each odd uid is unread, each even uid read at the time and from
// the source want gives, n rows in all; and no row of message c/other is
// read.
func checkFlushed(tb testing.TB, db *sql.DB, n int, want func(uid int) (time.Time, int)) {
	tb.Helper()
	rows, err := db.QueryContext(context.Background(), "SELECT uid, is_read, read_time, source FROM message_read_record WHERE corp_id='c' AND msgid='m' ORDER BY uid")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var uid, isRead, source int
		var at sql.NullTime
		if err := rows.Scan(&uid, &isRead, &at, &source); err != nil {
			tb.Fatal(err)
		}
		if uid%2 == 1 {
			if isRead != 0 || at.Valid || source != 0 {
				tb.Fatalf("uid %d (not read) = %d, %v, %d; want 0, NULL, 0", uid, isRead, at, source)
			}
			continue
		}
		wantAt, wantSource := want(uid)
		if isRead != 1 || !at.Valid || !at.Time.Equal(wantAt) || source != wantSource {
			tb.Fatalf("uid %d = %d, %v, %d; want 1, %v, %d", uid, isRead, at.Time, source, wantAt, wantSource)
		}
		read++
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	if read != n {
		tb.Errorf("read rows = %d; want %d", read, n)
	}
	if n := queryInt(tb, db, "SELECT COUNT(*) FROM message_read_record WHERE msgid='other' AND is_read=1"); n != 0 {
		tb.Errorf("rows of another message flipped: %d", n)
	}
}

func TestTransactionForUpdate(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	mustExec(t, db, "INSERT INTO uid_seq (corp_id, next_uid) VALUES ('c', 10)")
	// Each transaction takes 5 uids the way idmap may: the sequence row
	// locked, moved on and the first uid given to a user.
	tests := []struct {
		end        string
		finish     func(*sql.Tx) error
		next, want int64 // next_uid before and after
	}{
		{"Commit", (*sql.Tx).Commit, 10, 15},
		{"Rollback", (*sql.Tx).Rollback, 15, 15},
	}
	for _, tt := range tests {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := queryInt(t, tx, "SELECT next_uid FROM uid_seq WHERE corp_id='c' FOR UPDATE"); n != tt.next {
			t.Errorf("SELECT … FOR UPDATE before %s = %d; want %d", tt.end, n, tt.next)
		}
		mustExec(t, tx, "UPDATE uid_seq SET next_uid = next_uid + 5 WHERE corp_id='c'")
		mustExec(t, tx, "INSERT INTO users (corp_id, uid, userid) VALUES ('c', ?, ?)", tt.next, fmt.Sprintf("u%d", tt.next))
		if err := tt.finish(tx); err != nil {
			t.Fatalf("%s: %v", tt.end, err)
		}
		if n := queryInt(t, db, "SELECT next_uid FROM uid_seq WHERE corp_id='c'"); n != tt.want {
			t.Errorf("next_uid after %s = %d; want %d", tt.end, n, tt.want)
		}
		if n := queryInt(t, db, "SELECT COUNT(*) FROM users WHERE corp_id='c'"); n != 1 {
			t.Errorf("users after %s = %d; want 1", tt.end, n)
		}
	}
}

func TestLastInsertIDSequence(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	mustExec(t, db, "INSERT INTO uid_seq (corp_id, next_uid) VALUES ('c', 0)")
	// reserve takes n uids the way idmap does: the UPDATE sets the new
	// next_uid and remembers it per connection, so [end-n, end) is ours.
	reserve := func(n int) (int64, error) {
		conn, err := db.Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		if _, err := conn.ExecContext(ctx, "UPDATE uid_seq SET next_uid = LAST_INSERT_ID(next_uid + ?) WHERE corp_id = ?", n, "c"); err != nil {
			return 0, err
		}
		var end int64
		err = conn.QueryRowContext(ctx, "SELECT LAST_INSERT_ID()").Scan(&end)
		return end, err
	}
	end, err := reserve(3)
	if err != nil || end != 3 {
		t.Fatalf("reserve(3) = %d, %v; want 3, nil", end, err)
	}

	// Concurrent reservations must hand out disjoint ranges.
	const workers, each = 8, 25
	var mu sync.Mutex
	ends := map[int64]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				e, err := reserve(2)
				mu.Lock()
				if err != nil {
					t.Errorf("reserve: %v", err)
				} else if ends[e] {
					t.Errorf("range ending %d handed out twice", e)
				}
				ends[e] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := queryInt(t, db, "SELECT next_uid FROM uid_seq WHERE corp_id='c'"); n != 3+2*workers*each {
		t.Errorf("next_uid = %d; want %d", n, 3+2*workers*each)
	}
}

func TestUpsertAndUpdateJoin(t *testing.T) {
	_, db := startDB(t)
	upsert := "INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source) VALUES (?,?,?,?,?),(?,?,?,?,?) " +
		"ON DUPLICATE KEY UPDATE read_time = LEAST(read_time, VALUES(read_time)), source = VALUES(source)"
	t1 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	// MySQL counts 1 per inserted row, 2 per updated row, 0 per unchanged row.
	if n := mustExec(t, db, upsert, "c", "m", 1, t1, 1, "c", "m", 2, t1, 1); n != 2 {
		t.Errorf("upsert of 2 new rows: RowsAffected = %d; want 2", n)
	}
	if n := mustExec(t, db, upsert, "c", "m", 1, t1.Add(-time.Minute), 2, "c", "m", 3, t1, 1); n != 3 {
		t.Errorf("upsert of 1 changed + 1 new row: RowsAffected = %d; want 3", n)
	}
	var rt time.Time
	if err := db.QueryRow("SELECT read_time FROM read_orphans WHERE uid=1").Scan(&rt); err != nil || !rt.Equal(t1.Add(-time.Minute)) {
		t.Errorf("read_time of uid 1 = %v, %v; want %v", rt, err, t1.Add(-time.Minute))
	}

	// Orphans are applied once their rows exist: UPDATE … JOIN ….
	insertRecipients(t, db, "c", "m", 0, 3, 100)
	mustExec(t, db, "UPDATE message_read_record SET is_read=1, read_time='2026-03-01 08:00:00' WHERE corp_id='c' AND msgid='m' AND uid=2")
	n := mustExec(t, db, "UPDATE message_read_record r JOIN read_orphans o ON o.corp_id = r.corp_id AND o.msgid = r.msgid AND o.uid = r.uid "+
		"SET r.is_read = 1, r.read_time = o.read_time, r.source = o.source WHERE r.is_read = 0 AND o.corp_id = ? AND o.msgid = ?", "c", "m")
	if n != 1 {
		t.Errorf("UPDATE … JOIN: RowsAffected = %d; want 1 (uid 1 only)", n)
	}
	var src int
	if err := db.QueryRow("SELECT read_time, source FROM message_read_record WHERE uid=1").Scan(&rt, &src); err != nil || !rt.Equal(t1.Add(-time.Minute)) || src != 2 {
		t.Errorf("uid 1 after join = %v, %d, %v; want %v, 2", rt, src, err, t1.Add(-time.Minute))
	}
	if err := db.QueryRow("SELECT read_time FROM message_read_record WHERE uid=2").Scan(&rt); err != nil || rt.Hour() != 8 {
		t.Errorf("uid 2 (already read) = %v, %v; want its first read_time kept", rt, err)
	}
	if n := mustExec(t, db, "DELETE o FROM read_orphans o JOIN message_read_record r ON o.corp_id = r.corp_id AND o.msgid = r.msgid AND o.uid = r.uid WHERE o.corp_id = ? AND o.msgid = ?", "c", "m"); n != 2 {
		t.Errorf("DELETE … JOIN: RowsAffected = %d; want 2", n)
	}
}

func TestReadsPerMinute(t *testing.T) {
	srv, db := startDB(t)
	insertRecipients(t, db, "c", "m", 0, 10, 100)
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	reads := []read{
		{0, base, 1}, {1, base.Add(59 * time.Second), 1},
		{2, base.Add(60 * time.Second), 2}, {3, base.Add(3*time.Minute + 5*time.Second), 1},
	}
	flushReads(t, db, "c", "m", reads)
	for _, dsnExtra := range []string{"", "&time_zone=%27%2B00%3A00%27"} {
		t.Run("dsn"+dsnExtra, func(t *testing.T) {
			s := db
			if dsnExtra != "" {
				s2, err := sql.Open("mysql", srv.MySQLDSN+dsnExtra)
				if err != nil {
					t.Fatal(err)
				}
				defer s2.Close()
				s = s2
			}
			rows, err := s.Query("SELECT FLOOR(UNIX_TIMESTAMP(read_time)/60) AS m, COUNT(*) FROM message_read_record "+
				"WHERE corp_id=? AND msgid=? AND is_read=1 GROUP BY m ORDER BY m", "c", "m")
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []string
			for rows.Next() {
				var m, n int64
				if err := rows.Scan(&m, &n); err != nil {
					t.Fatal(err)
				}
				got = append(got, fmt.Sprintf("%s:%d", time.Unix(m*60, 0).UTC().Format("15:04"), n))
			}
			if want := "09:00:2 09:01:1 09:03:1"; strings.Join(got, " ") != want {
				t.Errorf("reads per minute = %q; want %q", strings.Join(got, " "), want)
			}
		})
	}
}

func TestConcurrentTransactions(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	mustExec(t, db, "INSERT INTO uid_seq (corp_id, next_uid) VALUES ('c', 0)")
	// Read-modify-write under FOR UPDATE, as idmap may do it.
	bump := func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		var n int64
		if err := tx.QueryRowContext(ctx, "SELECT next_uid FROM uid_seq WHERE corp_id='c' FOR UPDATE").Scan(&n); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "UPDATE uid_seq SET next_uid = ? WHERE corp_id='c'", n+1); err != nil {
			return err
		}
		return tx.Commit()
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := bump(); err != nil {
					t.Errorf("bump: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := queryInt(t, db, "SELECT next_uid FROM uid_seq WHERE corp_id='c'"); n != 120 {
		t.Errorf("next_uid after 120 concurrent transactions = %d; want 120", n)
	}
}

func TestLockWaitTimeout(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{LockWait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("mysql", s.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, "CREATE TABLE t (a INT PRIMARY KEY)")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 {
		t.Errorf("statement on a second connection during a transaction: err = %v; want MySQL error 1205", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (a INT PRIMARY KEY)"); err != nil {
		t.Errorf("statement after the transaction ended: %v", err)
	}
}

func TestTxVerb(t *testing.T) {
	tests := []struct{ query, want string }{
		{"START TRANSACTION", "begin"},
		{"start transaction read only", "begin"},
		{" BEGIN; ", "begin"},
		{"COMMIT", "end"},
		{"rollback", "end"},
		{"ROLLBACK TO SAVEPOINT a", ""},
		{"SELECT 1", ""},
		{"BEGINNING", ""},
	}
	for _, tt := range tests {
		if got := txVerb(tt.query); got != tt.want {
			t.Errorf("txVerb(%q) = %q; want %q", tt.query, got, tt.want)
		}
	}
}
