package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
)

// TestFlushdWriter runs flushd's own Writer, so its statements as they are
// (UPDATE JSON_TABLE(?) STRAIGHT_JOIN … by primary key, the orphan SELECT …
// IN, INSERT IGNORE into read_orphans, ApplyOrphans' UPDATE/DELETE … JOIN),
// against go-mysql-server: the demo flushes through it.
func TestFlushdWriter(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	// go-mysql-server's cost grows with table rows (see the package doc):
	// a small message, with a batch that also has uids without rows.
	insertRecipients(t, db, "c", "m", 0, 300, 300)
	insertRecipients(t, db, "c", "other", 0, 10, 10)
	w, err := flushd.NewWriter(db, flushd.WriterOptions{BatchSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	const base = 1772355600 // 2026-03-01T09:00:00Z
	var reads []flushd.Read
	for uid := uint32(0); uid < 400; uid += 2 { // 150 with rows, 50 orphans
		reads = append(reads, flushd.Read{UID: uid, At: base + int64(uid), Source: delta.Source(1 + uid%4/2)})
	}
	updated, orphaned, err := w.Write(ctx, "c", "m", reads)
	if err != nil || updated != 150 || orphaned != 50 {
		t.Fatalf("Write(200 reads, 150 rows) = %d, %d, %v; want 150, 50, nil", updated, orphaned, err)
	}
	// A replay with earlier times changes nothing: is_read = 0 guards it.
	earlier := make([]flushd.Read, len(reads))
	for i, r := range reads {
		earlier[i] = flushd.Read{UID: r.UID, At: r.At - 3600, Source: delta.SourceReconcile}
	}
	if updated, _, err := w.Write(ctx, "c", "m", earlier[:150]); err != nil || updated != 0 {
		t.Errorf("replayed Write = %d updated, %v; want 0, nil", updated, err)
	}

	checkFlushed(t, db, 150, func(uid int) (time.Time, int) {
		return time.Unix(base+int64(uid), 0), 1 + uid%4/2
	})

	// The orphans' rows appear; ApplyOrphans marks them and clears them.
	insertRecipients(t, db, "c", "m", 300, 100, 100)
	if n, err := w.ApplyOrphans(ctx, "c", "m"); err != nil || n != 50 {
		t.Errorf("ApplyOrphans = %d, %v; want 50, nil", n, err)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM read_orphans"); n != 0 {
		t.Errorf("read_orphans after apply = %d; want 0", n)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE msgid='m' AND is_read=1"); n != 200 {
		t.Errorf("rows read after apply = %d; want 200", n)
	}
}

// TestFlushdWriterSignals runs the Writer's statements with read signals
// kept apart against go-mysql-server: a signal that does not count fills
// only its column, a later counted one marks the row read, and an orphan
// carrying only a signal is parked (read_time NULL) and applied.
func TestFlushdWriterSignals(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	insertRecipients(t, db, "c", "m", 0, 3, 3)
	w, err := flushd.NewWriter(db, flushd.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const base = 1772355600 // 2026-03-01T09:00:00Z
	first := []flushd.Read{
		{UID: 0, EnterAgent: base},
		{UID: 1, EnterAgent: base + 1},
		{UID: 5, EnterAgent: base + 5}, // no row yet
	}
	if u, o, err := w.Write(ctx, "c", "m", first); err != nil || u != 2 || o != 1 {
		t.Fatalf("Write(enter_agent) = %d, %d, %v; want 2, 1, nil", u, o, err)
	}
	second := []flushd.Read{
		{UID: 1, At: base + 10, Source: delta.SourceCard, Button: base + 10},
		{UID: 5, At: base + 15, Source: delta.SourceCard, Button: base + 15},
	}
	if u, o, err := w.Write(ctx, "c", "m", second); err != nil || u != 1 || o != 1 {
		t.Fatalf("Write(button) = %d, %d, %v; want 1, 1, nil", u, o, err)
	}
	if u, _, err := w.Write(ctx, "c", "m", append(first[:2:2], second[0])); err != nil || u != 0 {
		t.Errorf("replayed Write = %d, %v; want 0, nil", u, err)
	}
	insertRecipients(t, db, "c", "m", 5, 1, 1)
	if n, err := w.ApplyOrphans(ctx, "c", "m"); err != nil || n != 1 {
		t.Errorf("ApplyOrphans = %d, %v; want 1, nil", n, err)
	}
	type row struct {
		read, source, readAt, button, enter int64
	}
	want := map[int64]row{
		0: {enter: base},
		1: {read: 1, source: 1, readAt: base + 10, button: base + 10, enter: base + 1},
		2: {},
		5: {read: 1, source: 1, readAt: base + 15, button: base + 15, enter: base + 5},
	}
	rows, err := db.QueryContext(ctx, `SELECT uid, is_read, source, COALESCE(UNIX_TIMESTAMP(read_time), 0),
		COALESCE(UNIX_TIMESTAMP(button_at), 0), COALESCE(UNIX_TIMESTAMP(enter_at), 0) FROM message_read_record WHERE msgid = 'm'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid int64
		var r row
		if err := rows.Scan(&uid, &r.read, &r.source, &r.readAt, &r.button, &r.enter); err != nil {
			t.Fatal(err)
		}
		if r != want[uid] {
			t.Errorf("row %d = %+v; want %+v", uid, r, want[uid])
		}
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM read_orphans"); n != 0 {
		t.Errorf("read_orphans after apply = %d; want 0", n)
	}
}
