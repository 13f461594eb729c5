package ledger_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

const (
	corp = "wwledger"
	msg  = "m-ledger-1"
)

// clock is a settable clock for the ledger.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// fixture is a migrated database with one message of n recipients
// (uids 0..n-1, UserIDs u0…), a ledger and a flushd Writer using it.
type fixture struct {
	db  *sql.DB
	l   *ledger.Ledger
	w   *flushd.Writer
	clk *clock
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	db := testenv.MySQL(t)
	ctx := context.Background()
	f := &fixture{db: db, clk: &clock{t: time.Date(2026, 12, 3, 10, 0, 0, 0, ledger.Zone)}}
	var err error
	f.l, err = ledger.New(db, ledger.Options{Now: f.clk.now, Audit: audit.NewMySQL(db)})
	testenv.Check(t, "ledger", err)
	f.w, err = flushd.NewWriter(db, flushd.WriterOptions{Ledger: f.l})
	testenv.Check(t, "writer", err)
	_, err = db.ExecContext(ctx, "INSERT INTO messages (corp_id, msgid, app, agent_id, sent_at, recipient_count, audience_hash, state) VALUES (?, ?, 'hr', 1, ?, ?, '', 1)",
		corp, msg, f.clk.t.Add(-time.Hour).UTC(), n)
	testenv.Check(t, "message", err)
	for i := range n {
		_, err = db.ExecContext(ctx, "INSERT INTO users (corp_id, uid, userid) VALUES (?, ?, ?)", corp, i, fmt.Sprintf("u%d", i))
		testenv.Check(t, "user", err)
		_, err = db.ExecContext(ctx, "INSERT INTO message_read_record (corp_id, msgid, uid) VALUES (?, ?, ?)", corp, msg, i)
		testenv.Check(t, "row", err)
	}
	return f
}

func (f *fixture) read(t *testing.T, uids []uint32, at time.Time) {
	t.Helper()
	var reads []flushd.Read
	for _, u := range uids {
		reads = append(reads, flushd.Read{UID: u, At: at.Unix(), Source: delta.SourceCard, Button: at.Unix()})
	}
	if _, _, err := f.w.Write(context.Background(), corp, msg, reads); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func (f *fixture) verify(t *testing.T, day string) ledger.Report {
	t.Helper()
	rep, err := f.l.Verify(context.Background(), corp, day)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func (f *fixture) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	res, err := f.db.ExecContext(context.Background(), q, args...)
	testenv.Check(t, q, err)
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s: %d rows changed; want 1", q, n)
	}
}

