package migrations_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestReminderEffect fills one notice's reminders by hand and checks
// reminder_effect: per round, the people reached (only outcome 'sent',
// only reminders, not digests), and of them who read within 1 h and 24 h
// of their reminder (a read in the reminder's second counts; a read
// before it does not), and who is still unread. It also checks that
// reminder_log refuses a second reminder of one person in one round.
func TestReminderEffect(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		testenv.Check(t, q, err)
	}
	exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES ('c', 'n', 'hr', 1, '新考勤制度', '2026-12-03 09:00:00.000', 10, '', 1)`)
	for uid := 1; uid <= 10; uid++ {
		exec(`INSERT INTO message_read_record (corp_id, msgid, uid) VALUES ('c', 'n', ?)`, uid)
	}
	// uids 1, 2 read before any reminder (at 09:30). Round 1 at 11:00 to
	// uids 3..10 (10 invalid); round 2 at 2026-12-04 11:00 to those still
	// unread then (6..9).
	read := map[int]string{
		1: "2026-12-03 09:30:00", 2: "2026-12-03 09:30:00",
		3: "2026-12-03 11:00:00", // same second as the reminder
		4: "2026-12-03 11:59:59", // within 1 h
		5: "2026-12-03 20:00:00", // within 24 h
		6: "2026-12-04 11:30:00", // after round 2 only
	}
	for uid, at := range read {
		exec(`UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1 WHERE msgid = 'n' AND uid = ?`, at, uid)
	}
	remind := func(round, uid int, at, outcome string) {
		t.Helper()
		exec(`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
			VALUES ('c', 'n', ?, 'reminder', ?, ?, 0, ?, ?)`, round, uid, fmt.Sprintf("u%d", uid), at, outcome)
	}
	for uid := 3; uid <= 9; uid++ {
		remind(1, uid, "2026-12-03 11:00:00", "sent")
	}
	remind(1, 10, "2026-12-03 11:00:00", "invalid")
	for uid := 6; uid <= 9; uid++ {
		remind(2, uid, "2026-12-04 11:00:00", "sent")
	}
	// A leader's digest is not a reminder of the notice's reader.
	exec(`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
		VALUES ('c', 'n', 1, 'digest', 1, 'u1', 0, '2026-12-03 11:00:01', 'sent')`)

	if _, err := db.ExecContext(ctx, `INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
		VALUES ('c', 'n', 1, 'reminder', 3, 'u3', 1, '2026-12-03 11:00:05', 'sent')`); err == nil {
		t.Error("reminder_log took a second reminder of uid 3 in round 1")
	}

	type effect struct{ round, sentTo, in1h, in24h, unread int }
	// Round 1: 3, 4 within 1 h, 5 too within 24 h; 7, 8, 9 unread (6 read later).
	want := []effect{{1, 7, 2, 3, 3}, {2, 4, 1, 1, 3}}
	rows, err := db.QueryContext(ctx, `SELECT round, sent_to, read_within_1h, read_within_24h, still_unread
		FROM reminder_effect WHERE corp_id = 'c' AND msgid = 'n' ORDER BY round`)
	testenv.Check(t, "reminder_effect", err)
	defer rows.Close()
	var got []effect
	for rows.Next() {
		var e effect
		testenv.Check(t, "scan", rows.Scan(&e.round, &e.sentTo, &e.in1h, &e.in24h, &e.unread))
		got = append(got, e)
	}
	testenv.Check(t, "rows", rows.Err())
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("reminder_effect = %v; want %v", got, want)
	}
}
