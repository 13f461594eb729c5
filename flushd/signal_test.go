package flushd

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestWriteSignals: a counted read sets is_read, read_time and source once
// (the first written); every signal sets its own first time once; a signal
// that does not count leaves is_read alone.
func TestWriteSignals(t *testing.T) {
	w, _, db := newTestWriter(t)
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 5)
	first := []Read{
		{UID: 0, EnterAgent: base}, // opened the app: not a read
		{UID: 1, EnterAgent: base}, // opened the app, …
		{UID: 2, At: base + 5, Source: delta.SourceCard, Button: base + 5},           // pressed the button
		{UID: 3, At: base + 9, Source: delta.SourceReconcile},                        // re-emitted by reconcile
		{UID: 4, At: base + 1, Source: delta.SourceEnterAgent, EnterAgent: base + 1}, // an app counting enter_agent
	}
	if u, o, err := w.Write(ctx, "corp", "m1", first); err != nil || u != 5 || o != 0 {
		t.Fatalf("Write = %d, %d, %v; want 5, 0, nil", u, o, err)
	}
	second := []Read{
		{UID: 1, At: base + 10, Source: delta.SourceCard, Button: base + 10}, // … then pressed the button
		{UID: 2, At: base + 3, Source: delta.SourceLink, Link: base + 3},     // a link after the button, earlier time
		{UID: 0, EnterAgent: base - 50},                                      // replayed with another time
		{UID: 3, At: base + 20, Source: delta.SourceCard, Button: base + 20},
	}
	if u, o, err := w.Write(ctx, "corp", "m1", second); err != nil || u != 3 || o != 0 {
		t.Fatalf("second Write = %d, %d, %v; want 3 (uid 0 unchanged), 0, nil", u, o, err)
	}
	// Replaying both changes nothing.
	for _, rs := range [][]Read{first, second} {
		if u, _, err := w.Write(ctx, "corp", "m1", rs); err != nil || u != 0 {
			t.Errorf("replayed Write = %d, %v; want 0, nil", u, err)
		}
	}
	wantRows := map[uint32]row{
		0: {},
		1: {read: true, at: base + 10, source: 1},
		2: {read: true, at: base + 5, source: 1},
		3: {read: true, at: base + 9, source: 4},
		4: {read: true, at: base + 1, source: 2},
	}
	wantSignals := map[uint32]signals{
		0: {enter: base},
		1: {button: base + 10, enter: base},
		2: {button: base + 5, link: base + 3},
		3: {button: base + 20},
		4: {enter: base + 1},
	}
	rows, sigs := readRows(t, db, "corp", "m1"), signalRows(t, db, "corp", "m1")
	for uid := range uint32(5) {
		if rows[uid] != wantRows[uid] || sigs[uid] != wantSignals[uid] {
			t.Errorf("row %d = %+v %+v; want %+v %+v", uid, rows[uid], sigs[uid], wantRows[uid], wantSignals[uid])
		}
	}
}

