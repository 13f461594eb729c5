package flushd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestArchiveOwner checks what other packages write and read of the read
// archive through flushd (one owner per table group, issue 47): the
// recipient rows, their reset, the page signals, the receipt queue's
// claims and outcomes, and a notice's rows deleted in batches.
func TestArchiveOwner(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	const corp, msg = "c", "m1"
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.ExecContext(ctx, q, args...)
		testenv.Check(t, q, err)
	}
	count := func(q string, args ...any) int {
		t.Helper()
		var n int
		testenv.Check(t, q, db.QueryRowContext(ctx, q, args...).Scan(&n))
		return n
	}

	t.Run("InsertRecipients", func(t *testing.T) {
		statements, inserted, err := flushd.InsertRecipients(ctx, db, corp, msg, []uint32{1, 2, 3, 4, 5, 6, 7}, 3)
		if err != nil || statements != 3 || inserted != 7 {
			t.Fatalf("InsertRecipients = %d, %d, %v; want 3, 7, nil", statements, inserted, err)
		}
		exec("UPDATE message_read_record SET is_read = 1, read_time = NOW(), source = 1 WHERE corp_id = ? AND msgid = ? AND uid IN (2, 3)", corp, msg)
		// Again, with one new: the rows there and their reads are kept.
		statements, inserted, err = flushd.InsertRecipients(ctx, db, corp, msg, []uint32{2, 3, 8}, 3)
		if err != nil || statements != 1 || inserted != 1 {
			t.Fatalf("InsertRecipients again = %d, %d, %v; want 1, 1, nil", statements, inserted, err)
		}
		if n := count("SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 1", corp, msg); n != 2 {
			t.Errorf("read rows after a repeated insert = %d; want 2", n)
		}
		if _, _, err := flushd.InsertRecipients(ctx, db, corp, msg, []uint32{9}, 0); err == nil {
			t.Error("InsertRecipients with batch 0 = nil error")
		}
	})

	t.Run("ResetReads", func(t *testing.T) {
		testenv.Check(t, "reset", flushd.ResetReads(ctx, db, corp, msg))
		if n := count("SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND (is_read = 1 OR read_time IS NOT NULL OR source <> 0)", corp, msg); n != 0 {
			t.Errorf("read rows after ResetReads = %d; want 0", n)
		}
	})

	t.Run("PageSignals", func(t *testing.T) {
		at := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		exec("INSERT INTO page_signals (corp_id, msgid, uid, source, version, seen_at, ip, user_agent) VALUES (?,?,?,?,?,?,?,?), (?,?,?,?,?,?,?,?), (?,?,?,?,?,?,?,?), (?,?,?,?,?,?,?,?)",
			corp, msg, 1, int(yidu.SignalReadToEnd), 1, at, "10.0.0.1", "UA",
			corp, msg, 1, int(yidu.SignalAcknowledged), 1, at.Add(time.Minute), "10.0.0.1", "UA",
			corp, msg, 2, int(yidu.SignalAcknowledged), 2, at, "10.0.0.2", "UA2",
			corp, "m2", 1, int(yidu.SignalReadToEnd), 1, at, "", "")
		got, err := flushd.PageSignals(ctx, db, corp, msg, 1)
		testenv.Check(t, "PageSignals", err)
		want := []flushd.PageSignal{
			{Signal: yidu.SignalReadToEnd, Version: 1, At: at, ClientIP: "10.0.0.1", UserAgent: "UA"},
			{Signal: yidu.SignalAcknowledged, Version: 1, At: at.Add(time.Minute), ClientIP: "10.0.0.1", UserAgent: "UA"},
		}
		if !slices.Equal(got, want) {
			t.Errorf("PageSignals = %+v; want %+v", got, want)
		}
		for _, c := range []struct {
			uid     uint32
			sig     yidu.Signal
			version int
			want    bool
		}{{1, yidu.SignalAcknowledged, 1, true}, {1, yidu.SignalAcknowledged, 2, false}, {2, yidu.SignalReadToEnd, 2, false}, {2, yidu.SignalAcknowledged, 2, true}} {
			if got, err := flushd.HasPageSignal(ctx, db, corp, msg, c.uid, c.sig, c.version); err != nil || got != c.want {
				t.Errorf("HasPageSignal(%d, %v, %d) = %v, %v; want %v", c.uid, c.sig, c.version, got, err, c.want)
			}
		}
		// Version 2 is material (reacknowledge): uid 1's acknowledgement
		// of version 1 no longer counts; read_to_end of any version does.
		exec("INSERT INTO notice_versions (corp_id, msgid, version, title, markdown, html, attachments, sha256, reacknowledge, created_at, created_by) VALUES (?, ?, 2, 't', 'm', 'h', '[]', UNHEX(SHA2('x', 256)), 1, NOW(), 'x')", corp, msg)
		var signals []string
		testenv.Check(t, "CountingPageSignals", flushd.CountingPageSignals(ctx, db, corp, msg, func(uid uint32, sig yidu.Signal) {
			signals = append(signals, sig.String()+"/"+string(rune('0'+uid)))
		}))
		slices.Sort(signals)
		if want := []string{"acknowledged/2", "read_to_end/1"}; !slices.Equal(signals, want) {
			t.Errorf("CountingPageSignals = %v; want %v", signals, want)
		}
	})

	t.Run("Receipts", func(t *testing.T) {
		now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		exec("INSERT INTO ack_receipts (corp_id, msgid, uid, version, acked_at, next_at) VALUES (?,?,1,1,?,?), (?,?,2,2,?,?), (?,?,3,1,?,?)",
			corp, msg, now, now.Add(-time.Minute), corp, msg, now, now.Add(-2*time.Minute), corp, msg, now, now.Add(time.Hour))
		testenv.Check(t, "claim", flushd.ClaimReceipts(ctx, db, "a@1", now, now.Add(time.Minute), 1))
		// The earliest due is claimed first; the one not due never.
		if n := count("SELECT COUNT(*) FROM ack_receipts WHERE owner = 'a@1' AND uid = 2"); n != 1 {
			t.Errorf("claimed uid 2 = %d; want 1", n)
		}
		testenv.Check(t, "claim", flushd.ClaimReceipts(ctx, db, "b@1", now, now.Add(time.Minute), 10))
		if n := count("SELECT COUNT(*) FROM ack_receipts WHERE owner = 'b@1'"); n != 1 {
			t.Errorf("second claim took %d; want 1 (uid 1: uid 2 is leased, uid 3 not due)", n)
		}
		k := flushd.ReceiptKey{CorpID: corp, MsgID: msg, UID: 2, Version: 2}
		testenv.Check(t, "set", flushd.SetReceipt(ctx, db, k, "state = ?, attempts = attempts + 1, errcode = ?", "refused", 81013))
		var state, owner string
		var attempts, errcode int
		testenv.Check(t, "read", db.QueryRowContext(ctx, "SELECT state, COALESCE(owner, ''), attempts, errcode FROM ack_receipts WHERE uid = 2").Scan(&state, &owner, &attempts, &errcode))
		if state != "refused" || owner != "" || attempts != 1 || errcode != 81013 {
			t.Errorf("after SetReceipt: %s, %q, %d, %d; want refused, \"\", 1, 81013", state, owner, attempts, errcode)
		}
	})

	t.Run("DeleteNotice", func(t *testing.T) {
		exec("INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source) VALUES (?, ?, 1, NOW(), 1)", corp, msg)
		for _, c := range []struct {
			table string
			left  int // the other notice's
		}{{"message_read_record", 0}, {"read_orphans", 0}, {"page_signals", 1}, {"ack_receipts", 0}} {
			before := count("SELECT COUNT(*) FROM "+c.table+" WHERE corp_id = ? AND msgid = ?", corp, msg)
			var total int64
			for {
				n, err := flushd.DeleteNotice(ctx, db, c.table, corp, msg, 2)
				testenv.Check(t, c.table, err)
				total += n
				if n < 2 {
					break
				}
			}
			if total != int64(before) || before == 0 {
				t.Errorf("DeleteNotice(%s) deleted %d; want the notice's %d", c.table, total, before)
			}
			if n := count("SELECT COUNT(*) FROM " + c.table); n != c.left {
				t.Errorf("%s has %d rows left; want %d", c.table, n, c.left)
			}
		}
		if _, err := flushd.DeleteNotice(ctx, db, "messages", corp, msg, 2); err == nil {
			t.Error("DeleteNotice(messages) = nil error; messages is tracker's")
		}
	})
}
