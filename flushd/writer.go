package flushd

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/ledger"
)

// DB is what flushd needs from *sql.DB. It is an interface so tests can
// count statements and make MySQL fail on purpose.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Read is what flushd writes for recipient UID of a message: its first
// read that counts, if any, and the first time of each signal. Times are
// unix seconds.
type Read struct {
	UID uint32
	// At and Source are the first read that counts (is_read, read_time,
	// source); Source 0: no counted read, only signal times.
	At     int64
	Source delta.Source
	// Button, Link and EnterAgent are the first time of each signal,
	// counted or not (button_at, link_at, enter_at); 0: not seen.
	Button, Link, EnterAgent int64
	// ReadToEnd and Acknowledged are the first time of the reading page's
	// signals (issue 39), of any version; 0: not seen. message_read_record
	// has no column for them: their facts are Pages, in page_signals.
	ReadToEnd, Acknowledged int64
	// Pages are the reading page's events behind the read (delta version
	// 4), one per signal and version, the earliest of each kept.
	Pages []PageEvent
}

// PageEvent is a reading page's event as page_signals keeps it.
type PageEvent struct {
	Source  delta.Source
	Version uint32
	At      int64
	IP      string
	// UserAgent is at most delta.MaxField bytes.
	UserAgent string
}

// signal returns r's field for signal sig.
func (r *Read) signal(sig yidu.Signal) *int64 {
	switch sig {
	case yidu.SignalButton:
		return &r.Button
	case yidu.SignalLink:
		return &r.Link
	case yidu.SignalEnterAgent:
		return &r.EnterAgent
	case yidu.SignalReadToEnd:
		return &r.ReadToEnd
	case yidu.SignalAcknowledged:
		return &r.Acknowledged
	}
	panic(fmt.Sprintf("flushd: invalid signal %d", sig))
}

// readOf returns what delta d asks to write: a counted read if it counts,
// and its signal's time (a reconcile delta has none).
func readOf(d delta.Delta) Read {
	r := Read{UID: d.UID}
	if d.Counted {
		r.At, r.Source = d.ReadTime, d.Source
	}
	if sig, ok := d.Source.Signal(); ok && !d.Page.ArchiveOnly {
		*r.signal(sig) = d.ReadTime
	}
	if d.Page.Version != 0 {
		r.Pages = []PageEvent{{Source: d.Source, Version: d.Page.Version, At: d.ReadTime, IP: d.Page.IP, UserAgent: d.Page.UserAgent}}
	}
	return r
}

// merge folds o (of the same uid) into r, keeping the earliest counted read
// and the earliest time of each signal.
func (r *Read) merge(o Read) {
	if o.Source != 0 && (r.Source == 0 || o.At < r.At) {
		r.At, r.Source = o.At, o.Source
	}
	for _, sig := range yidu.Signals() {
		if t := *o.signal(sig); t != 0 {
			if p := r.signal(sig); *p == 0 || t < *p {
				*p = t
			}
		}
	}
	for _, e := range o.Pages {
		i := slices.IndexFunc(r.Pages, func(p PageEvent) bool { return p.Source == e.Source && p.Version == e.Version })
		switch {
		case i < 0:
			r.Pages = append(r.Pages, e)
		case e.At < r.Pages[i].At:
			r.Pages[i] = e
		}
	}
}

// onRecord reports whether r has something for its message_read_record
// row: a counted read or a time of a signal with a column there.
func (r Read) onRecord() bool {
	return r.Source != 0 || r.Button != 0 || r.Link != 0 || r.EnterAgent != 0
}

// check reports whether r can be stored: a counted read of a known source
// or a signal time, every time within DATETIME's years.
func (r Read) check() error {
	empty := r.Source == 0
	if r.Source != 0 {
		if r.Source > delta.SourceAck {
			return fmt.Errorf("%w: uid %d: source %d", ErrInvalid, r.UID, r.Source)
		}
		if err := checkTime(r.UID, "read_time", r.At); err != nil {
			return err
		}
	}
	for _, sig := range yidu.Signals() {
		if t := *r.signal(sig); t != 0 {
			empty = false
			if err := checkTime(r.UID, sig.String(), t); err != nil {
				return err
			}
		}
	}
	for _, p := range r.Pages {
		empty = false
		if !p.Source.Page() || p.Version == 0 || len(p.IP) > 64 || len(p.UserAgent) > delta.MaxField {
			return fmt.Errorf("%w: uid %d: page event %d of version %d", ErrInvalid, r.UID, p.Source, p.Version)
		}
		if err := checkTime(r.UID, "page event", p.At); err != nil {
			return err
		}
	}
	if empty {
		return fmt.Errorf("%w: uid %d: nothing to write", ErrInvalid, r.UID)
	}
	return nil
}