func TestFlushdWritesOneEntryPerRowMadeRead(t *testing.T) {
	f := newFixture(t, 10)
	at := f.clk.t.Add(-time.Minute)
	f.read(t, []uint32{1, 2, 3}, at)
	f.read(t, []uint32{2, 3, 4}, at.Add(time.Second)) // 2, 3 redelivered: no entry
	f.clk.t = f.clk.t.Add(24 * time.Hour)             // the next day
	f.read(t, []uint32{5}, at.Add(24*time.Hour))
	blocks := testenv.Column[string](t, f.db, "SELECT CONCAT(first_seq, '+', count, '@', CAST(day AS CHAR), '/', first_index) FROM ledger_blocks WHERE corp_id = ? ORDER BY first_seq", corp)
	if want := "[1+3@2026-12-03/0 4+1@2026-12-03/3 5+1@2026-12-04/0]"; fmt.Sprint(blocks) != want {
		t.Fatalf("blocks (seq+count@day/index) = %v; want %s", blocks, want)
	}
	es, err := f.l.EntriesFor(context.Background(), corp, msg, "u4")
	testenv.Check(t, "EntriesFor", err)
	if len(es) != 1 || es[0].Seq != 4 || es[0].UID != 4 || es[0].Kind != ledger.KindSignal {
		t.Fatalf("EntriesFor(u4) = %+v; want entry 4", es)
	}
	all, err := f.l.EntriesOf(context.Background(), corp, msg)
	testenv.Check(t, "EntriesOf", err)
	if len(all) != 5 || all[3].Seq != 4 || string(all[3].Body) != string(es[0].Body) {
		t.Fatalf("EntriesOf = %d entries; want 5, the 4th u4's", len(all))
	}
	wantBody := fmt.Sprintf(`{"corp":"%s","day":"2026-12-03","index":3,"kind":"signal","msgid":"%s","read_time":"%s","seq":4,"source":1,"uid":4}`,
		corp, msg, at.Add(time.Second).UTC().Format(time.RFC3339))
	if string(es[0].Body) != wantBody {
		t.Errorf("body = %s; want %s", es[0].Body, wantBody)
	}
	if es[0].LeafHash != ledger.LeafHash([]byte(wantBody)) {
		t.Errorf("leaf hash is not SHA-256(0x00 || body)")
	}

	// Seal 2026-12-03 (it ended): the day's checkpoint is the log's
	// first 4 entries, in the audit log too; proofs of its entries
	// verify against it.
	r, err := f.l.Seal(context.Background(), corp, "2026-12-03")
	testenv.Check(t, "Seal", err)
	if r.Size != 4 || r.Day != "2026-12-03" || r.Origin != "yidu/"+corp {
		t.Fatalf("Seal = %+v; want the day's checkpoint of 4 entries", r)
	}
	if _, err := f.l.Seal(context.Background(), corp, "2026-12-04"); !errors.Is(err, ledger.ErrNotEnded) {
		t.Errorf("Seal(today) = %v; want ErrNotEnded", err)
	}
	details := testenv.Column[string](t, f.db, "SELECT detail FROM audit_events WHERE action = 'ledger_root' AND corp_id = ?", corp)
	if len(details) != 1 || !strings.Contains(details[0], "root="+r.Root.String()) {
		t.Errorf("audit rows = %v; want one naming root %s", details, r.Root)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		e, err := f.l.Entry(context.Background(), corp, seq)
		testenv.Check(t, "Entry", err)
		p, err := f.l.Prove(context.Background(), corp, seq)
		testenv.Check(t, "Prove", err)
		if err := ledger.VerifyInclusion(e.LeafHash, p); err != nil {
			t.Errorf("entry %d: VerifyInclusion = %v", seq, err)
		}
		if seq <= 4 && p.Root != r.Root {
			t.Errorf("entry %d proved against %s; want the sealed %s", seq, p.Root, r.Root)
		}
		// The proof survives JSON (what the evidence ZIP carries).
		b, _ := json.Marshal(p)
		var q ledger.Proof
		testenv.Check(t, "json", json.Unmarshal(b, &q))
		if err := ledger.VerifyInclusion(e.LeafHash, q); err != nil {
			t.Errorf("entry %d after JSON: %v", seq, err)
		}
	}
	// Entry 5 came after the day's checkpoint: its proof took one of 5
	// entries (Prove never proves against the unsigned head).
	rep := f.verify(t, "")
	if len(rep.Problems) != 0 || len(rep.Checkpoints) != 2 || rep.Entries != 5 || rep.Facts != 5 {
		t.Fatalf("Verify = %+v; want clean, 2 checkpoints, 5 entries, 5 read rows", rep)
	}
	if rep.Checkpoints[0].Root != r.Root || rep.Checkpoints[1].Size != 5 || rep.Checkpoints[1].Day != "" {
		t.Errorf("Verify's checkpoints = %+v; want the day's, then one of 5 entries", rep.Checkpoints)
	}
}

