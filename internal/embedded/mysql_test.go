package embedded

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

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

// flushReads runs flushd's statement shape over reads and returns RowsAffected.
func flushReads(tb testing.TB, db *sql.DB, corp, msg string, reads []read) int64 {
	tb.Helper()
	q, args := flushStatement(corp, msg, reads)
	return mustExec(tb, db, q, args...)
}

func flushStatement(corp, msg string, reads []read) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 5*len(reads)+2)
	b.WriteString("UPDATE message_read_record SET is_read=1, read_time=CASE uid")
	for _, r := range reads {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, r.uid, r.at)
	}
	b.WriteString(" END, source=CASE uid")
	for _, r := range reads {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, r.uid, r.source)
	}
	b.WriteString(" END WHERE corp_id=? AND msgid=? AND is_read=0 AND uid IN (")
	args = append(args, corp, msg)
	for i, r := range reads {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args = append(args, r.uid)
	}
	b.WriteByte(')')
	return b.String(), args
}

func TestMigrationsSchema(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	for _, table := range []string{"uid_seq", "users", "departments", "user_departments", "messages", "message_read_record", "read_orphans", "message_sends"} {
		if _, err := db.ExecContext(ctx, "SELECT COUNT(*) FROM "+table); err != nil {
			t.Errorf("table %s after migrations: %v", table, err)
		}
	}

	// users.userid is utf8mb4_bin: WeCom UserIDs differing in case are
	// different people and must not collide on users_userid.
	mustExec(t, db, "INSERT INTO users (corp_id, uid, userid, name) VALUES ('c', 1, 'Alice', '张三'), ('c', 2, 'alice', 'Émile 😀')")
	var name string
	if err := db.QueryRowContext(ctx, "SELECT name FROM users WHERE corp_id='c' AND userid='alice'").Scan(&name); err != nil || name != "Émile 😀" {
		t.Errorf("SELECT name of alice = %q, %v; want %q", name, err, "Émile 😀")
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
	// Overlapping re-registration: 2500 exist, 2500 are new.
	if n := insertRecipients(t, db, "c", "m", 2500, 5000, 5000); n != 2500 {
		t.Errorf("INSERT IGNORE of 2500 old + 2500 new rows: RowsAffected = %d; want 2500", n)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE corp_id='c' AND msgid='m' AND is_read=0"); n != 7500 {
		t.Errorf("rows = %d; want 7500", n)
	}
}

func TestFlushUpdateCase(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
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
	for i := range reads {
		reads[i].at = reads[i].at.Add(-time.Hour)
	}
	if n := flushReads(t, db, "c", "m", reads); n != 0 {
		t.Errorf("repeated flush: RowsAffected = %d; want 0", n)
	}
	rows, err := db.QueryContext(ctx, "SELECT uid, is_read, read_time, source FROM message_read_record WHERE corp_id='c' AND msgid='m' ORDER BY uid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	checked := 0
	for rows.Next() {
		var uid, isRead, source int
		var rt sql.NullTime
		if err := rows.Scan(&uid, &isRead, &rt, &source); err != nil {
			t.Fatal(err)
		}
		if uid%2 == 1 {
			if isRead != 0 || rt.Valid || source != 0 {
				t.Fatalf("uid %d (not read) = %d, %v, %d; want 0, NULL, 0", uid, isRead, rt, source)
			}
			continue
		}
		i := uid / 2
		want := base.Add(time.Duration(i) * time.Second)
		if isRead != 1 || !rt.Valid || !rt.Time.Equal(want) || source != 1+i%2 {
			t.Fatalf("uid %d = %d, %v, %d; want 1, %v, %d", uid, isRead, rt.Time, source, want, 1+i%2)
		}
		checked++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if checked != 300 {
		t.Errorf("read rows = %d; want 300", checked)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE msgid='other' AND is_read=1"); n != 0 {
		t.Errorf("rows of another message flipped: %d", n)
	}
}
