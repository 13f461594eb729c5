package main

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestArchivePurge: `yidu archive purge` is a dry run unless --execute:
// it prints what it would delete and deletes nothing; with --execute the
// old notice's rows are gone and its summary is kept; a later notice
// stays.
func TestArchivePurge(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	for _, q := range []string{
		`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state) VALUES
			('c', 'old', 'hr', 1, 'old', '2025-01-10 09:00:00', 3, '', 1), ('c', 'new', 'hr', 1, 'new', '2025-03-10 09:00:00', 1, '', 1)`,
		`INSERT INTO message_read_record (corp_id, msgid, uid, is_read, read_time, source, button_at) VALUES
			('c', 'old', 1, 1, '2025-01-10 09:01:00', 1, '2025-01-10 09:01:00'), ('c', 'old', 2, 0, NULL, 0, NULL),
			('c', 'old', 3, 0, NULL, 0, NULL), ('c', 'new', 1, 0, NULL, 0, NULL)`,
		// old had a follow-up: one round to 2 people; new's stays.
		`INSERT INTO follow_ups (corp_id, msgid, policy, updated_at) VALUES
			('c', 'old', '{"reminders":["1d"]}', '2025-01-10 09:00:00'), ('c', 'new', '{"reminders":["1d"]}', '2025-03-10 09:00:00')`,
		`INSERT INTO follow_up_rounds (corp_id, msgid, round, state, due_at, sent_to) VALUES ('c', 'old', 1, 'sent', '2025-01-11 09:00:00', 2)`,
		`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES
			('c', 'old', 1, 'reminder', 2, 'u2', 0, '2025-01-11 09:00:00', 'sent'), ('c', 'old', 1, 'reminder', 3, 'u3', 0, '2025-01-11 09:00:00', 'sent')`,
		// audit.retention (180 days by default): the 2025 event goes, today's stays.
		`INSERT INTO audit_events (at, actor, actor_kind, action, outcome) VALUES
			('2025-01-01 00:00:00', 'hr', 'password', 'sign_in', 'ok'), (UTC_TIMESTAMP(), 'hr', 'password', 'sign_out', 'ok')`,
	} {
		_, err := db.Exec(q)
		testenv.Check(t, q, err)
	}
	env := map[string]string{"YIDU_MYSQL_DSN": dsn}
	count := func(q string) int {
		t.Helper()
		var n int
		testenv.Check(t, q, db.QueryRow(q).Scan(&n))
		return n
	}

	out, _, err := runCmd(t, env, "", "archive", "purge", "--before", "2025-02-01")
	if err != nil || !strings.Contains(out, "would delete c/old (sent 2025-01-10T09:00:00Z): 3 recipient rows, 0 parked reads, 0 send attempts, 2 reminders, 2 follow-up rows") || !strings.Contains(out, "dry run") {
		t.Fatalf("archive purge (dry run) = %q, %v; want the old notice's 3 rows, as a dry run", out, err)
	}
	if !strings.Contains(out, "would delete 1 audit event(s) older than") || count("SELECT COUNT(*) FROM audit_events") != 2 {
		t.Fatalf("archive purge (dry run) = %q; want 1 audit event counted, none deleted", out)
	}
	if n := count("SELECT COUNT(*) FROM message_read_record"); n != 4 {
		t.Fatalf("after the dry run %d recipient rows; want 4", n)
	}

	out, _, err = runCmd(t, env, "", "archive", "purge", "--before", "2025-02-01", "--execute", "--batch", "2")
	if err != nil || !strings.Contains(out, "deleted 1 notice(s)") || !strings.Contains(out, "1 summaries kept") {
		t.Fatalf("archive purge --execute = %q, %v; want 1 notice deleted, its summary kept", out, err)
	}
	if got := testenv.Column[string](t, db, "SELECT action FROM audit_events"); !strings.Contains(out, "deleted 1 audit event(s)") || len(got) != 1 || got[0] != "sign_out" {
		t.Errorf("archive purge --execute = %q, audit events left %v; want only today's sign_out", out, got)
	}
	if n := count("SELECT COUNT(*) FROM message_read_record WHERE msgid = 'old'") + count("SELECT COUNT(*) FROM messages WHERE msgid = 'old'"); n != 0 {
		t.Errorf("old notice has %d rows left; want 0", n)
	}
	if n := count("SELECT COUNT(*) FROM reminder_log WHERE msgid = 'old'") + count("SELECT COUNT(*) FROM follow_up_rounds WHERE msgid = 'old'") +
		count("SELECT COUNT(*) FROM follow_ups WHERE msgid = 'old'"); n != 0 {
		t.Errorf("old notice has %d follow-up rows left; want 0", n)
	}
	if n := count("SELECT COUNT(*) FROM follow_ups WHERE msgid = 'new'"); n != 1 {
		t.Errorf("new notice has %d follow_ups rows; want 1", n)
	}
	if n := count("SELECT COUNT(*) FROM message_read_record WHERE msgid = 'new'"); n != 1 {
		t.Errorf("new notice has %d recipient rows; want 1 (sent after the date)", n)
	}
	if n := count("SELECT COUNT(*) FROM message_summaries WHERE msgid = 'old' AND recipients = 3 AND read_count = 1 AND button = 1"); n != 1 {
		t.Errorf("message_summaries has %d rows for old with 3 recipients, 1 read; want 1", n)
	}

	recent := time.Now().AddDate(0, 0, -1).UTC().Format(time.DateOnly)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"archive", "purge", "--before", "last year"}, "YYYY-MM-DD"},
		{[]string{"archive", "purge", "--before", "2025-02-01", "--dry-run=false"}, "--execute"},
		{[]string{"archive", "purge", "--before", "2025-02-01", "--batch", "0"}, "--batch"},
		{[]string{"archive", "purge", "--before", recent, "--execute"}, "redis.ttl"},
		{[]string{"archive", "--before", "2025-02-01"}, "usage: yidu archive purge"},
	} {
		_, _, err := runCmd(t, env, "", tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != 2 {
			t.Errorf("yidu %v = %v (exit %d); want a usage error mentioning %q", tt.args, err, exitCode(err), tt.want)
		}
	}
}

