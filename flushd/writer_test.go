package flushd

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

func newTestWriter(tb testing.TB) (*Writer, *spyDB, *sql.DB) {
	tb.Helper()
	db := testenv.MySQL(tb)
	spy := &spyDB{DB: db}
	w, err := NewWriter(spy, WriterOptions{BatchSize: 0})
	testenv.Check(tb, "NewWriter", err)
	return w, spy, db
}

func TestWriteBatches(t *testing.T) {
	w, spy, db := newTestWriter(t)
	tests := []struct {
		name       string
		uids       int
		statements int
	}{
		{"one", 1, 1},
		{"just under", 4999, 1},
		{"exactly one batch", 5000, 1},
		{"one over", 5001, 2},
		{"several", 12000, 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgID := msgName(i)
			insertRecipients(t, db, "corp", msgID, 0, uint32(tt.uids))
			reads := make([]Read, tt.uids)
			for u := range reads {
				reads[u] = Read{UID: uint32(u), At: base + int64(u%600), Source: delta.Source(1 + u%4)}
			}
			before := len(spy.batches())
			updated, orphaned, err := w.Write(context.Background(), "corp", msgID, reads)
			if err != nil || updated != tt.uids || orphaned != 0 {
				t.Fatalf("Write(%d reads) = %d, %d, %v; want %d, 0, nil", tt.uids, updated, orphaned, err, tt.uids)
			}
			got := spy.batches()[before:]
			if len(got) != tt.statements {
				t.Errorf("Write(%d reads) ran %d statements %v; want %d", tt.uids, len(got), got, tt.statements)
			}
			for _, n := range got {
				if n > DefaultBatchSize {
					t.Errorf("statement of %d uids; want at most %d", n, DefaultBatchSize)
				}
			}
			rows := readRows(t, db, "corp", msgID)
			for _, r := range reads {
				want := row{read: true, at: r.At, source: uint8(r.Source)}
				if rows[r.UID] != want {
					t.Fatalf("row %d = %+v; want %+v", r.UID, rows[r.UID], want)
				}
			}
		})
	}
	if got := testutil.ToFloat64(w.m.batches); got != 8 {
		t.Errorf("yidu_flushd_batches_total = %v; want 8", got)
	}
}

func TestWriteFirstReadWins(t *testing.T) {
	w, _, db := newTestWriter(t)
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 4)
	// Unsorted, with uid 2 twice: the earlier read wins within a batch.
	reads := []Read{
		{UID: 2, At: base + 50, Source: delta.SourceEnterAgent},
		{UID: 1, At: base + 10, Source: delta.SourceCard},
		{UID: 2, At: base + 20, Source: delta.SourceCard},
	}
	if u, o, err := w.Write(ctx, "corp", "m1", reads); err != nil || u != 2 || o != 0 {
		t.Fatalf("Write = %d, %d, %v; want 2, 0, nil", u, o, err)
	}
	// A later write (a replay, or a second signal) never changes a read row.
	again := []Read{{UID: 1, At: base + 5, Source: delta.SourceLink}, {UID: 3, At: base + 30, Source: delta.SourceLink}}
	if u, o, err := w.Write(ctx, "corp", "m1", again); err != nil || u != 1 || o != 0 {
		t.Fatalf("second Write = %d, %d, %v; want 1, 0, nil", u, o, err)
	}
	// Nor does one with several times, which takes the full statement:
	// only the row's empty signal columns are filled.
	full := []Read{{UID: 2, At: base + 1, Source: delta.SourceLink, Link: base + 1, EnterAgent: base + 3}}
	if _, f := splitCompact(full); len(f) != 1 {
		t.Fatalf("%+v is compact; want the full statement", full)
	}
	if u, o, err := w.Write(ctx, "corp", "m1", full); err != nil || u != 1 || o != 0 {
		t.Fatalf("third Write = %d, %d, %v; want 1 (link_at, enter_at), 0, nil", u, o, err)
	}
	want := map[uint32]row{
		0: {},
		1: {read: true, at: base + 10, source: 1},
		2: {read: true, at: base + 20, source: 1},
		3: {read: true, at: base + 30, source: 3},
	}
	got := readRows(t, db, "corp", "m1")
	for uid, w := range want {
		if got[uid] != w {
			t.Errorf("row %d = %+v; want %+v", uid, got[uid], w)
		}
	}
}

