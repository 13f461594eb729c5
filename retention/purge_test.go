package retention

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// insertMessage writes a messages row sent at sentAt with unread recipient
// rows for uids [0, recipients).
func insertMessage(tb testing.TB, db *sql.DB, corpID, msgID string, sentAt time.Time, recipients uint32) {
	tb.Helper()
	_, err := db.ExecContext(context.Background(), `INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES (?, ?, 'hr', 1, ?, ?, ?, '', 1)`, corpID, msgID, "title "+msgID, sentAt.UTC().Format(time.DateTime), recipients)
	testenv.Check(tb, "insert message", err)
	insertRecipients(tb, db, corpID, msgID, 0, recipients)
}

// tableCounts returns the rows of message (corpID, msgID) per table.
func tableCounts(tb testing.TB, db *sql.DB, corpID, msgID string) string {
	tb.Helper()
	var out string
	for _, table := range []string{"messages", "message_read_record", "read_orphans", "message_sends",
		"reminder_log", "follow_up_batches", "follow_up_rounds", "follow_ups", "campaigns"} {
		var n int
		testenv.Check(tb, "count "+table, db.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE corp_id = ? AND msgid = ?", corpID, msgID).Scan(&n))
		out += fmt.Sprintf("%s %d ", table, n)
	}
	return out
}

// summaryRow returns message_summary's (or message_summaries') row of a
// notice as text, with the per-signal counts.
func summaryRow(tb testing.TB, db *sql.DB, from, corpID, msgID string) string {
	tb.Helper()
	signals := "(SELECT COUNT(button_at) FROM message_read_record r WHERE r.corp_id = s.corp_id AND r.msgid = s.msgid), " +
		"(SELECT COUNT(link_at) FROM message_read_record r WHERE r.corp_id = s.corp_id AND r.msgid = s.msgid), " +
		"(SELECT COUNT(enter_at) FROM message_read_record r WHERE r.corp_id = s.corp_id AND r.msgid = s.msgid)"
	if from == "message_summaries" {
		signals = "button, link, enter_agent"
	}
	var (
		title               string
		recipients, reads   int
		percent, median     sql.NullFloat64
		to90                sql.NullInt64
		button, link, enter int
	)
	err := db.QueryRow("SELECT title, recipients, read_count, percent, median_seconds, seconds_to_90, "+signals+" FROM "+from+" s WHERE corp_id = ? AND msgid = ?",
		corpID, msgID).Scan(&title, &recipients, &reads, &percent, &median, &to90, &button, &link, &enter)
	if err == sql.ErrNoRows {
		return "none"
	}
	testenv.Check(tb, "summary of "+msgID, err)
	return fmt.Sprintf("%s: %d recipients, %d read, %v%%, median %v, to 90%% %v, button %d link %d enter %d",
		title, recipients, reads, percent.Float64, median.Float64, to90, button, link, enter)
}

// TestPurge: a dry run counts and deletes nothing; a purge deletes the
// notices sent before the date (their recipient rows, orphans, sends and
// messages row) in DELETEs of at most the batch size, keeps each
// notice's summary as message_summary had it, leaves later notices and
// other corps alone, never replaces a summary already kept, and a second
// run finds nothing.
func TestPurge(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	day := func(d int) time.Time { return time.Date(2025, 1, d, 9, 0, 0, 0, time.UTC) }
	insertMessage(t, db, "c", "old", day(10), 12)
	insertMessage(t, db, "d", "other-corp", day(11), 3)
	insertMessage(t, db, "c", "kept", day(20), 5)
	insertMessage(t, db, "c", "new", day(41), 5) // February 10
	for _, q := range []string{
		// old: 6 of 12 read 60..360 s after sending (median 210 s), one
		// more only opened the app; two orphans; two send attempts.
		`UPDATE message_read_record SET is_read = 1, source = 1, read_time = '2025-01-10 09:00:00' + INTERVAL (uid + 1) * 60 SECOND,
			button_at = '2025-01-10 09:00:00' + INTERVAL (uid + 1) * 60 SECOND WHERE corp_id = 'c' AND msgid = 'old' AND uid < 6`,
		`UPDATE message_read_record SET enter_at = '2025-01-10 09:30:00' WHERE corp_id = 'c' AND msgid = 'old' AND uid = 6`,
		`INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source) VALUES ('c', 'old', 100, '2025-01-10 10:00:00', 1), ('c', 'old', 101, '2025-01-10 10:00:00', 3)`,
		`INSERT INTO message_sends (corp_id, msgid, kind, batch, status, sent_at) VALUES ('c', 'old', 'send', 0, 'sent', '2025-01-10 09:00:00'), ('c', 'old', 'remind', 0, 'sent', '2025-01-11 09:00:00')`,
		// old: a follow-up of one round to 2 people and a leader's
		// digest, sent from yidu (its campaigns row).
		`INSERT INTO follow_ups (corp_id, msgid, policy, stopped_reason, updated_at) VALUES ('c', 'old', '{"reminders":["1d"]}', 'done', '2025-01-10 09:00:00')`,
		`INSERT INTO follow_up_rounds (corp_id, msgid, round, state, due_at, sent_to) VALUES ('c', 'old', 1, 'sent', '2025-01-11 09:00:00', 2)`,
		`INSERT INTO follow_up_batches (corp_id, msgid, round, kind, batch, state, uids, people, created_at)
			VALUES ('c', 'old', 1, 'reminder', 0, 'sent', x'00', 2, '2025-01-11 09:00:00')`,
		`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES
			('c', 'old', 1, 'reminder', 7, 'u7', 0, '2025-01-11 09:00:00', 'sent'), ('c', 'old', 1, 'reminder', 8, 'u8', 0, '2025-01-11 09:00:00', 'sent'),
			('c', 'old', 1, 'digest', 10, 'lead', 0, '2025-01-11 09:00:00', 'sent')`,
		`INSERT INTO campaigns (msgid, corp_id, app, title, audience, state, created_at, updated_at) VALUES ('old', 'c', 'hr', 'title old', '{}', 'sent', '2025-01-10 09:00:00', '2025-01-10 09:00:00')`,
		// new (not purged): the same follow-up rows, which must stay.
		`INSERT INTO follow_ups (corp_id, msgid, policy, updated_at) VALUES ('c', 'new', '{"reminders":["1d"]}', '2025-02-10 09:00:00')`,
		`INSERT INTO follow_up_rounds (corp_id, msgid, round, state, due_at) VALUES ('c', 'new', 1, 'sent', '2025-02-11 09:00:00')`,
		`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES ('c', 'new', 1, 'reminder', 1, 'u1', 0, '2025-02-11 09:00:00', 'sent')`,
		`INSERT INTO campaigns (msgid, corp_id, app, title, audience, state, created_at, updated_at) VALUES ('new', 'c', 'hr', 'title new', '{}', 'sent', '2025-02-10 09:00:00', '2025-02-10 09:00:00')`,
		// kept: a summary kept by an earlier, interrupted purge.
		`INSERT INTO message_summaries (corp_id, msgid, app, title, sent_at, recipients, read_count, button, link, enter_agent)
			VALUES ('c', 'kept', 'hr', 'earlier', '2025-01-20 09:00:00', 5, 4, 4, 0, 0)`,
	} {
		_, err := db.ExecContext(ctx, q)
		testenv.Check(t, q, err)
	}
	before := time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC)
	oldSummary := summaryRow(t, db, "message_summary", "c", "old")
	if want := "title old: 12 recipients, 6 read, 50%, median 210, to 90% {0 false}, button 6 link 0 enter 1"; oldSummary != want {
		t.Fatalf("message_summary of old = %q; want %q", oldSummary, want)
	}
	oldRows := tableCounts(t, db, "c", "old")

	// Dry run (the default): counted, nothing written.
	var seen []string
	rep, err := Purge(ctx, db, PurgeOptions{Before: before, CorpID: "c"}, func(pm PurgedMessage) {
		seen = append(seen, fmt.Sprintf("%s/%s %d %d %d %d %d", pm.CorpID, pm.MsgID, pm.Records, pm.Orphans, pm.Sends, pm.Reminders, pm.FollowUps))
	})
	if err != nil || rep.Messages != 2 || rep.Records != 17 || rep.Orphans != 2 || rep.Sends != 2 || rep.Reminders != 3 || rep.FollowUps != 4 || rep.Statements != 0 {
		t.Fatalf("dry run = %+v, %v; want 2 notices, 17 records, 2 orphans, 2 sends, 3 reminders, 4 follow-up rows, no DELETE", rep, err)
	}
	if fmt.Sprint(seen) != "[c/old 12 2 2 3 4 c/kept 5 0 0 0 0]" {
		t.Errorf("dry run reported %v; want old then kept", seen)
	}
	if got := tableCounts(t, db, "c", "old"); got != oldRows {
		t.Errorf("after the dry run old has %s; want %s", got, oldRows)
	}
	if got := summaryRow(t, db, "message_summaries", "c", "old"); got != "none" {
		t.Errorf("dry run kept a summary: %s", got)
	}

	// The purge of corp c before February, 5 rows a DELETE.
	rep, err = Purge(ctx, db, PurgeOptions{Before: before, CorpID: "c", BatchSize: 5, Execute: true}, nil)
	// old: 3 + 1 + 1 + 1 + 6×1 DELETEs, kept: 2 + 1 + 1 + 1 + 6×1
	// (manual_reminders, notice_acts and ack_receipts included, empty here).
	if err != nil || rep.Messages != 2 || rep.Records != 17 || rep.Orphans != 2 || rep.Sends != 2 || rep.Reminders != 3 || rep.FollowUps != 4 ||
		rep.Summaries != 2 || rep.Statements != 29 {
		t.Fatalf("purge = %+v, %v; want 2 notices, 17 records, 2 orphans, 2 sends, 3 reminders, 4 follow-up rows, 2 summaries, 29 DELETEs (one more per notice each: page_signals, ack_receipts, send_departments)", rep, err)
	}
	for _, msg := range []string{"old", "kept"} {
		if got, want := tableCounts(t, db, "c", msg), "messages 0 message_read_record 0 read_orphans 0 message_sends 0 "+
			"reminder_log 0 follow_up_batches 0 follow_up_rounds 0 follow_ups 0 campaigns 0 "; got != want {
			t.Errorf("after the purge %s has %s; want %s", msg, got, want)
		}
	}
	if got := summaryRow(t, db, "message_summaries", "c", "old"); got != oldSummary {
		t.Errorf("message_summaries of old = %q; want message_summary's %q", got, oldSummary)
	}
	if got, want := summaryRow(t, db, "message_summaries", "c", "kept"), "earlier: 5 recipients, 4 read, 0%, median 0, to 90% {0 false}, button 4 link 0 enter 0"; got != want {
		t.Errorf("message_summaries of kept = %q; want the earlier summary %q", got, want)
	}
	if got := tableCounts(t, db, "d", "other-corp"); got != "messages 1 message_read_record 3 read_orphans 0 message_sends 0 "+
		"reminder_log 0 follow_up_batches 0 follow_up_rounds 0 follow_ups 0 campaigns 0 " {
		t.Errorf("d/other-corp after corp c's purge: %s; want untouched", got)
	}

	// Every corp, without summaries; then nothing is left to purge.
	rep, err = Purge(ctx, db, PurgeOptions{Before: before, Execute: true, DropSummaries: true}, nil)
	if err != nil || rep.Messages != 1 || rep.Records != 3 || rep.Summaries != 0 {
		t.Fatalf("purge of every corp = %+v, %v; want d/other-corp: 3 records, no summary", rep, err)
	}
	if got := summaryRow(t, db, "message_summaries", "d", "other-corp"); got != "none" {
		t.Errorf("DropSummaries kept %s", got)
	}
	if rep, err := Purge(ctx, db, PurgeOptions{Before: before, Execute: true}, nil); err != nil || rep.Messages != 0 {
		t.Errorf("second purge = %+v, %v; want nothing", rep, err)
	}
	if got := tableCounts(t, db, "c", "new"); got != "messages 1 message_read_record 5 read_orphans 0 message_sends 0 "+
		"reminder_log 1 follow_up_batches 0 follow_up_rounds 1 follow_ups 1 campaigns 1 " {
		t.Errorf("c/new, sent after the date: %s; want untouched", got)
	}

	for _, bad := range []PurgeOptions{{}, {Before: before, BatchSize: MaxPurgeBatch + 1}, {Before: before, BatchSize: -1}} {
		if _, err := Purge(ctx, db, bad, nil); err == nil {
			t.Errorf("Purge(%+v) = nil error; want one", bad)
		}
	}
}