// TestWriteOrphanSignals: an orphan carries its signals. Parked twice, it
// keeps the first of each; applied, its row gets them all; deleted only
// once its row holds everything it carries.
func TestWriteOrphanSignals(t *testing.T) {
	w, _, db := newTestWriter(t)
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 1) // uids 1 and 2 not registered yet
	parks := [][]Read{
		{{UID: 1, EnterAgent: base}, {UID: 2, EnterAgent: base + 1}},
		{{UID: 1, At: base + 10, Source: delta.SourceCard, Button: base + 10}, {UID: 1, EnterAgent: base + 30}},
		{{UID: 1, At: base + 40, Source: delta.SourceLink, Link: base + 40}},
	}
	for i, rs := range parks {
		if _, o, err := w.Write(ctx, "corp", "m1", rs); err != nil || o != len(firstReads(rs)) {
			t.Fatalf("Write %d orphaned %d, %v; want %d, nil", i, o, err, len(firstReads(rs)))
		}
	}
	if n := orphanCount(t, db); n != 2 {
		t.Fatalf("read_orphans has %d rows; want 2", n)
	}
	insertRecipients(t, db, "corp", "m1", 1, 3)
	if n, err := ApplyOrphans(ctx, db, "corp", "m1"); err != nil || n != 2 {
		t.Fatalf("ApplyOrphans = %d, %v; want 2, nil", n, err)
	}
	rows, sigs := readRows(t, db, "corp", "m1"), signalRows(t, db, "corp", "m1")
	if want := (row{read: true, at: base + 10, source: 1}); rows[1] != want {
		t.Errorf("row 1 = %+v; want %+v (the first counted read parked)", rows[1], want)
	}
	if want := (signals{button: base + 10, link: base + 40, enter: base}); sigs[1] != want {
		t.Errorf("row 1 signals = %+v; want %+v", sigs[1], want)
	}
	if want := (row{}); rows[2] != want || sigs[2] != (signals{enter: base + 1}) {
		t.Errorf("row 2 = %+v %+v; want unread, enter_agent at base+1", rows[2], sigs[2])
	}
	if n := orphanCount(t, db); n != 0 {
		t.Errorf("read_orphans has %d rows after ApplyOrphans; want 0", n)
	}

	// An orphan whose row has its read but not its signal stays until the
	// signal is applied too.
	if _, err := db.ExecContext(ctx, "INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source, link_at) VALUES ('corp','m1',0,?,3,?)",
		datetime(base+50), datetime(base+50)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1 WHERE corp_id = 'corp' AND msgid = 'm1' AND uid = 0",
		datetime(base+45)); err != nil {
		t.Fatal(err)
	}
	if n, err := ApplyOrphans(ctx, db, "corp", "m1"); err != nil || n != 1 {
		t.Fatalf("ApplyOrphans = %d, %v; want 1 (the link time), nil", n, err)
	}
	rows, sigs = readRows(t, db, "corp", "m1"), signalRows(t, db, "corp", "m1")
	if rows[0] != (row{read: true, at: base + 45, source: 1}) || sigs[0] != (signals{link: base + 50}) {
		t.Errorf("row 0 = %+v %+v; want its read kept and link_at filled", rows[0], sigs[0])
	}
	if n := orphanCount(t, db); n != 0 {
		t.Errorf("read_orphans has %d rows; want 0", n)
	}
}

// TestFlusherSignals runs deltas of both versions through Kafka: version 1
// (written before signals were kept apart, still in the topic during an
// upgrade) counts, with its source as the signal; a version 2 enter_agent
// that does not count sets only enter_at; a later counted button makes
// the row read with its own time.
func TestFlusherSignals(t *testing.T) {
	e := newKafkaEnv(t, 1)
	insertRecipients(t, e.db, "corp", "m1", 0, 4)
	v1 := func(source byte, uid byte, at int64) []byte {
		b := []byte{1, source, uid}
		b = binary.AppendVarint(b, at)
		return append(b, 4, 'c', 'o', 'r', 'p', 2, 'm', '1')
	}
	e.produceRaw(t, "corp/m1", v1(2, 0, base), v1(1, 1, base+1))
	e.produce(t,
		delta.Delta{CorpID: "corp", MsgID: "m1", UID: 2, ReadTime: base + 2, Source: delta.SourceEnterAgent},
		delta.Delta{CorpID: "corp", MsgID: "m1", UID: 3, ReadTime: base + 3, Source: delta.SourceEnterAgent},
		delta.Delta{CorpID: "corp", MsgID: "m1", UID: 3, ReadTime: base + 13, Source: delta.SourceCard, Counted: true},
		delta.Delta{CorpID: "corp", MsgID: "m1", UID: 3, ReadTime: base + 13, Source: delta.SourceCard, Counted: true}, // duplicate
	)
	f := e.start(t, Options{Interval: 50 * time.Millisecond}, nil)
	want := map[uint32]row{0: {read: true, at: base, source: 2}, 1: {read: true, at: base + 1, source: 1}, 2: {}, 3: {read: true, at: base + 13, source: 1}}
	wantSignals := map[uint32]signals{0: {enter: base}, 1: {button: base + 1}, 2: {enter: base + 2}, 3: {button: base + 13, enter: base + 3}}
	testenv.WaitFor(t, 20*time.Second, "rows written", func() bool {
		sigs := signalRows(t, e.db, "corp", "m1")
		return sigs[2] == wantSignals[2] && sigs[3] == wantSignals[3]
	})
	e.waitCommittedToEnd(t)
	rows, sigs := readRows(t, e.db, "corp", "m1"), signalRows(t, e.db, "corp", "m1")
	for uid := range uint32(4) {
		if rows[uid] != want[uid] || sigs[uid] != wantSignals[uid] {
			t.Errorf("row %d = %+v %+v; want %+v %+v", uid, rows[uid], sigs[uid], want[uid], wantSignals[uid])
		}
	}
	if got := testutil.ToFloat64(f.m.malformed); got != 0 {
		t.Errorf("malformed_total = %v; want 0", got)
	}
	testenv.Check(t, "stop", f.stop(t))
}