func TestWriteOrphans(t *testing.T) {
	w, _, db := newTestWriter(t)
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 5) // uids 5..7 not registered yet
	var reads []Read
	for uid := range uint32(8) {
		reads = append(reads, Read{UID: uid, At: base + int64(uid), Source: delta.SourceCard})
	}
	if u, o, err := w.Write(ctx, "corp", "m1", reads); err != nil || u != 5 || o != 3 {
		t.Fatalf("Write = %d, %d, %v; want 5, 3, nil", u, o, err)
	}
	if got := testutil.ToFloat64(w.m.orphans); got != 3 {
		t.Errorf("yidu_flushd_orphans_total = %v; want 3", got)
	}
	// A replay keeps the first parked read_time.
	replay := []Read{{UID: 6, At: base + 100, Source: delta.SourceLink}}
	if _, o, err := w.Write(ctx, "corp", "m1", replay); err != nil || o != 1 {
		t.Fatalf("replay Write orphaned %d, %v; want 1, nil", o, err)
	}
	if n := orphanCount(t, db); n != 3 {
		t.Fatalf("read_orphans has %d rows; want 3", n)
	}
	if n, err := w.ApplyOrphans(ctx, "corp", "m1"); err != nil || n != 0 {
		t.Fatalf("ApplyOrphans before registration = %d, %v; want 0, nil", n, err)
	}
	if n := orphanCount(t, db); n != 3 {
		t.Fatalf("ApplyOrphans without rows deleted orphans: %d left; want 3", n)
	}

	// Registration writes the rows, then applies the orphans.
	insertRecipients(t, db, "corp", "m1", 5, 8)
	if n, err := ApplyOrphans(ctx, db, "corp", "m1"); err != nil || n != 3 {
		t.Fatalf("ApplyOrphans = %d, %v; want 3, nil", n, err)
	}
	got := readRows(t, db, "corp", "m1")
	for _, r := range reads {
		if want := (row{read: true, at: r.At, source: 1}); got[r.UID] != want {
			t.Errorf("row %d = %+v; want %+v", r.UID, got[r.UID], want)
		}
	}
	if n := orphanCount(t, db); n != 0 {
		t.Errorf("read_orphans has %d rows after ApplyOrphans; want 0", n)
	}
	if n, err := ApplyOrphans(ctx, db, "corp", "m1"); err != nil || n != 0 {
		t.Errorf("second ApplyOrphans = %d, %v; want 0, nil", n, err)
	}
}

// TestApplyOrphansRace: the rows appear between the Writer's SELECT and its
// INSERT; registration's ApplyOrphans runs before the orphan is parked.
// The orphan must survive registration's DELETE and be applied later.
func TestApplyOrphansRace(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	insertRecipients(t, db, "corp", "m1", 0, 2)
	if _, err := db.ExecContext(ctx, "UPDATE message_read_record SET is_read = 1, read_time = FROM_UNIXTIME(?) WHERE uid = 0", base); err != nil {
		t.Fatal(err)
	}
	// Registration ran ApplyOrphans already; now the orphans are parked:
	// uid 1 unread (must be applied), uid 0 already read (just deleted).
	if _, err := db.ExecContext(ctx, "INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source) VALUES ('corp','m1',0,?,1),('corp','m1',1,?,2)",
		datetime(base+7), datetime(base+9)); err != nil {
		t.Fatal(err)
	}
	if n, err := ApplyOrphans(ctx, db, "corp", "m1"); err != nil || n != 1 {
		t.Fatalf("ApplyOrphans = %d, %v; want 1, nil", n, err)
	}
	got := readRows(t, db, "corp", "m1")
	want := map[uint32]row{0: {read: true, at: base}, 1: {read: true, at: base + 9, source: 2}}
	for uid, w := range want {
		if got[uid] != w {
			t.Errorf("row %d = %+v; want %+v", uid, got[uid], w)
		}
	}
	if n := orphanCount(t, db); n != 0 {
		t.Errorf("read_orphans has %d rows; want 0", n)
	}
}