// BenchmarkPurge100k deletes one notice of 100,000 recipient rows (half
// read, with signal times) in DELETEs of 1000 and 5000 rows, keeping its
// summary; it reports the time per 100k rows and the longest DELETE (the
// longest any row lock is held).
//
//	YIDU_TEST_REAL=1 go test -run '^$' -bench BenchmarkPurge100k -benchtime 3x ./retention
func BenchmarkPurge100k(b *testing.B) {
	db := testenv.MySQL(b)
	for _, batch := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchPurge(b, db, batch) })
	}
}

func benchPurge(b *testing.B, db *sql.DB, batch int) {
	ctx := context.Background()
	const rows = 100_000
	sent := time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)
	var elapsed, longest time.Duration
	for range b.N {
		b.StopTimer()
		insertMessage(b, db, "corp", "purge", sent, rows)
		_, err := db.ExecContext(ctx, `UPDATE message_read_record SET is_read = 1, source = 1,
			read_time = '2025-01-01 09:00:00' + INTERVAL uid SECOND, button_at = '2025-01-01 09:00:00' + INTERVAL uid SECOND
			WHERE corp_id = 'corp' AND msgid = 'purge' AND uid % 2 = 0`)
		testenv.Check(b, "mark read", err)
		b.StartTimer()
		start := time.Now()
		rep, err := Purge(ctx, db, PurgeOptions{Before: sent.Add(time.Hour), Execute: true, BatchSize: batch}, nil)
		elapsed += time.Since(start)
		if err != nil || rep.Records != rows || rep.Summaries != 1 {
			b.Fatalf("Purge = %+v, %v; want %d records, 1 summary", rep, err, rows)
		}
		longest = max(longest, rep.Longest)
		b.StopTimer()
		_, err = db.ExecContext(ctx, "DELETE FROM message_summaries")
		testenv.Check(b, "reset", err)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(elapsed.Seconds()/float64(b.N), "s/100k-rows")
	b.ReportMetric(float64(longest.Milliseconds()), "ms-longest-delete")
}