// Each tampering is caught and the first problem names the entry (or the
// row without one).
func TestVerifyNamesTampering(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, f *fixture)
		what   string
		seq    uint64
		detail string
	}{
		{"update of a read_time", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE message_read_record SET read_time = read_time - INTERVAL 1 DAY WHERE corp_id = ? AND msgid = ? AND uid = 2", corp, msg)
		}, "altered", 2, "uid 2"},
		{"delete of a read row", func(t *testing.T, f *fixture) {
			f.exec(t, "DELETE FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid = 3", corp, msg)
		}, "deleted", 3, "uid 3"},
		{"read row inserted by hand", func(t *testing.T, f *fixture) {
			f.exec(t, "INSERT INTO message_read_record (corp_id, msgid, uid, is_read, read_time, source) VALUES (?, ?, 42, 1, '2026-12-04 01:00:00', 1)", corp, msg)
		}, "inserted", 0, "uid 42"},
		{"row flipped read by hand", func(t *testing.T, f *fixture) {
			f.exec(t, "UPDATE message_read_record SET is_read = 1, read_time = '2026-12-04 01:00:00', source = 1 WHERE corp_id = ? AND msgid = ? AND uid = 7", corp, msg)
		}, "inserted", 0, "uid 7"},
		{"ledger body edited", func(t *testing.T, f *fixture) {
			// Entry 2's packed source (byte 1 + 5 + 4 + 1) becomes 3.
			f.exec(t, "UPDATE ledger_blocks SET bodies = INSERT(bodies, 11, 1, X'03') WHERE corp_id = ? AND first_seq = 1", corp)
		}, "altered", 2, "hashes"},
		{"ledger body and leaf hash edited together", func(t *testing.T, f *fixture) {
			// Entry 2's body says source 3 and its leaf is recomputed to
			// match: only the sealed root (and the read row) can tell.
			f.exec(t, "UPDATE ledger_blocks SET bodies = INSERT(bodies, 11, 1, X'03') WHERE corp_id = ? AND first_seq = 1", corp)
			e, err := f.l.Entry(context.Background(), corp, 2)
			testenv.Check(t, "Entry", err)
			leaf := ledger.LeafHash(e.Body)
			f.exec(t, "UPDATE ledger_blocks SET leaves = CONCAT(SUBSTRING(leaves, 1, 32), ?, SUBSTRING(leaves, 65)) WHERE corp_id = ? AND first_seq = 1", leaf[:], corp)
		}, "altered", 1, "no longer hash to checkpoint 4's root"},
		{"ledger body edited in a block stored as JSON", func(t *testing.T, f *fixture) {
			// Blocks written before bodies were packed hold the
			// canonical JSON bodies themselves; they still verify, and
			// an edit of one is still found.
			unpack(t, f, 1)
			if rep := f.verify(t, ""); len(rep.Problems) != 0 {
				t.Fatalf("JSON bodies: %v", rep.Problems)
			}
			f.exec(t, "UPDATE ledger_blocks SET bodies = REPLACE(bodies, '\"seq\":2,\"source\":1', '\"seq\":2,\"source\":3') WHERE corp_id = ? AND first_seq = 1", corp)
		}, "altered", 2, "hashes"},
		{"ledger row deleted", func(t *testing.T, f *fixture) {
			f.exec(t, "DELETE FROM ledger_blocks WHERE corp_id = ? AND first_seq = 1", corp)
		}, "deleted", 1, "starts at seq 5"},
		{"ledger row of today deleted", func(t *testing.T, f *fixture) {
			f.exec(t, "DELETE FROM ledger_blocks WHERE corp_id = ? AND first_seq = 5", corp)
		}, "deleted", 5, "the head says the ledger has 6 entries, its last is seq 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 10)
			at := f.clk.t.Add(-time.Minute)
			f.read(t, []uint32{1, 2, 3, 4}, at)
			f.clk.t = f.clk.t.Add(24 * time.Hour)
			_, err := f.l.SealDue(context.Background())
			testenv.Check(t, "SealDue", err)
			f.read(t, []uint32{5, 6}, f.clk.t.Add(-time.Minute))
			if rep := f.verify(t, ""); len(rep.Problems) != 0 {
				t.Fatalf("before tampering: %v", rep.Problems)
			}
			tc.tamper(t, f)
			rep := f.verify(t, "")
			if len(rep.Problems) == 0 {
				t.Fatal("Verify found nothing")
			}
			p := rep.Problems[0]
			if p.What != tc.what || p.Seq != tc.seq || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("first problem = %q (seq %d); want %s of entry %d mentioning %q; all: %v", p, p.Seq, tc.what, tc.seq, tc.detail, rep.Problems)
			}
		})
	}
}

// unpack rewrites the block of first seq first as blocks were stored
// before packing: the entries' canonical bodies joined by a newline.
func unpack(t *testing.T, f *fixture, first uint64) {
	t.Helper()
	var count int
	testenv.Check(t, "count", f.db.QueryRow("SELECT count FROM ledger_blocks WHERE corp_id = ? AND first_seq = ?", corp, first).Scan(&count))
	var bodies [][]byte
	for seq := first; seq < first+uint64(count); seq++ {
		e, err := f.l.Entry(context.Background(), corp, seq)
		testenv.Check(t, "Entry", err)
		bodies = append(bodies, e.Body)
	}
	f.exec(t, "UPDATE ledger_blocks SET bodies = ? WHERE corp_id = ? AND first_seq = ?", bytes.Join(bodies, []byte{'\n'}), corp, first)
}