func TestWriteInvalid(t *testing.T) {
	spy := &spyDB{DB: nil} // never reached: invalid input writes nothing
	spy.fail.Store(true)
	w, err := NewWriter(spy, WriterOptions{BatchSize: 0})
	testenv.Check(t, "NewWriter", err)
	long := make([]byte, 129)
	for i := range long {
		long[i] = 'a'
	}
	card := func(at int64) Read { return Read{UID: 1, At: at, Source: delta.SourceCard, Button: at} }
	tests := []struct {
		name          string
		corpID, msgID string
		read          Read
	}{
		{"empty corp", "", "m1", card(base)},
		{"corp with space", "ww 1", "m1", card(base)},
		{"corp too long", string(long[:65]), "m1", card(base)},
		{"empty msgid", "corp", "", card(base)},
		{"msgid too long", "corp", string(long), card(base)},
		{"msgid quote", "corp", "m'1", card(base)},
		{"msgid non-ascii", "corp", "m\u00e91", card(base)},
		{"read_time zero", "corp", "m1", Read{UID: 1, At: 0, Source: delta.SourceCard}},
		{"read_time year 10000", "corp", "m1", card(maxReadTime + 1)},
		{"signal time year 10000", "corp", "m1", Read{UID: 1, EnterAgent: maxReadTime + 1}},
		{"signal time before 2000", "corp", "m1", Read{UID: 1, Link: minReadTime - 1}},
		{"unknown source", "corp", "m1", Read{UID: 1, At: base, Source: delta.SourceAck + 1}},
		{"page event of version 0", "corp", "m1", Read{UID: 1, Acknowledged: base, Pages: []PageEvent{{Source: delta.SourceAck, At: base}}}},
		{"page event of the card", "corp", "m1", Read{UID: 1, Button: base, Pages: []PageEvent{{Source: delta.SourceCard, Version: 1, At: base}}}},
		{"nothing to write", "corp", "m1", Read{UID: 1, At: base}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := w.Write(context.Background(), tt.corpID, tt.msgID, []Read{tt.read})
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("Write(%q, %q, %+v) = %v; want ErrInvalid", tt.corpID, tt.msgID, tt.read, err)
			}
		})
	}
	if _, err := NewWriter(spy, WriterOptions{BatchSize: MaxBatchSize + 1}); err == nil {
		t.Errorf("NewWriter(batch %d) = nil error; want the placeholder limit", MaxBatchSize+1)
	}
}

// TestUpdateStatement: the batch UPDATE binds three values whatever the
// batch size, and its JSON argument carries every read exactly, extremes
// included, with noTime for a time a read lacks.
func TestUpdateStatement(t *testing.T) {
	reads := []Read{
		{UID: 0, EnterAgent: minReadTime},
		{UID: 7, At: base, Source: delta.SourceCard, Button: base, Link: base + 1},
		{UID: math.MaxUint32, At: maxReadTime, Source: delta.SourceReconcile, EnterAgent: maxReadTime},
		{UID: 8, At: base, Source: delta.SourceUnknown, Link: base}, // At without a source is not a read
	}
	q, args := updateStatement("corp", "m1", reads)
	if marks := strings.Count(q, "?"); marks != 3 || len(args) != 3 || args[1] != "corp" || args[2] != "m1" {
		t.Fatalf("updateStatement: %d placeholders, args %v; want 3: the reads, corp, m1", marks, args[1:])
	}
	var got [][]any
	dec := json.NewDecoder(strings.NewReader(args[0].(string)))
	dec.UseNumber()
	testenv.Check(t, "decode the reads argument", dec.Decode(&got))
	if len(got) != len(reads) {
		t.Fatalf("JSON has %d reads; want %d", len(got), len(reads))
	}
	ts := func(t int64) any {
		if t == 0 {
			return noTime
		}
		return time.Unix(t, 0).UTC().Format(time.DateTime)
	}
	for i, r := range reads {
		at := r.At
		if r.Source == 0 {
			at = 0
		}
		want := []any{json.Number(strconv.FormatUint(uint64(r.UID), 10)), ts(at), json.Number(strconv.Itoa(int(r.Source))),
			ts(r.Button), ts(r.Link), ts(r.EnterAgent)}
		if !slices.Equal(got[i], want) {
			t.Errorf("read %d in JSON = %v; want %v", i, got[i], want)
		}
	}
}