func checkTime(uid uint32, what string, t int64) error {
	if t < minReadTime || t > maxReadTime {
		return fmt.Errorf("%w: uid %d: %s %d out of range", ErrInvalid, uid, what, t)
	}
	return nil
}

// DefaultBatchSize is the number of uids per statement when Options leave
// it out.
const DefaultBatchSize = 5000

// MaxBatchSize is the largest batch: the orphan SELECT binds one
// placeholder per uid (MySQL allows 65535 per statement; the UPDATE binds
// 3 in all, parking binds 8 per orphan in statements of at most
// maxParkRows). It stays the limit of releases that parked every batch in
// one statement of 5 placeholders per uid, so no configuration that
// loaded before stops loading (Options.Validate is the one check).
const MaxBatchSize = (65535 - 2) / 5

// maxParkRows is the most orphans one INSERT parks (8 placeholders each).
const maxParkRows = 65535 / 8

// ErrInvalid marks a read or identifier that MySQL cannot store; retrying
// it never helps.
var ErrInvalid = errors.New("flushd: invalid read")

// DATETIME holds years 1000..9999; yidu only ever sees times after 2000.
const (
	minReadTime = 946684800    // 2000-01-01T00:00:00Z
	maxReadTime = 253402300799 // 9999-12-31T23:59:59Z
)

// Writer writes reads of one message into message_read_record in batches of
// at most its batch size, one statement per batch.
type Writer struct {
	db        DB
	ledger    Ledger
	lockFirst bool
	batchSize int
	stmt      Statement
	logger    *slog.Logger
	m         *metrics
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// BatchSize is the most uids per statement (0: DefaultBatchSize; at
	// most MaxBatchSize).
	BatchSize int
	// Statement is the batch UPDATE's form (zero: StatementJSONTable);
	// StatementFor picks it for a server.
	Statement Statement
	// Logger receives the Writer's logs (nil: discarded).
	Logger *slog.Logger
	// Registerer receives its metrics (nil: registered nowhere).
	Registerer prometheus.Registerer
	// Ledger and LockFirst: see Options.
	Ledger    Ledger
	LockFirst bool
}

// NewWriter returns a Writer on db.
func NewWriter(db DB, opts WriterOptions) (*Writer, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(db, opts.BatchSize, opts.Statement, opts.Logger.With("component", "flushd"), m)
	if err != nil {
		return nil, err
	}
	w.lockFirst = opts.LockFirst
	return w, w.setLedger(opts.Ledger)
}

func newWriter(db DB, batchSize int, stmt Statement, logger *slog.Logger, m *metrics) (*Writer, error) {
	if batchSize == 0 {
		batchSize = DefaultBatchSize
	}
	if batchSize < 1 || batchSize > MaxBatchSize {
		return nil, fmt.Errorf("flushd: batch size %d must be in 1..%d", batchSize, MaxBatchSize)
	}
	if stmt != StatementJSONTable && stmt != StatementCase {
		return nil, fmt.Errorf("flushd: unknown statement form %v", stmt)
	}
	return &Writer{db: db, batchSize: batchSize, stmt: stmt, logger: logger, m: m}, nil
}

// Write writes reads of message (corpID, msgID), keeping each uid's
// earliest counted read and earliest time of each signal, with one UPDATE
// per batch of uids: a counted read marks an unread row read (is_read,
// read_time, source), a signal time fills that signal's column if still
// empty. What a row already has is left alone. Reads without a recipient
// row are parked in read_orphans. updated counts rows changed, orphaned
// the reads parked. On error the earlier batches stay written, which a
// retry of the same reads tolerates.
func (w *Writer) Write(ctx context.Context, corpID, msgID string, reads []Read) (updated, orphaned int, err error) {
	if err := checkMessage(corpID, msgID); err != nil {
		return 0, 0, err
	}
	reads = firstReads(reads)
	for _, r := range reads {
		if err := r.check(); err != nil {
			return 0, 0, err
		}
	}
	size := w.batchSize
	if w.stmt == StatementCase {
		size = min(size, maxCaseBatch)
	}
	if w.ledger != nil {
		// Each batch's page events are written in its transaction, with
		// their ledger entries.
		for batch := range slices.Chunk(reads, size) {
			rec, pages := splitPages(batch)
			u, o, err := w.writeLedgered(ctx, corpID, msgID, rec, pages)
			updated += u
			orphaned += o
			if err != nil {
				return updated, orphaned, err
			}
		}
		return updated, orphaned, nil
	}
	reads, pages := splitPages(reads)
	for chunk := range slices.Chunk(reads, size) {
		u, o, err := w.writeBatch(ctx, corpID, msgID, chunk)
		updated += u
		orphaned += o
		if err != nil {
			return updated, orphaned, err
		}
	}
	if len(pages) > 0 {
		if err := w.writePages(ctx, w.db, corpID, msgID, pages); err != nil {
			return updated, orphaned, err
		}
	}
	return updated, orphaned, nil
}

