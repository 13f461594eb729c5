package flushd

import (
	"context"
	"database/sql"
	"testing"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestLockFirstEmbedded: on go-mysql-server (the demo's embedded MySQL)
// LockFirstFor asks for LockFirst, and with it a ledger batch whose reads
// do not all find their rows (here half of them) writes the rows that
// exist, one entry each, and parks the others, which registration then
// applies with their entries. Without LockFirst the rolled-back UPDATE of
// writeAllNew left rows read without entries there (2 of 5 written).
func TestLockFirstEmbedded(t *testing.T) {
	db := embeddedDB(t)
	lockFirst, err := LockFirstFor(context.Background(), db)
	if err != nil || !lockFirst {
		t.Fatalf("LockFirstFor(go-mysql-server) = %v, %v; want true", lockFirst, err)
	}
	partlyOrphaned(t, db, lockFirst)
}

// On MariaDB LockFirstFor asks for nothing, and the same batch takes
// writeAllNew, rolls it back and writes what the embedded server wrote.
func TestLockFirstMariaDB(t *testing.T) {
	db := testenv.MySQL(t)
	lockFirst, err := LockFirstFor(context.Background(), db)
	if err != nil || lockFirst {
		t.Fatalf("LockFirstFor(MariaDB) = %v, %v; want false", lockFirst, err)
	}
	partlyOrphaned(t, db, lockFirst)
}

// partlyOrphaned writes a ledger batch of 10 reads of which 5 have their
// rows, then registers the other 5.
func partlyOrphaned(t *testing.T, db *sql.DB, lockFirst bool) {
	t.Helper()
	ctx := context.Background()
	insertRecipients(t, db, "wwemb", "m1", 0, 10)
	l, err := ledger.New(db, ledger.Options{})
	testenv.Check(t, "ledger", err)
	w, err := NewWriter(db, WriterOptions{Ledger: l, LockFirst: lockFirst})
	testenv.Check(t, "writer", err)
	var reads []Read
	for u := uint32(5); u < 15; u++ {
		reads = append(reads, Read{UID: u, At: base, Source: delta.SourceCard, Button: base})
	}
	count := func(q string) int {
		var n int
		testenv.Check(t, q, db.QueryRow(q).Scan(&n))
		return n
	}
	const (
		read    = "SELECT COUNT(*) FROM message_read_record WHERE corp_id = 'wwemb' AND is_read = 1"
		entries = "SELECT COALESCE(SUM(count), 0) FROM ledger_blocks WHERE corp_id = 'wwemb'"
	)
	if u, o, err := w.Write(ctx, "wwemb", "m1", reads); err != nil || u != 5 || o != 5 {
		t.Fatalf("Write = %d, %d, %v; want 5 rows, 5 parked", u, o, err)
	}
	if r, e := count(read), count(entries); r != 5 || e != 5 {
		t.Fatalf("%d rows read, %d entries; want 5 and 5", r, e)
	}
	insertRecipients(t, db, "wwemb", "m1", 10, 15)
	if n, err := w.ApplyOrphans(ctx, "wwemb", "m1"); err != nil || n != 5 {
		t.Fatalf("ApplyOrphans = %d, %v; want 5", n, err)
	}
	if r, e := count(read), count(entries); r != 10 || e != 10 {
		t.Fatalf("after registration: %d rows read, %d entries; want 10 and 10", r, e)
	}
	// The log's checkpoints and their proofs run on both servers.
	c, err := l.Checkpoint(ctx, "wwemb")
	if err != nil || c.Size != 10 {
		t.Fatalf("Checkpoint = %+v, %v; want 10 entries", c, err)
	}
	if again, err := l.Checkpoint(ctx, "wwemb"); err != nil || again.Note != c.Note {
		t.Fatalf("Checkpoint again = %+v, %v; want the same", again, err)
	}
	p, err := l.Prove(ctx, "wwemb", 4)
	testenv.Check(t, "Prove", err)
	e, err := l.Entry(ctx, "wwemb", 4)
	testenv.Check(t, "Entry", err)
	if err := ledger.VerifyInclusion(e.LeafHash, p); err != nil || p.Root != c.Root {
		t.Fatalf("entry 4: %v (root %s, checkpoint %s)", err, p.Root, c.Root)
	}
	if _, err := l.CheckpointDue(ctx); err != nil {
		t.Fatalf("CheckpointDue: %v", err)
	}
}
