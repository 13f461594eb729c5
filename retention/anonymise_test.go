package retention

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestAnonymise: a notice past its retention (its own, or its app's
// default) loses its personal data, counted first by a dry run; one
// within it, or with none, is untouched; a second run finds nothing.
func TestAnonymise(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	sent := now.AddDate(-3, 0, -1)                                 // 3 years and a day ago
	insertMessage(t, db, "c1", "old", sent, 5)                     // app hr: default 3y, due
	insertMessage(t, db, "c1", "own", sent, 2)                     // own retention 5y: kept
	insertMessage(t, db, "c1", "short", now.AddDate(0, 0, -91), 2) // own 90d: due
	insertMessage(t, db, "c1", "new", now.AddDate(-1, 0, 0), 2)    // default 3y: kept
	mustExec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		testenv.Check(t, q, err)
	}
	mustExec(`UPDATE messages SET retention = '5y' WHERE msgid = 'own'`)
	mustExec(`UPDATE messages SET retention = '90d' WHERE msgid = 'short'`)
	mustExec(`UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1, button_at = ? WHERE msgid = 'old' AND uid < 3`, sent, sent)
	mustExec(`INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES ('c1', 'old', 1, 'reminder', 4, 'zhangsan', 0, ?, 'sent')`, sent)
	mustExec(`INSERT INTO message_sends (corp_id, msgid, kind, batch, status, invalid, sent_at) VALUES ('c1', 'old', 'send', 0, 'sent', 'ghost|zhangsan', ?)`, sent)
	mustExec(`INSERT INTO audit_events (at, actor, actor_kind, action, corp_id, msgid, client_ip, user_agent, outcome, detail) VALUES (?, 'hr', 'password', 'evidence', 'c1', 'old', '10.1.2.3', 'Firefox', 'ok', 'userid=zhangsan format=pdf')`, sent)
	mustExec(`INSERT INTO page_signals (corp_id, msgid, uid, source, version, seen_at, ip, user_agent) VALUES ('c1', 'old', 1, 6, 1, ?, '10.1.2.3', 'wxwork')`, sent)
	opts := AnonymiseOptions{Now: now, Defaults: map[string]yidu.Retention{"hr": {N: 3, Unit: 'y'}}}

	var seen []string
	rep, err := Anonymise(ctx, db, opts, func(am AnonymisedMessage) { seen = append(seen, am.MsgID+"/"+am.Retention.String()) })
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != "old/3y" || seen[1] != "short/90d" {
		t.Errorf("dry run found %v; want old/3y and short/90d", seen)
	}
	if rep.Records != 8 || rep.Reminders != 1 || rep.Sends != 1 || rep.Audit != 1 {
		t.Errorf("dry run counts %+v; want 8 records (7 recipients, 1 page signal), 1 reminder, 1 send list, 1 audit row", rep)
	}
	if got := tableCounts(t, db, "c1", "old"); got != "messages 1 message_read_record 5 read_orphans 0 message_sends 1 reminder_log 1 follow_up_batches 0 follow_up_rounds 0 follow_ups 0 campaigns 0 " {
		t.Errorf("the dry run changed rows: %s", got)
	}

	opts.Execute = true
	var forgot []string
	opts.Forget = func(_ context.Context, corpID, msgID string) error {
		forgot = append(forgot, corpID+"/"+msgID)
		return nil
	}
	if rep, err = Anonymise(ctx, db, opts, nil); err != nil || rep.Messages != 2 || rep.Records != 8 {
		t.Fatalf("Anonymise = %+v, %v", rep, err)
	}
	if strings.Join(forgot, ",") != "c1/old,c1/short" {
		t.Errorf("ledger bodies forgotten of %v; want c1/old and c1/short", forgot)
	}
	if got := tableCounts(t, db, "c1", "old"); got != "messages 1 message_read_record 0 read_orphans 0 message_sends 1 reminder_log 0 follow_up_batches 0 follow_up_rounds 0 follow_ups 0 campaigns 0 " {
		t.Errorf("after: %s", got)
	}
	if got := summaryRow(t, db, "message_summaries", "c1", "old"); got == "none" {
		t.Errorf("summary of old not kept in message_summaries")
	}
	var pageRows int
	testenv.Check(t, "page_signals", db.QueryRow(`SELECT COUNT(*) FROM page_signals WHERE msgid = 'old'`).Scan(&pageRows))
	if pageRows != 0 {
		t.Errorf("%d page_signals rows (IP, User-Agent) left after anonymisation; want 0", pageRows)
	}
	var invalid, ip, ua, detail any
	testenv.Check(t, "sends", db.QueryRow(`SELECT invalid FROM message_sends WHERE msgid = 'old'`).Scan(&invalid))
	testenv.Check(t, "audit", db.QueryRow(`SELECT client_ip, user_agent, detail FROM audit_events WHERE msgid = 'old'`).Scan(&ip, &ua, &detail))
	if invalid != nil || string(ip.([]byte)) != "" || string(ua.([]byte)) != "" || string(detail.([]byte)) != "" {
		t.Errorf("left: invalid %v, ip %s, ua %s, detail %s", invalid, ip, ua, detail)
	}
	for _, kept := range []string{"own", "new"} {
		var n int
		testenv.Check(t, "count", db.QueryRow(`SELECT COUNT(*) FROM message_read_record WHERE msgid = ?`, kept).Scan(&n))
		if n != 2 {
			t.Errorf("%s: %d recipient rows; want 2 (within its retention)", kept, n)
		}
	}
	if rep, err := Anonymise(ctx, db, opts, nil); err != nil || rep.Messages != 0 {
		t.Errorf("second run = %+v, %v; want nothing", rep, err)
	}
}