// pageRow is a page event of one member.
type pageRow struct {
	uid uint32
	PageEvent
}

// splitPages returns the reads with something for message_read_record
// and the page events of all of them. When no read carries a page event
// (every card storm) it returns reads itself and no copy.
func splitPages(reads []Read) ([]Read, []pageRow) {
	var pages []pageRow
	onRecord := true
	for _, r := range reads {
		for _, p := range r.Pages {
			pages = append(pages, pageRow{r.UID, p})
		}
		onRecord = onRecord && r.onRecord()
	}
	if onRecord {
		return reads, pages
	}
	out := make([]Read, 0, len(reads))
	for _, r := range reads {
		if r.onRecord() {
			out = append(out, r)
		}
	}
	return out, pages
}

// maxPageRows is the most page events one INSERT writes (8 placeholders
// each).
const maxPageRows = 1000

// writePages keeps page events in page_signals, one row per member,
// signal and version; a row already there (a replay, a repeated event)
// stays as it is. The page checked the reader is a recipient before it
// recorded the event.
func (w *Writer) writePages(ctx context.Context, db DB, corpID, msgID string, pages []pageRow) error {
	for chunk := range slices.Chunk(pages, maxPageRows) {
		var q strings.Builder
		args := make([]any, 0, 8*len(chunk))
		q.WriteString("INSERT IGNORE INTO page_signals (corp_id, msgid, uid, source, version, seen_at, ip, user_agent) VALUES ")
		for i, p := range chunk {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?,?,?,?,?,?,?)")
			args = append(args, corpID, msgID, p.uid, uint8(p.Source), p.Version, datetime(p.At), p.IP, p.UserAgent)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("flushd: page events of %s/%s (%d): %w", corpID, msgID, len(chunk), err)
		}
	}
	return nil
}

// firstReads returns reads sorted by uid with one Read per uid, merged
// (Read.merge). Sorted uids walk the primary key in order. The Flusher's
// batches are already sorted and unique, so they are not copied.
func firstReads(reads []Read) []Read {
	sorted := true
	for i := 1; i < len(reads); i++ {
		if reads[i-1].UID >= reads[i].UID {
			sorted = false
			break
		}
	}
	if sorted {
		return reads
	}
	reads = slices.Clone(reads)
	slices.SortStableFunc(reads, func(a, b Read) int { return cmp.Compare(a.UID, b.UID) })
	out := reads[:0]
	for _, r := range reads {
		if n := len(out); n > 0 && out[n-1].UID == r.UID {
			out[n-1].merge(r)
			continue
		}
		out = append(out, r)
	}
	return out
}

func (w *Writer) writeBatch(ctx context.Context, corpID, msgID string, reads []Read) (updated, orphaned int, err error) {
	return w.writeOn(ctx, w.db, nil, corpID, msgID, reads)
}

// writeOn runs a batch's statements on db; facts, when not nil, gathers
// the ledger facts of parked reads applied on the way (see park).
func (w *Writer) writeOn(ctx context.Context, db DB, facts *[]ledger.Fact, corpID, msgID string, reads []Read) (updated, orphaned int, err error) {
	if w.stmt == StatementCase {
		return w.exec(ctx, db, facts, corpID, msgID, reads, caseStatement)
	}
	// Reads with one time (nearly all: a delta carries one signal) take
	// the compact statement, the few with several the full one.
	compact, full := splitCompact(reads)
	for _, part := range []struct {
		reads []Read
		build func(corpID, msgID string, reads []Read) (string, []any)
	}{{compact, compactStatement}, {full, updateStatement}} {
		if len(part.reads) == 0 {
			continue
		}
		u, o, err := w.exec(ctx, db, facts, corpID, msgID, part.reads, part.build)
		updated += u
		orphaned += o
		if err != nil {
			return updated, orphaned, err
		}
	}
	return updated, orphaned, nil
}