// Forget empties a person's bodies for retention: the day's root and the
// other proofs still hold, and verify is still clean.
func TestForgetKeepsRoots(t *testing.T) {
	f := newFixture(t, 10)
	ctx := context.Background()
	f.read(t, []uint32{1, 2, 3}, f.clk.t.Add(-time.Minute))
	f.clk.t = f.clk.t.Add(24 * time.Hour)
	roots, err := f.l.SealDue(ctx)
	testenv.Check(t, "SealDue", err)
	if len(roots) != 1 {
		t.Fatalf("SealDue = %v; want one day", roots)
	}
	n, err := f.l.Forget(ctx, corp, msg, []uint32{2})
	if err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v; want 1", n, err)
	}
	es, err := f.l.EntriesFor(ctx, corp, msg, "u2")
	testenv.Check(t, "EntriesFor", err)
	if len(es) != 1 || es[0].Body != nil {
		t.Fatalf("u2's entries after Forget = %+v; want one without a body", es)
	}
	f.exec(t, "DELETE FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid = 2", corp, msg)
	if rep := f.verify(t, ""); len(rep.Problems) != 0 || rep.Checkpoints[0].Root != roots[0].Root {
		t.Fatalf("verify after Forget: %v; want clean and the day's checkpoint %s", rep.Problems, roots[0].Root)
	}
	for seq := uint64(1); seq <= 3; seq++ {
		e, err := f.l.Entry(ctx, corp, seq)
		testenv.Check(t, "Entry", err)
		p, err := f.l.Prove(ctx, corp, seq)
		testenv.Check(t, "Prove", err)
		if err := ledger.VerifyInclusion(e.LeafHash, p); err != nil || p.Root != roots[0].Root {
			t.Errorf("entry %d after Forget: %v (root %s)", seq, err, p.Root)
		}
	}
}

// The reading page's events are ledgered in the batch's transaction: the
// acknowledgement that made a row read is its signal entry, with version,
// IP and User-Agent; each page_signals row has its page entry; and an edit
// of a covered page_signals row is found, naming the entry.
func TestPageEvents(t *testing.T) {
	ack := func(uid uint32, v uint32, at int64, counted bool) flushd.Read {
		r := flushd.Read{UID: uid, Acknowledged: at, Pages: []flushd.PageEvent{{Source: delta.SourceAck, Version: v, At: at, IP: "203.0.113.9", UserAgent: "Mozilla/5.0 wxwork/4.1"}}}
		if counted {
			r.At, r.Source = at, delta.SourceAck
		}
		return r
	}
	write := func(t *testing.T, f *fixture) {
		at := f.clk.t.Add(-time.Minute).Unix()
		// uid 1 acknowledges v1 (its read), then v2 (a second event,
		// no second read); uid 2 reads to the end of v1 without a
		// counted read.
		reads := []flushd.Read{ack(1, 1, at, true), ack(1, 2, at+5, false),
			{UID: 2, ReadToEnd: at, Pages: []flushd.PageEvent{{Source: delta.SourceReadToEnd, Version: 1, At: at, IP: "198.51.100.7", UserAgent: "wxwork"}}}}
		if _, _, err := f.w.Write(context.Background(), corp, msg, reads); err != nil {
			t.Fatalf("Write: %v", err)
		}
		// A redelivery appends nothing.
		if _, _, err := f.w.Write(context.Background(), corp, msg, reads); err != nil {
			t.Fatalf("Write again: %v", err)
		}
	}
	t.Run("entries", func(t *testing.T) {
		f := newFixture(t, 4)
		write(t, f)
		es, err := f.l.EntriesFor(context.Background(), corp, msg, "u1")
		testenv.Check(t, "EntriesFor", err)
		var kinds []string
		for _, e := range es {
			kinds = append(kinds, string(e.Kind))
		}
		if got := strings.Join(kinds, ","); got != "signal,page,page" {
			t.Fatalf("u1's entries = %s; want signal,page,page", got)
		}
		for _, want := range []string{`"ip":"203.0.113.9"`, `"signal":"acknowledged"`, `"source":6`, `"ua":"Mozilla/5.0 wxwork/4.1"`, `"version":1`} {
			if !strings.Contains(string(es[0].Body), want) {
				t.Errorf("signal entry %s lacks %s", es[0].Body, want)
			}
		}
		if !strings.Contains(string(es[2].Body), `"version":2`) || !strings.Contains(string(es[2].Body), `"kind":"page"`) {
			t.Errorf("second page entry = %s; want kind page, version 2", es[2].Body)
		}
		rep := f.verify(t, "")
		if len(rep.Problems) != 0 || rep.Entries != 4 {
			t.Fatalf("Verify = %+v; want clean, 4 entries (1 signal, 3 page)", rep)
		}
	})
	tests := []struct {
		name, tamper, what, detail string
		seq                        uint64
	}{
		{"page row's IP edited", "UPDATE page_signals SET ip = '10.9.9.9' WHERE corp_id = ? AND uid = 2", "altered", "10.9.9.9", 4},
		{"page row's time edited", "UPDATE page_signals SET seen_at = seen_at - INTERVAL 1 HOUR WHERE corp_id = ? AND uid = 1 AND version = 2", "altered", "version 2", 3},
		{"page row deleted", "DELETE FROM page_signals WHERE corp_id = ? AND uid = 1 AND version = 2", "deleted", "version 2", 3},
		{"page row inserted by hand", "INSERT INTO page_signals (corp_id, msgid, uid, source, version, seen_at, ip) VALUES (?, 'm-ledger-1', 3, 6, 1, '2026-12-04 01:00:00', '10.1.1.1')", "inserted", "uid 3", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 4)
			write(t, f)
			f.exec(t, tc.tamper, corp)
			rep := f.verify(t, "")
			if len(rep.Problems) == 0 {
				t.Fatal("Verify found nothing")
			}
			p := rep.Problems[0]
			if p.What != tc.what || p.Seq != tc.seq || !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("first problem = %q (seq %d); want %s of entry %d mentioning %q; all: %v", p, p.Seq, tc.what, tc.seq, tc.detail, rep.Problems)
			}
		})
	}
}

