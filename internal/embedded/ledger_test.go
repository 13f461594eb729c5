package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu/campaign/store"
)

// TestActLedgerStatements runs store.ReminderLog's statements (the act
// claim, the per-person reminder records and their union with
// reminder_log) on the demo's MySQL, where "Remind unread" runs them.
func TestActLedgerStatements(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	l, err := store.NewReminderLog(db, "demo", time.Minute, func() time.Time { return now }, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, ok, err := l.Claim(ctx, "c", "m", "remind")
	if !ok || err != nil {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	if _, ok, err := l.Claim(ctx, "c", "m", "recall"); ok || err != nil {
		t.Fatalf("second Claim = %v, %v; want refused", ok, err)
	}
	if err := l.Record(ctx, "c", "m", now, "hr", "all", []uint32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	mustExec(t, db, `INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome)
		VALUES ('c', 'm', 1, 'reminder', 4, 'u4', 0, ?, 'sent')`, now)
	got, err := l.Reminded(ctx, "c", "m", now.Add(-time.Hour))
	if err != nil || len(got) != 4 {
		t.Fatalf("Reminded = %v, %v; want 4 people", got, err)
	}
	if err := l.Unrecord(ctx, "c", "m", now); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Reminded(ctx, "c", "m", now.Add(-time.Hour)); err != nil || len(got) != 1 {
		t.Fatalf("Reminded after Unrecord = %v, %v; want the round's one", got, err)
	}
	release()
	if _, ok, err := l.Claim(ctx, "c", "m", "recall"); !ok || err != nil {
		t.Fatalf("Claim after release = %v, %v", ok, err)
	}
}
