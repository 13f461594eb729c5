package flushd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/ledger"
)

// DB is what flushd needs from *sql.DB. It is an interface so tests can
// count statements and make MySQL fail on purpose.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
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
	opt.Logger(&opts.Logger)
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
		// Without a ledger a receipt has no entry to name (seq 0).
		if err := queueReceipts(ctx, w.db, corpID, msgID, acks(pages), time.Now()); err != nil {
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
		writeValues(&q, "INSERT IGNORE INTO page_signals (corp_id, msgid, uid, source, version, seen_at, ip, user_agent) VALUES ", "(?,?,?,?,?,?,?,?)", len(chunk))
		for _, p := range chunk {
			args = append(args, corpID, msgID, p.uid, uint8(p.Source), p.Version, datetime(p.At), p.IP, p.UserAgent)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("flushd: page events of %s/%s (%d): %w", corpID, msgID, len(chunk), err)
		}
	}
	return nil
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
