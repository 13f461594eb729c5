package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestViews fills two notices by hand (the pipeline's own rows are in
// cmd/internal/process's doc test) and checks read_facts and
// message_summary against what they should say: one row per recipient,
// department names, first signal and per-signal times; recipients, reads,
// percent rounded down, the median time-to-read (equal to MariaDB's
// PERCENTILE_CONT(0.5)) and the time to 90 %.
func TestViews(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		testenv.Check(t, q, err)
	}
	exec(`INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ('c', 1, 0, 'Head'), ('c', 2, 1, 'HR'), ('c', 3, 1, 'Eng')`)
	for uid := 1; uid <= 10; uid++ {
		exec(`INSERT INTO users (corp_id, uid, userid, name) VALUES ('c', ?, ?, ?)`, uid, fmt.Sprintf("u%02d", uid), fmt.Sprintf("User %d", uid))
		exec(`INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ('c', ?, ?)`, 2+uid%2, uid)
	}
	exec(`INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ('c', 1, 1)`) // uid 1 in Head and Eng
	for _, msg := range []string{"even", "odd"} {
		exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
			VALUES ('c', ?, 'hr', 1, ?, '2026-03-01 09:00:00.000', 10, '', 1)`, msg, "title "+msg)
		for uid := 1; uid <= 10; uid++ {
			exec(`INSERT INTO message_read_record (corp_id, msgid, uid) VALUES ('c', ?, ?)`, msg, uid)
		}
	}
	// even: uids 1..4 read 60, 120, 180, 600 s after sending (median 150 s),
	// no 90 %. odd: uids 1..9 read at uid*60 s (median 300 s, 90 % = 9th
	// read at 540 s); uid 10 only opened the app.
	for uid, secs := range map[int]int{1: 60, 2: 120, 3: 180, 4: 600} {
		exec(`UPDATE message_read_record SET is_read = 1, read_time = '2026-03-01 09:00:00' + INTERVAL ? SECOND, source = 1,
			button_at = '2026-03-01 09:00:00' + INTERVAL ? SECOND WHERE msgid = 'even' AND uid = ?`, secs, secs, uid)
	}
	for uid := 1; uid <= 9; uid++ {
		exec(`UPDATE message_read_record SET is_read = 1, read_time = '2026-03-01 09:00:00' + INTERVAL ? SECOND, source = 3,
			link_at = '2026-03-01 09:00:00' + INTERVAL ? SECOND WHERE msgid = 'odd' AND uid = ?`, uid*60, uid*60, uid)
	}
	exec(`UPDATE message_read_record SET enter_at = '2026-03-01 09:00:05' WHERE msgid = 'odd' AND uid = 10`)

	type summary struct {
		recipients, reads int
		percent           float64
		median, to90      sql.NullFloat64
	}
	for msg, want := range map[string]summary{
		"even": {10, 4, 40, sql.NullFloat64{Float64: 150, Valid: true}, sql.NullFloat64{}},
		"odd":  {10, 9, 90, sql.NullFloat64{Float64: 300, Valid: true}, sql.NullFloat64{Float64: 540, Valid: true}},
	} {
		var got summary
		testenv.Check(t, "message_summary", db.QueryRowContext(ctx, `SELECT recipients, read_count, percent, median_seconds, seconds_to_90
			FROM message_summary WHERE corp_id = 'c' AND msgid = ?`, msg).Scan(&got.recipients, &got.reads, &got.percent, &got.median, &got.to90))
		if got != want {
			t.Errorf("message_summary %s = %+v; want %+v", msg, got, want)
		}
		var pc float64
		testenv.Check(t, "PERCENTILE_CONT", db.QueryRowContext(ctx, `SELECT DISTINCT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY seconds_to_read)
			OVER () FROM read_facts WHERE corp_id = 'c' AND msgid = ? AND is_read = 1`, msg).Scan(&pc))
		if pc != got.median.Float64 {
			t.Errorf("%s: PERCENTILE_CONT(0.5) = %v; message_summary median_seconds %v", msg, pc, got.median.Float64)
		}
	}

	var n int
	testenv.Check(t, "count", db.QueryRowContext(ctx, `SELECT COUNT(*) FROM read_facts WHERE corp_id = 'c'`).Scan(&n))
	if n != 20 {
		t.Errorf("read_facts rows = %d; want 20 (one per recipient per notice)", n)
	}
	type fact struct {
		userid, name, depts string
		read                bool
		first               sql.NullString
		secs                sql.NullInt64
		button, link, enter sql.NullString
	}
	for _, c := range []struct {
		msg  string
		uid  int
		want fact
	}{
		{"even", 1, fact{"u01", "User 1", "Head, Eng", true, sql.NullString{String: "button", Valid: true}, sql.NullInt64{Int64: 60, Valid: true},
			sql.NullString{String: "2026-03-01T09:01:00Z", Valid: true}, sql.NullString{}, sql.NullString{}}},
		{"even", 6, fact{"u06", "User 6", "HR", false, sql.NullString{}, sql.NullInt64{}, sql.NullString{}, sql.NullString{}, sql.NullString{}}},
		{"odd", 2, fact{"u02", "User 2", "HR", true, sql.NullString{String: "link", Valid: true}, sql.NullInt64{Int64: 120, Valid: true},
			sql.NullString{}, sql.NullString{String: "2026-03-01T09:02:00Z", Valid: true}, sql.NullString{}}},
		{"odd", 10, fact{"u10", "User 10", "HR", false, sql.NullString{}, sql.NullInt64{}, sql.NullString{}, sql.NullString{}, sql.NullString{String: "2026-03-01T09:00:05Z", Valid: true}}},
	} {
		var got fact
		testenv.Check(t, "read_facts", db.QueryRowContext(ctx, `SELECT userid, name, departments, is_read, first_signal, seconds_to_read,
			button_at, link_at, enter_at FROM read_facts WHERE corp_id = 'c' AND msgid = ? AND uid = ?`, c.msg, c.uid).Scan(
			&got.userid, &got.name, &got.depts, &got.read, &got.first, &got.secs, &got.button, &got.link, &got.enter))
		if got != c.want {
			t.Errorf("read_facts %s uid %d = %+v; want %+v", c.msg, c.uid, got, c.want)
		}
	}
}
