package migrations_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/migrations"
)

// TestReadRecordRowFormat: after 00009 message_read_record is REDUNDANT,
// its read rows survive the rebuild both ways, and reading a notice (filling
// read_time and button_at, as a flush does) does not grow its clustered
// index: the rows are updated in place. Under 00008's DYNAMIC format the
// same reads split pages; the test checks that too, so it shows what the
// migration is for rather than assuming it.
func TestReadRecordRowFormat(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	p, err := migrations.NewProvider(db)
	testenv.Check(t, "provider", err)

	if got := rowFormat(t, db); got != "Redundant" {
		t.Fatalf("row format after every migration = %q; want Redundant", got)
	}

	const rows = 20000
	for _, c := range []struct {
		name    string
		version int64
		format  string
		grows   bool
	}{
		{"before 00009", 8, "Dynamic", true},
		{"after 00009", 9, "Redundant", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := db.ExecContext(ctx, "DELETE FROM message_read_record")
			testenv.Check(t, "empty", err)
			_, err = p.DownTo(ctx, c.version)
			testenv.Check(t, "down", err)
			_, err = p.UpTo(ctx, c.version)
			testenv.Check(t, "up", err)
			if got := rowFormat(t, db); got != c.format {
				t.Fatalf("row format at %d = %q; want %s", c.version, got, c.format)
			}
			_, err = db.ExecContext(ctx, `INSERT INTO message_read_record (corp_id, msgid, uid)
				SELECT 'wwcorp', 'notice-1', seq FROM seq_1_to_20000`)
			testenv.Check(t, "insert", err)
			before := leafPages(t, db)
			res, err := db.ExecContext(ctx, `UPDATE message_read_record
				SET is_read = 1, read_time = '2026-12-02 09:00:01', source = 1, button_at = '2026-12-02 09:00:01'
				WHERE corp_id = 'wwcorp' AND msgid = 'notice-1'`)
			testenv.Check(t, "read", err)
			if n, _ := res.RowsAffected(); n != rows {
				t.Fatalf("read %d rows; want %d", n, rows)
			}
			after := leafPages(t, db)
			t.Logf("%s: clustered index pages %d unread, %d read", c.format, before, after)
			if grew := after > before+before/10; grew != c.grows {
				t.Errorf("%s: pages %d -> %d after every row was read; want grown = %v", c.format, before, after, c.grows)
			}
		})
	}

	// Both rebuilds keep the read rows: down to DYNAMIC and up again.
	_, err = p.DownTo(ctx, 8)
	testenv.Check(t, "down to 8", err)
	if got := rowFormat(t, db); got != "Dynamic" {
		t.Fatalf("row format after Down = %q; want Dynamic", got)
	}
	_, err = p.Up(ctx)
	testenv.Check(t, "up", err)
	var n int
	var first sql.NullTime
	testenv.Check(t, "count", db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(read_time) FROM message_read_record
		WHERE corp_id = 'wwcorp' AND msgid = 'notice-1' AND is_read = 1 AND source = 1`).Scan(&n, &first))
	if n != rows || !first.Valid || first.Time.Format("15:04:05") != "09:00:01" {
		t.Errorf("after the rebuild: %d read rows, first read %v; want %d at 09:00:01", n, first, rows)
	}
	if got := rowFormat(t, db); got != "Redundant" {
		t.Errorf("row format after Up again = %q; want Redundant", got)
	}
}

func rowFormat(t *testing.T, db *sql.DB) string {
	t.Helper()
	var f string
	testenv.Check(t, "row format", db.QueryRowContext(context.Background(),
		`SELECT ROW_FORMAT FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'message_read_record'`).Scan(&f))
	return f
}

// leafPages is the clustered index's size in pages, from InnoDB's
// persistent statistics after ANALYZE TABLE.
func leafPages(t *testing.T, db *sql.DB) int {
	t.Helper()
	ctx := context.Background()
	rows, err := db.QueryContext(ctx, "ANALYZE TABLE message_read_record")
	testenv.Check(t, "analyze", err)
	for rows.Next() {
	}
	testenv.Check(t, "analyze", rows.Close())
	var n int
	testenv.Check(t, "leaf pages", db.QueryRowContext(ctx,
		`SELECT stat_value FROM mysql.innodb_index_stats
		WHERE database_name = DATABASE() AND table_name = 'message_read_record'
		AND index_name = 'PRIMARY' AND stat_name = 'size'`).Scan(&n))
	return n
}