// TestCompact: a read whose counted read and signal times are one time
// travels compact (that time, the counted source, the signal bits); one
// with two different times does not.
func TestCompact(t *testing.T) {
	tests := []struct {
		name   string
		r      Read
		t      int64
		source delta.Source
		bits   int
		ok     bool
	}{
		{"card press", Read{At: base, Source: delta.SourceCard, Button: base}, base, delta.SourceCard, bitButton, true},
		{"link", Read{At: base, Source: delta.SourceLink, Link: base}, base, delta.SourceLink, bitLink, true},
		{"app entry that counts", Read{At: base, Source: delta.SourceEnterAgent, EnterAgent: base}, base, delta.SourceEnterAgent, bitEnter, true},
		{"app entry that does not count", Read{EnterAgent: base}, base, 0, bitEnter, true},
		{"reconcile: a read, no signal", Read{At: base, Source: delta.SourceReconcile}, base, delta.SourceReconcile, 0, true},
		{"three signals at once", Read{Button: base, Link: base, EnterAgent: base}, base, 0, bitButton | bitLink | bitEnter, true},
		{"counted read and a later entry", Read{At: base, Source: delta.SourceCard, Button: base, EnterAgent: base + 1}, 0, 0, 0, false},
		{"read time apart from its signal", Read{At: base, Source: delta.SourceCard, Button: base + 1}, 0, 0, 0, false},
		{"two uncounted signals apart", Read{Link: base + 2, EnterAgent: base}, 0, 0, 0, false},
		{"nothing", Read{}, 0, 0, 0, false},
	}
	for _, tt := range tests {
		gt, gs, gb, ok := tt.r.compact()
		if gt != tt.t || gs != tt.source || gb != tt.bits || ok != tt.ok {
			t.Errorf("%s: %+v.compact() = %d, %d, %d, %v; want %d, %d, %d, %v", tt.name, tt.r, gt, gs, gb, ok, tt.t, tt.source, tt.bits, tt.ok)
		}
	}
}

// TestCompactStatement: the compact UPDATE binds three values and its JSON
// carries each read as [uid, "time", source, bits], extremes included.
func TestCompactStatement(t *testing.T) {
	reads := []Read{
		{UID: 0, EnterAgent: minReadTime},
		{UID: 7, At: base, Source: delta.SourceCard, Button: base},
		{UID: 9, Link: base + 1, EnterAgent: base + 1},
		{UID: math.MaxUint32, At: maxReadTime, Source: delta.SourceReconcile},
	}
	q, args := compactStatement("corp", "m1", reads)
	if marks := strings.Count(q, "?"); marks != 3 || len(args) != 3 || args[1] != "corp" || args[2] != "m1" {
		t.Fatalf("compactStatement: %d placeholders, args %v; want 3: the reads, corp, m1", marks, args[1:])
	}
	want := `[[0,"1000-01-01 00:00:00",0,4],[7,"2025-01-01 00:00:00",1,1],[9,"2025-01-01 00:00:01",0,6],[4294967295,"9999-12-31 23:59:59",4,0]]`
	want = strings.Replace(want, "1000-01-01 00:00:00", datetime(minReadTime), 1)
	if args[0] != want {
		t.Errorf("compactStatement binds %s; want %s", args[0], want)
	}
	if !json.Valid([]byte(args[0].(string))) {
		t.Errorf("compactStatement binds invalid JSON %s", args[0])
	}
}