// TestArchiveRetention: `yidu archive purge` without --before anonymises
// the notices past their retention; its dry run counts them first.
func TestArchiveRetention(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	sent := time.Now().AddDate(0, 0, -100).UTC().Format(time.DateTime)
	for _, q := range []string{
		`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state, retention) VALUES
			('c', 'due', 'hr', 1, 'due', '` + sent + `', 2, '', 1, '90d'), ('c', 'kept', 'hr', 1, 'kept', '` + sent + `', 1, '', 1, '1y')`,
		`INSERT INTO message_read_record (corp_id, msgid, uid) VALUES ('c', 'due', 1), ('c', 'due', 2), ('c', 'kept', 1)`,
	} {
		_, err := db.Exec(q)
		testenv.Check(t, q, err)
	}
	env := map[string]string{"YIDU_MYSQL_DSN": dsn}
	out, _, err := runCmd(t, env, "", "archive", "purge")
	if err != nil || !strings.Contains(out, "would anonymise c/due") || !strings.Contains(out, "retention 90d): 2 recipient rows") ||
		!strings.Contains(out, "would anonymise 1 notice(s) past their retention") {
		t.Fatalf("archive purge (dry run) = %q, %v; want c/due's 2 rows counted", out, err)
	}
	var n int
	testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM message_read_record").Scan(&n))
	if n != 3 {
		t.Fatalf("the dry run left %d recipient rows; want 3", n)
	}
	out, _, err = runCmd(t, env, "", "archive", "purge", "--execute")
	if err != nil || !strings.Contains(out, "anonymised 1 notice(s)") {
		t.Fatalf("archive purge --execute = %q, %v", out, err)
	}
	testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM message_read_record WHERE msgid = 'due'").Scan(&n))
	var left int
	testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM messages WHERE msgid = 'due' AND anonymised_at IS NOT NULL").Scan(&left))
	if n != 0 || left != 1 {
		t.Errorf("after: %d recipient rows of due (want 0), %d anonymised notices (want 1, the notice kept)", n, left)
	}
}