// exec runs the statement build makes of reads and parks the reads
// without a recipient row.
func (w *Writer) exec(ctx context.Context, db DB, facts *[]ledger.Fact, corpID, msgID string, reads []Read, build func(corpID, msgID string, reads []Read) (string, []any)) (updated, orphaned int, err error) {
	query, args := build(corpID, msgID, reads)
	start := time.Now()
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, 0, fmt.Errorf("flushd: update %s/%s (%d uids): %w", corpID, msgID, len(reads), err)
	}
	w.m.latency.Observe(time.Since(start).Seconds())
	w.m.batches.Inc()
	w.m.rows.Observe(float64(len(reads)))
	n, err := res.RowsAffected()
	if err != nil {
		return 0, 0, fmt.Errorf("flushd: update %s/%s: rows affected: %w", corpID, msgID, err)
	}
	w.m.updated.Add(float64(n))
	if int(n) == len(reads) {
		return int(n), 0, nil
	}
	// Fewer rows changed than uids: some had it all before (a replay) or
	// have no row yet. Only the latter must be kept.
	orphaned, err = w.park(ctx, db, facts, corpID, msgID, reads)
	return int(n), orphaned, err
}

// Signal bits of a compact read (compactStatement): which signal columns
// take its time.
const (
	bitButton = 1
	bitLink   = 2
	bitEnter  = 4
)

// compact returns r as one time t, the counted source (0: none) and the
// signal bits whose columns take t; ok is false when r has two different
// times (its counted read and a signal, or two signals).
func (r Read) compact() (t int64, source delta.Source, bits int, ok bool) {
	if r.Source != 0 {
		t, source = r.At, r.Source
	}
	for _, c := range [...]struct {
		at  int64
		bit int
	}{{r.Button, bitButton}, {r.Link, bitLink}, {r.EnterAgent, bitEnter}} {
		switch {
		case c.at == 0:
		case t == 0 || c.at == t:
			t, bits = c.at, bits|c.bit
		default:
			return 0, 0, 0, false
		}
	}
	return t, source, bits, t != 0
}

// splitCompact returns the reads of one time and the others, each in
// uid order. When every read is compact (the usual batch) it returns
// reads itself and no copy.
func splitCompact(reads []Read) (compact, full []Read) {
	i := 0
	for i < len(reads) {
		if _, _, _, ok := reads[i].compact(); !ok {
			break
		}
		i++
	}
	if i == len(reads) {
		return reads, nil
	}
	compact = slices.Clone(reads[:i])
	for _, r := range reads[i:] {
		if _, _, _, ok := r.compact(); ok {
			compact = append(compact, r)
		} else {
			full = append(full, r)
		}
	}
	return compact, full
}

// compactStatement is the batch UPDATE of reads of one time each
// (Read.compact; see the package doc): a read travels as [uid, "time",
// source, signal bits] (bitButton | bitLink | bitEnter), so MySQL parses
// one DATETIME a read instead of updateStatement's four (three of them
// noTime in a storm of card presses). On MariaDB 10.11 the same 50,000
// card presses took 70-75 % of the full form's time
// (BenchmarkFlushInterleaved, %full). Its guards and RowsAffected are the
// full form's; each assignment reads only its own column's old value (and
// d).
func compactStatement(corpID, msgID string, reads []Read) (string, []any) {
	return compactQuery, []any{compactJSON(reads), corpID, msgID}
}

const compactQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', t DATETIME PATH '$[1]', src INT UNSIGNED PATH '$[2]', sig INT UNSIGNED PATH '$[3]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = IF(d.src > 0, 1, r.is_read)," +
	" r.read_time = IF(r.read_time IS NULL AND d.src > 0, d.t, r.read_time)," +
	" r.source = IF(r.source = 0, d.src, r.source)," +
	" r.button_at = IF(r.button_at IS NULL AND (d.sig & 1) > 0, d.t, r.button_at)," +
	" r.link_at = IF(r.link_at IS NULL AND (d.sig & 2) > 0, d.t, r.link_at)," +
	" r.enter_at = IF(r.enter_at IS NULL AND (d.sig & 4) > 0, d.t, r.enter_at)" +
	" WHERE (r.is_read = 0 AND d.src > 0)" +
	" OR (r.button_at IS NULL AND (d.sig & 1) > 0)" +
	" OR (r.link_at IS NULL AND (d.sig & 2) > 0)" +
	" OR (r.enter_at IS NULL AND (d.sig & 4) > 0)"