// TestWriteSplitsByShape: a batch whose reads each have one time is one
// compact UPDATE; reads with several times go in a second, full one, and
// every row gets what its read carries.
func TestWriteSplitsByShape(t *testing.T) {
	db := testenv.MySQL(t)
	spy := &spyDB{DB: db}
	w, err := NewWriter(spy, WriterOptions{})
	testenv.Check(t, "NewWriter", err)
	insertRecipients(t, db, "corp", "shapes", 0, 6)
	before := len(spy.batches())
	reads := []Read{
		{UID: 0, At: base, Source: delta.SourceCard, Button: base},
		{UID: 1, At: base + 1, Source: delta.SourceCard, Button: base + 1, EnterAgent: base + 5},
		{UID: 2, EnterAgent: base + 2},
		{UID: 3, At: base + 3, Source: delta.SourceLink, Link: base + 3, Button: base + 4},
	}
	if u, o, err := w.Write(context.Background(), "corp", "shapes", reads); err != nil || u != 4 || o != 0 {
		t.Fatalf("Write(mixed) = %d, %d, %v; want 4, 0, nil", u, o, err)
	}
	if got := spy.batches()[before:]; !slices.Equal(got, []int{2, 2}) {
		t.Errorf("Write(mixed) ran UPDATEs of %v uids; want [2 2] (compact, then full)", got)
	}
	before = len(spy.batches())
	if u, _, err := w.Write(context.Background(), "corp", "shapes", []Read{{UID: 4, At: base, Source: delta.SourceCard, Button: base}, {UID: 5, Link: base}}); err != nil || u != 2 {
		t.Fatalf("Write(compact) = %d, %v; want 2, nil", u, err)
	}
	if got := spy.batches()[before:]; !slices.Equal(got, []int{2}) {
		t.Errorf("Write(compact) ran UPDATEs of %v uids; want [2]", got)
	}
	checkFullRows(t, db, "shapes", map[uint32]string{
		0: "read 0 src 1 button 0",
		1: "read 1 src 1 button 1 enter 5",
		2: "unread enter 2",
		3: "read 3 src 3 button 4 link 3",
		4: "read 0 src 1 button 0",
		5: "unread link 0",
	})
}

func orphanCount(tb testing.TB, db *sql.DB) int {
	tb.Helper()
	var n int
	testenv.Check(tb, "count orphans", db.QueryRow("SELECT COUNT(*) FROM read_orphans").Scan(&n))
	return n
}

// TestWriteMaxBatch runs the largest statements MySQL must accept: an
// UPDATE of MaxBatchSize uids and the INSERT parking them all as orphans.
func TestWriteMaxBatch(t *testing.T) {
	db := testenv.MySQL(t)
	w, err := NewWriter(db, WriterOptions{BatchSize: MaxBatchSize})
	testenv.Check(t, "NewWriter", err)
	reads := make([]Read, MaxBatchSize)
	for i := range reads {
		reads[i] = Read{UID: uint32(i), At: base + int64(i), Source: delta.SourceCard}
	}
	ctx := context.Background()
	if u, o, err := w.Write(ctx, "corp", "m1", reads); err != nil || u != 0 || o != MaxBatchSize {
		t.Fatalf("Write(%d reads, no rows) = %d, %d, %v; want 0, %d, nil", MaxBatchSize, u, o, err, MaxBatchSize)
	}
	insertRecipients(t, db, "corp", "m1", 0, MaxBatchSize)
	if n, err := w.ApplyOrphans(ctx, "corp", "m1"); err != nil || n != MaxBatchSize {
		t.Fatalf("ApplyOrphans = %d, %v; want %d, nil", n, err, MaxBatchSize)
	}
	if n := countRead(t, db); n != MaxBatchSize {
		t.Errorf("%d rows read; want %d", n, MaxBatchSize)
	}
}
