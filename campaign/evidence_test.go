package campaign

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestManualRemindersLogged (issue 48): each manual reminder asked for is
// an entry of the corp's evidence log, written with its manual_reminders
// row; one taken back (Unrecord: nothing was sent) is a withdrawal entry.
// verify is clean, and a reminder row forged in MySQL is named.
func TestManualRemindersLogged(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	corp := testenv.RandomName("corp")
	now := time.Date(2026, 3, 2, 9, 0, 0, 123e6, time.UTC)
	lg, err := ledger.New(db, ledger.Options{Now: func() time.Time { return now }})
	testenv.Check(t, "ledger", err)
	l, err := store.NewReminderLog(db, "replica-a", 0, func() time.Time { return now }, slog.New(slog.DiscardHandler))
	testenv.Check(t, "store.NewReminderLog", err)
	l.WithEvidence(lg)
	at := now.Add(time.Minute)
	testenv.Check(t, "record", l.Record(ctx, corp, "n-1", at, "hr-admin", "all", []uint32{1, 2}))
	testenv.Check(t, "unrecord", l.Unrecord(ctx, corp, "n-1", at))
	testenv.Check(t, "record again", l.Record(ctx, corp, "n-1", at.Add(time.Minute), "hr-admin", "led", []uint32{2}))
	rep, err := lg.Verify(ctx, corp, "")
	testenv.Check(t, "verify", err)
	if len(rep.Problems) != 0 || rep.Entries != 5 {
		t.Fatalf("verify = %d entries, %v; want 5 (2 asked, 2 withdrawn, 1 asked), clean", rep.Entries, rep.Problems)
	}
	_, err = db.Exec("INSERT INTO manual_reminders (corp_id, msgid, uid, reminded_at, reminded_by, scope) VALUES (?, 'n-1', 3, ?, 'hr-admin', 'all')", corp, at.Add(2*time.Minute))
	testenv.Check(t, "forge", err)
	rep, err = lg.Verify(ctx, corp, "")
	testenv.Check(t, "verify", err)
	if len(rep.Problems) != 1 || rep.Problems[0].What != "inserted" || !strings.Contains(rep.Problems[0].Detail, "manual_reminders row (n-1 uid 3 asked by hr-admin") {
		t.Errorf("verify after a forged reminder = %v; want it named, inserted", rep.Problems)
	}
}