// TestWritePageEvents: the reading page's events land in page_signals, one
// row per member, signal and version (the earliest kept), with the IP and
// User-Agent; a replay writes nothing more; an uncounted page signal
// changes no message_read_record row and parks nothing; a counted one
// (an app counting acknowledged) makes the row read with source 6.
func TestWritePageEvents(t *testing.T) {
	t.Run("without a ledger", func(t *testing.T) {
		w, _, db := newTestWriter(t)
		testWritePageEvents(t, w, db)
	})
	t.Run("with the ledger", func(t *testing.T) {
		db := testenv.MySQL(t)
		l, err := ledger.New(db, ledger.Options{})
		testenv.Check(t, "ledger", err)
		w, err := NewWriter(db, WriterOptions{Ledger: l})
		testenv.Check(t, "NewWriter", err)
		testWritePageEvents(t, w, db)
		// One signal entry (uid 2's read) and one page entry per
		// page_signals row.
		kinds := testenv.Column[string](t, db, "SELECT CONCAT(kind, ' ', count) FROM ledger_blocks ORDER BY first_seq")
		if strings.Join(kinds, ",") != "signal 1,page 7" {
			t.Errorf("ledger blocks %v; want [signal 1, page 7]", kinds)
		}
	})
}

func testWritePageEvents(t *testing.T, w *Writer, db *sql.DB) {
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 3)
	pe := func(src delta.Source, v uint32, at int64) []PageEvent {
		return []PageEvent{{Source: src, Version: v, At: at, IP: "203.0.113.9", UserAgent: "Mozilla/5.0 wxwork/4.1"}}
	}
	reads := []Read{
		{UID: 0, Link: base, Pages: pe(delta.SourceLink, 1, base)},
		{UID: 0, ReadToEnd: base + 5, Pages: pe(delta.SourceReadToEnd, 1, base+5)},
		{UID: 0, Acknowledged: base + 9, Pages: pe(delta.SourceAck, 1, base+9)},
		{UID: 0, Acknowledged: base + 99, Pages: pe(delta.SourceAck, 2, base+99)},
		{UID: 1, ReadToEnd: base + 3, Pages: pe(delta.SourceReadToEnd, 2, base+3)},
		{UID: 2, At: base + 7, Source: delta.SourceAck, Acknowledged: base + 7, Pages: pe(delta.SourceAck, 1, base+7)},
		{UID: 1, Pages: pe(delta.SourceAck, 1, base+8)}, // archived only: an ack of a version no longer material
	}
	if u, o, err := w.Write(ctx, "corp", "m1", reads); err != nil || u != 2 || o != 0 {
		t.Fatalf("Write = %d, %d, %v; want 2 (uid 0's link_at, uid 2's read), 0, nil", u, o, err)
	}
	if u, o, err := w.Write(ctx, "corp", "m1", reads); err != nil || u != 0 || o != 0 {
		t.Fatalf("replayed Write = %d, %d, %v; want 0, 0, nil", u, o, err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM page_signals WHERE corp_id = 'corp' AND msgid = 'm1'").Scan(&n); err != nil || n != 7 {
		t.Errorf("page_signals rows = %d, %v; want 7", n, err)
	}
	var ip, ua string
	var at time.Time
	if err := db.QueryRow("SELECT ip, user_agent, seen_at FROM page_signals WHERE uid = 0 AND source = 6 AND version = 2").Scan(&ip, &ua, &at); err != nil ||
		ip != "203.0.113.9" || ua != "Mozilla/5.0 wxwork/4.1" || at.Unix() != base+99 {
		t.Errorf("uid 0's ack of v2 = %q %q %v, %v; want the event", ip, ua, at, err)
	}
	var read, src int
	if err := db.QueryRow("SELECT is_read, source FROM message_read_record WHERE corp_id = 'corp' AND msgid = 'm1' AND uid = 2").Scan(&read, &src); err != nil || read != 1 || src != 6 {
		t.Errorf("uid 2's row: is_read %d source %d, %v; want 1, 6", read, src, err)
	}
	if err := db.QueryRow("SELECT is_read FROM message_read_record WHERE corp_id = 'corp' AND msgid = 'm1' AND uid = 1").Scan(&read); err != nil || read != 0 {
		t.Errorf("uid 1's row: is_read %d, %v; want 0 (read_to_end does not count for the app)", read, err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM read_orphans").Scan(&n); err != nil || n != 0 {
		t.Errorf("read_orphans = %d, %v; want 0", n, err)
	}
}

// TestPageEventsInLedgerTransaction: the page events, the read rows and
// the ledger entries of a batch commit together or not at all. Two
// failures inside the batch: the page_signals INSERT refused by MySQL (a
// trigger), and the ledger append, the last write before COMMIT. After
// either, neither the read rows nor the page_signals rows nor entries
// stay (before, the page events were written after the batch's COMMIT, so
// a failure there left reads and entries without their page events); the
// retry writes all three, and verify is clean.
func TestPageEventsInLedgerTransaction(t *testing.T) {
	pe := func(src delta.Source, v uint32, at int64) []PageEvent {
		return []PageEvent{{Source: src, Version: v, At: at, IP: "203.0.113.9", UserAgent: "Mozilla/5.0 wxwork/4.1"}}
	}
	reads := []Read{
		{UID: 0, At: base, Source: delta.SourceAck, Acknowledged: base, Pages: pe(delta.SourceAck, 1, base)},
		{UID: 1, ReadToEnd: base + 3, Pages: pe(delta.SourceReadToEnd, 1, base+3)},
		{UID: 2, At: base + 4, Source: delta.SourceCard, Button: base + 4},
	}
	const (
		pageRows = "SELECT COUNT(*) FROM page_signals WHERE corp_id = 'wwpage'"
		readRows = "SELECT COUNT(*) FROM message_read_record WHERE corp_id = 'wwpage' AND is_read = 1"
		entries  = "SELECT COALESCE(SUM(count), 0) FROM ledger_blocks WHERE corp_id = 'wwpage'"
	)
	tests := []struct {
		name string
		// fail makes the batch fail and returns the Writer's ledger
		// and the undo.
		fail func(t *testing.T, db *sql.DB, l *ledger.Ledger) (Ledger, func())
	}{
		{"page_signals insert refused", func(t *testing.T, db *sql.DB, l *ledger.Ledger) (Ledger, func()) {
			_, err := db.Exec("CREATE TRIGGER page_refused BEFORE INSERT ON page_signals FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'injected'")
			testenv.Check(t, "trigger", err)
			return l, func() {
				_, err := db.Exec("DROP TRIGGER page_refused")
				testenv.Check(t, "drop trigger", err)
			}
		}},
		{"ledger append fails", func(t *testing.T, db *sql.DB, l *ledger.Ledger) (Ledger, func()) {
			return failingLedger{}, func() {}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := testenv.MySQL(t)
			ctx := context.Background()
			_, err := db.Exec("INSERT INTO messages (corp_id, msgid, app, agent_id, sent_at, recipient_count, audience_hash, state) VALUES ('wwpage', 'm1', 'hr', 1, '2024-12-31 00:00:00', 3, '', 1)")
			testenv.Check(t, "message", err)
			insertRecipients(t, db, "wwpage", "m1", 0, 3)
			count := func(q string) int {
				var n int
				testenv.Check(t, q, db.QueryRow(q).Scan(&n))
				return n
			}
			l, err := ledger.New(db, ledger.Options{})
			testenv.Check(t, "ledger", err)
			fl, undo := tc.fail(t, db, l)
			bad, err := NewWriter(db, WriterOptions{Ledger: fl})
			testenv.Check(t, "NewWriter", err)
			if _, _, err := bad.Write(ctx, "wwpage", "m1", reads); err == nil {
				t.Fatal("Write succeeded despite the failure")
			}
			undo()
			if p, r, e := count(pageRows), count(readRows), count(entries); p != 0 || r != 0 || e != 0 {
				t.Fatalf("after the failure: %d page_signals rows, %d read rows, %d entries; want none of each", p, r, e)
			}
			w, err := NewWriter(db, WriterOptions{Ledger: l})
			testenv.Check(t, "NewWriter", err)
			if _, _, err := w.Write(ctx, "wwpage", "m1", reads); err != nil {
				t.Fatalf("Write: %v", err)
			}
			// Two signal entries (uids 0 and 2), two page entries.
			if p, r, e := count(pageRows), count(readRows), count(entries); p != 2 || r != 2 || e != 4 {
				t.Fatalf("after the retry: %d page_signals rows, %d read rows, %d entries; want 2, 2, 4", p, r, e)
			}
			rep, err := l.Verify(ctx, "wwpage", "")
			testenv.Check(t, "Verify", err)
			if len(rep.Problems) != 0 || rep.Entries != 4 || rep.Facts != 4 {
				t.Fatalf("Verify = %+v; want clean, 4 entries, 4 facts", rep)
			}
		})
	}
}

// failingLedger fails every append: the point of a batch's transaction
// after its read rows and page events are written and before COMMIT.
type failingLedger struct{}

func (failingLedger) Append(context.Context, ledger.Tx, string, []ledger.Fact) (uint64, error) {
	return 0, errors.New("injected: the ledger append fails")
}