// TestVerifyAfterReacknowledge: a material version resets the reads of a
// notice under read_rule acknowledged (tracker.ResetAcknowledged): the
// signal entries before the version's entry record reads that were
// reset. verify accepts a row read again after it (with a second entry)
// and a row left unread; without a material version between them, the
// same second entry is a duplicate and a reset row is a deleted read.
func TestVerifyAfterReacknowledge(t *testing.T) {
	for _, material := range []bool{true, false} {
		t.Run(fmt.Sprintf("material=%v", material), func(t *testing.T) {
			f := newFixture(t, 4)
			ctx := context.Background()
			at := f.clk.t.Add(-time.Minute)
			f.read(t, []uint32{1, 2}, at)
			sum := content.VersionHash("t", "", nil).String()
			_, err := f.db.ExecContext(ctx, `INSERT INTO notice_versions (corp_id, msgid, version, title, markdown, html, attachments, sha256, reacknowledge, created_at)
				VALUES (?, ?, 2, 't', '', '', '[]', UNHEX(?), ?, ?)`, corp, msg, sum, material, f.clk.t.UTC())
			testenv.Check(t, "version", err)
			tx, err := f.db.BeginTx(ctx, nil)
			testenv.Check(t, "begin", err)
			_, err = f.l.Append(ctx, tx, corp, []ledger.Fact{ledger.Version{MsgID: msg, Number: 2, SHA256: sum, Reacknowledge: material, At: f.clk.t}.Fact()})
			testenv.Check(t, "append version", err)
			testenv.Check(t, "commit", tx.Commit())
			// The reset, then uid 1 reads again; uid 2 does not.
			_, err = f.db.ExecContext(ctx, "UPDATE message_read_record SET is_read = 0, read_time = NULL, source = 0 WHERE corp_id = ? AND msgid = ? AND is_read = 1", corp, msg)
			testenv.Check(t, "reset", err)
			f.read(t, []uint32{1}, f.clk.t.Add(time.Minute))
			rep := f.verify(t, "")
			if material && len(rep.Problems) != 0 {
				t.Errorf("verify after a material version: %v; want clean", rep.Problems)
			}
			if !material && (len(rep.Problems) != 3 || rep.Problems[0].Seq != 1 || rep.Problems[1].Seq != 2 || rep.Problems[2].Seq != 4) {
				t.Errorf("verify after a reset without a material version: %v; want entries 1 (altered), 2 (deleted) and 4 (a second entry)", rep.Problems)
			}
		})
	}
}