// compactJSON encodes compact reads as [[uid,"time",source,bits],…].
func compactJSON(reads []Read) string {
	const row = `[4294967295,"2006-01-02 15:04:05",4,7],`
	b := make([]byte, 0, 2+len(reads)*len(row))
	b = append(b, '[')
	for i, r := range reads {
		if i > 0 {
			b = append(b, ',')
		}
		t, source, bits, _ := r.compact()
		b = appendRead(b, r.UID, t, source)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(bits), 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// updateStatement builds the full batch UPDATE, for reads with several
// times (compactStatement takes the others): the reads travel as one JSON
// array of [uid, "read_time", source, "button_at", "link_at", "enter_at"]
// bound to a single placeholder, and JSON_TABLE turns it into rows that
// are joined to their recipient rows by primary key. See the package doc
// for the measurements behind it.
//
// STRAIGHT_JOIN fixes the plan: JSON_TABLE first, then one primary-key
// lookup per uid. The other order re-reads the JSON for every recipient row
// of the message (MariaDB 10.11 took 18 s for 5000 uids on a 50,000-row
// message); optimizers choose it when they think the message is small.
//
// A time the read lacks is noTime, not JSON null: go-mysql-server (the
// demo's MySQL) refuses a NULL from JSON_TABLE in an UPDATE. Each
// assignment reads only its own column's old value (and d): MySQL
// documents no order for a multi-table UPDATE's assignments, so none may
// see another's new value. read_time and source are guarded by being
// empty, which is is_read = 0 (they are only ever set together with it).
func updateStatement(corpID, msgID string, reads []Read) (string, []any) {
	return updateQuery, []any{readsJSON(reads), corpID, msgID}
}

// updatePrefix starts every batch UPDATE (tests count statements by it).
const updatePrefix = "UPDATE JSON_TABLE("

// noTime stands for "no such time" in the JSON: below every time flushd
// accepts (minReadTime).
const noTime = "1000-01-01 00:00:00"

// The JSON_TABLE columns are named apart from message_read_record's, and
// src is INT: go-mysql-server reads a JSON 0 into TINYINT UNSIGNED as 255.
const updateQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', read_at DATETIME PATH '$[1]', src INT UNSIGNED PATH '$[2]', " +
	"button DATETIME PATH '$[3]', link DATETIME PATH '$[4]', enter DATETIME PATH '$[5]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = IF(d.src > 0, 1, r.is_read)," +
	" r.read_time = IF(r.read_time IS NULL AND d.src > 0, d.read_at, r.read_time)," +
	" r.source = IF(r.source = 0, d.src, r.source)," +
	" r.button_at = IF(r.button_at IS NULL AND d.button > '" + noTime + "', d.button, r.button_at)," +
	" r.link_at = IF(r.link_at IS NULL AND d.link > '" + noTime + "', d.link, r.link_at)," +
	" r.enter_at = IF(r.enter_at IS NULL AND d.enter > '" + noTime + "', d.enter, r.enter_at)" +
	" WHERE (r.is_read = 0 AND d.src > 0)" +
	" OR (r.button_at IS NULL AND d.button > '" + noTime + "')" +
	" OR (r.link_at IS NULL AND d.link > '" + noTime + "')" +
	" OR (r.enter_at IS NULL AND d.enter > '" + noTime + "')"

// readsJSON encodes reads as [[uid,"read_time",source,"button_at",
// "link_at","enter_at"],…], noTime for a time a read lacks. Every value is
// a number or a fixed-format time, so nothing needs escaping.
func readsJSON(reads []Read) string {
	const row = `[4294967295,"2006-01-02 15:04:05",4,"2006-01-02 15:04:05","2006-01-02 15:04:05","2006-01-02 15:04:05"],`
	b := make([]byte, 0, 2+len(reads)*len(row))
	b = append(b, '[')
	for i, r := range reads {
		if i > 0 {
			b = append(b, ',')
		}
		at := r.At
		if r.Source == 0 {
			at = 0
		}
		b = appendRead(b, r.UID, at, r.Source)
		for _, t := range [...]int64{r.Button, r.Link, r.EnterAgent} {
			b = append(b, ',')
			b = appendTime(b, t)
		}
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// appendRead appends the start of a read's row, `[uid,"read_time",source`.
func appendRead(b []byte, uid uint32, at int64, source delta.Source) []byte {
	b = append(b, '[')
	b = strconv.AppendUint(b, uint64(uid), 10)
	b = append(b, ',')
	b = appendTime(b, at)
	b = append(b, ',')
	return strconv.AppendUint(b, uint64(source), 10)
}

// appendTime appends unix seconds t as a quoted DATETIME literal in UTC,
// or noTime for 0.
func appendTime(b []byte, t int64) []byte {
	b = append(b, '"')
	if t == 0 {
		b = append(b, noTime...)
	} else {
		b = time.Unix(t, 0).UTC().AppendFormat(b, time.DateTime)
	}
	return append(b, '"')
}

// datetime formats unix seconds as a UTC DATETIME literal, so the stored
// value does not depend on the DSN's loc or the session time_zone.
func datetime(unix int64) string {
	return time.Unix(unix, 0).UTC().Format(time.DateTime)
}

// nullTime is datetime(unix), or NULL for 0.
func nullTime(unix int64) any {
	if unix == 0 {
		return nil
	}
	return datetime(unix)
}

// parkStatement keeps orphans in read_orphans. A uid parked before keeps
// what it has and gains what it lacked (its first counted read, each
// signal's first time), as the batch UPDATE would; each assignment reads
// only its own column's old value. (go-mysql-server takes VALUES() only
// in an INSERT … VALUES, not after a SELECT from JSON_TABLE.)
func parkStatement(corpID, msgID string, orphans []Read) (string, []any) {
	var q strings.Builder
	args := make([]any, 0, 8*len(orphans))
	q.WriteString("INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source, button_at, link_at, enter_at) VALUES ")
	for i, r := range orphans {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?,?,?,?)")
		var at any
		if r.Source != 0 {
			at = datetime(r.At)
		}
		args = append(args, corpID, msgID, r.UID, at, uint8(r.Source), nullTime(r.Button), nullTime(r.Link), nullTime(r.EnterAgent))
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE read_time = COALESCE(read_time, VALUES(read_time))," +
		" source = IF(source = 0, VALUES(source), source)," +
		" button_at = COALESCE(button_at, VALUES(button_at))," +
		" link_at = COALESCE(link_at, VALUES(link_at))," +
		" enter_at = COALESCE(enter_at, VALUES(enter_at))")
	return q.String(), args
}

// park finds the reads without a recipient row and keeps them in
// read_orphans, then applies orphans of the message in case the rows
// appeared meanwhile (see the package doc).
func (w *Writer) park(ctx context.Context, db DB, facts *[]ledger.Fact, corpID, msgID string, reads []Read) (int, error) {
	var q strings.Builder
	args := make([]any, 0, len(reads)+2)
	q.WriteString("SELECT uid FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid IN (")
	args = appendUIDs(&q, append(args, corpID, msgID), reads)
	q.WriteByte(')')
	rows, err := db.QueryContext(ctx, q.String(), args...)
	if err != nil {
		return 0, fmt.Errorf("flushd: find orphans of %s/%s: %w", corpID, msgID, err)
	}
	exists := make(map[uint32]bool, len(reads))
	for rows.Next() {
		var uid uint32
		if err := rows.Scan(&uid); err != nil {
			rows.Close()
			return 0, fmt.Errorf("flushd: find orphans of %s/%s: %w", corpID, msgID, err)
		}
		exists[uid] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("flushd: find orphans of %s/%s: %w", corpID, msgID, err)
	}
	if len(exists) == len(reads) {
		return 0, nil
	}

	var orphans []Read
	for _, r := range reads {
		if !exists[r.UID] {
			orphans = append(orphans, r)
		}
	}
	n := len(orphans)
	for chunk := range slices.Chunk(orphans, maxParkRows) {
		q, args := parkStatement(corpID, msgID, chunk)
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return 0, fmt.Errorf("flushd: park %d orphans of %s/%s: %w", len(chunk), corpID, msgID, err)
		}
	}
	w.m.orphans.Add(float64(n))
	w.logger.Warn("reads parked without a recipient row", "corp_id", corpID, "msgid", msgID, "orphans", n)
	if facts != nil {
		f, err := orphanFacts(ctx, db, corpID, msgID)
		if err != nil {
			return n, err
		}
		*facts = append(*facts, f...)
	}
	if _, err := ApplyOrphans(ctx, db, corpID, msgID); err != nil {
		return n, err
	}
	return n, nil
}

// ApplyOrphans applies the parked reads of message (corpID, msgID) whose
// recipient rows now exist; see the package-level ApplyOrphans.
func (w *Writer) ApplyOrphans(ctx context.Context, corpID, msgID string) (applied int, err error) {
	if w.ledger != nil {
		if db, ok := w.db.(*sql.DB); ok {
			return ApplyOrphansLedgered(ctx, db, w.ledger, corpID, msgID)
		}
	}
	return ApplyOrphans(ctx, w.db, corpID, msgID)
}

// ApplyOrphans writes the parked reads of message (corpID, msgID) whose
// recipient rows now exist into those rows, in one UPDATE, as the batch
// UPDATE would (a counted read marks an unread row read, a signal time
// fills an empty column), then deletes the orphans whose rows hold all they
// carry. Registration calls it after writing the message's recipient
// rows. An orphan with something its row still lacks is kept, so a
// concurrent park is never deleted before it is applied. applied counts
// the rows changed.
func ApplyOrphans(ctx context.Context, db DB, corpID, msgID string) (applied int, err error) {
	res, err := db.ExecContext(ctx, `UPDATE message_read_record r
JOIN read_orphans o ON o.corp_id = r.corp_id AND o.msgid = r.msgid AND o.uid = r.uid
SET r.is_read = IF(o.source > 0, 1, r.is_read),
    r.read_time = IF(r.read_time IS NULL AND o.source > 0, o.read_time, r.read_time),
    r.source = IF(r.source = 0, o.source, r.source),
    r.button_at = COALESCE(r.button_at, o.button_at),
    r.link_at = COALESCE(r.link_at, o.link_at),
    r.enter_at = COALESCE(r.enter_at, o.enter_at)
WHERE r.corp_id = ? AND r.msgid = ? AND (
    (r.is_read = 0 AND o.source > 0)
    OR (r.button_at IS NULL AND o.button_at IS NOT NULL)
    OR (r.link_at IS NULL AND o.link_at IS NOT NULL)
    OR (r.enter_at IS NULL AND o.enter_at IS NOT NULL))`, corpID, msgID)
	if err != nil {
		return 0, fmt.Errorf("flushd: apply orphans of %s/%s: %w", corpID, msgID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("flushd: apply orphans of %s/%s: %w", corpID, msgID, err)
	}
	if _, err := db.ExecContext(ctx, `DELETE o FROM read_orphans o
JOIN message_read_record r ON r.corp_id = o.corp_id AND r.msgid = o.msgid AND r.uid = o.uid
WHERE o.corp_id = ? AND o.msgid = ?
  AND (o.source = 0 OR r.is_read = 1)
  AND (o.button_at IS NULL OR r.button_at IS NOT NULL)
  AND (o.link_at IS NULL OR r.link_at IS NOT NULL)
  AND (o.enter_at IS NULL OR r.enter_at IS NOT NULL)`, corpID, msgID); err != nil {
		return int(n), fmt.Errorf("flushd: delete applied orphans of %s/%s: %w", corpID, msgID, err)
	}
	return int(n), nil
}

// checkMessage rejects identifiers that can name no message (yidu.CorpID
// and yidu.MsgID: the rules registration enforces), so no row can match
// and MySQL would only be asked in vain on every retry.
func checkMessage(corpID, msgID string) error {
	if !yidu.CorpID(corpID).Valid() {
		return fmt.Errorf("%w: corp_id %q", ErrInvalid, yidu.Truncate(corpID, 70))
	}
	if !yidu.MsgID(msgID).Valid() {
		return fmt.Errorf("%w: msgid %q", ErrInvalid, yidu.Truncate(msgID, 130))
	}
	return nil
}

// checkDelta reports whether d can ever be written (see checkMessage).
func checkDelta(d delta.Delta) error {
	if err := checkMessage(d.CorpID, d.MsgID); err != nil {
		return err
	}
	if d.ReadTime < minReadTime || d.ReadTime > maxReadTime {
		return fmt.Errorf("%w: read_time %d out of range", ErrInvalid, d.ReadTime)
	}
	return readOf(d).check()
}
