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
)

// DB is what flushd needs from *sql.DB. It is an interface so tests can
// count statements and make MySQL fail on purpose.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Read is one read of a message by recipient UID at At (unix seconds).
type Read struct {
	UID    uint32
	At     int64
	Source delta.Source
}

// DefaultBatchSize is the number of uids per statement when Options leave
// it out.
const DefaultBatchSize = 5000

// MaxBatchSize is the largest batch: parking orphans binds 5 placeholders
// per uid and MySQL allows 65535 per statement. (The UPDATE binds 3 in
// all.) config.maxBatchSize repeats it; a test keeps the two equal.
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
	batchSize int
	logger    *slog.Logger
	m         *metrics
}

// WriterOptions configure a Writer.
type WriterOptions struct {
	// BatchSize is the most uids per statement (0: DefaultBatchSize; at
	// most MaxBatchSize).
	BatchSize int
	// Logger receives the Writer's logs (nil: discarded).
	Logger *slog.Logger
	// Registerer receives its metrics (nil: registered nowhere).
	Registerer prometheus.Registerer
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
	return newWriter(db, opts.BatchSize, opts.Logger.With("component", "flushd"), m)
}

func newWriter(db DB, batchSize int, logger *slog.Logger, m *metrics) (*Writer, error) {
	if batchSize == 0 {
		batchSize = DefaultBatchSize
	}
	if batchSize < 1 || batchSize > MaxBatchSize {
		return nil, fmt.Errorf("flushd: batch size %d must be in 1..%d", batchSize, MaxBatchSize)
	}
	return &Writer{db: db, batchSize: batchSize, logger: logger, m: m}, nil
}

// Write marks reads of message (corpID, msgID) read, keeping each uid's
// earliest At, with one UPDATE per batch of uids. Rows already read are
// left alone. Reads without a recipient row are parked in read_orphans.
// updated counts rows flipped to read, orphaned the reads parked. On error
// the earlier batches stay written, which a retry of the same reads
// tolerates.
func (w *Writer) Write(ctx context.Context, corpID, msgID string, reads []Read) (updated, orphaned int, err error) {
	if err := checkMessage(corpID, msgID); err != nil {
		return 0, 0, err
	}
	reads = firstReads(reads)
	for _, r := range reads {
		if r.At < minReadTime || r.At > maxReadTime {
			return 0, 0, fmt.Errorf("%w: uid %d: read_time %d out of range", ErrInvalid, r.UID, r.At)
		}
	}
	for chunk := range slices.Chunk(reads, w.batchSize) {
		u, o, err := w.writeBatch(ctx, corpID, msgID, chunk)
		updated += u
		orphaned += o
		if err != nil {
			return updated, orphaned, err
		}
	}
	return updated, orphaned, nil
}

// firstReads returns reads sorted by uid with one read per uid, the
// earliest. Sorted uids walk the primary key in order. The Flusher's
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
	slices.SortStableFunc(reads, func(a, b Read) int {
		return cmp.Or(cmp.Compare(a.UID, b.UID), cmp.Compare(a.At, b.At))
	})
	return slices.CompactFunc(reads, func(a, b Read) bool { return a.UID == b.UID })
}

func (w *Writer) writeBatch(ctx context.Context, corpID, msgID string, reads []Read) (updated, orphaned int, err error) {
	query, args := updateStatement(corpID, msgID, reads)
	start := time.Now()
	res, err := w.db.ExecContext(ctx, query, args...)
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
	// Fewer rows changed than uids: some were read before (a replay) or
	// have no row yet. Only the latter must be kept.
	orphaned, err = w.park(ctx, corpID, msgID, reads)
	return int(n), orphaned, err
}

// updateStatement builds the batch UPDATE: the reads travel as one JSON
// array of [uid, "read_time", source] bound to a single placeholder, and
// JSON_TABLE turns it into rows that are joined to their recipient rows by
// primary key. See the package doc for the measurements behind it.
//
// STRAIGHT_JOIN fixes the plan: JSON_TABLE first, then one primary-key
// lookup per uid. The other order re-reads the JSON for every recipient row
// of the message (MariaDB 10.11 took 18 s for 5000 uids on a 50,000-row
// message); optimizers choose it when they think the message is small.
func updateStatement(corpID, msgID string, reads []Read) (string, []any) {
	return updateQuery, []any{readsJSON(reads), corpID, msgID}
}

// updatePrefix starts every batch UPDATE (tests count statements by it).
const updatePrefix = "UPDATE JSON_TABLE("

const updateQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', read_time DATETIME PATH '$[1]', source TINYINT UNSIGNED PATH '$[2]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = 1, r.read_time = d.read_time, r.source = d.source WHERE r.is_read = 0"

// readsJSON encodes reads as [[uid,"YYYY-MM-DD hh:mm:ss",source],…]. Every
// value is a number or a fixed-format time, so nothing needs escaping.
func readsJSON(reads []Read) string {
	b := make([]byte, 0, 2+len(reads)*len(`[4294967295,"2006-01-02 15:04:05",255],`))
	b = append(b, '[')
	for i, r := range reads {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendUint(b, uint64(r.UID), 10)
		b = append(b, ',', '"')
		b = time.Unix(r.At, 0).UTC().AppendFormat(b, time.DateTime)
		b = append(b, '"', ',')
		b = strconv.AppendUint(b, uint64(r.Source), 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// datetime formats unix seconds as a UTC DATETIME literal, so the stored
// value does not depend on the DSN's loc or the session time_zone.
func datetime(unix int64) string {
	return time.Unix(unix, 0).UTC().Format(time.DateTime)
}

// park finds the reads without a recipient row and keeps them in
// read_orphans, then applies orphans of the message in case the rows
// appeared meanwhile (see the package doc).
func (w *Writer) park(ctx context.Context, corpID, msgID string, reads []Read) (int, error) {
	var q strings.Builder
	args := make([]any, 0, len(reads)+2)
	q.WriteString("SELECT uid FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid IN (")
	args = append(args, corpID, msgID)
	for i, r := range reads {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args = append(args, r.UID)
	}
	q.WriteByte(')')
	rows, err := w.db.QueryContext(ctx, q.String(), args...)
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

	q.Reset()
	args = args[:0]
	q.WriteString("INSERT IGNORE INTO read_orphans (corp_id, msgid, uid, read_time, source) VALUES ")
	n := 0
	for _, r := range reads {
		if exists[r.UID] {
			continue
		}
		if n > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?,?,?,?,?)")
		args = append(args, corpID, msgID, r.UID, datetime(r.At), uint8(r.Source))
		n++
	}
	if _, err := w.db.ExecContext(ctx, q.String(), args...); err != nil {
		return 0, fmt.Errorf("flushd: park %d orphans of %s/%s: %w", n, corpID, msgID, err)
	}
	w.m.orphans.Add(float64(n))
	w.logger.Warn("reads parked without a recipient row", "corp_id", corpID, "msgid", msgID, "orphans", n)
	if _, err := ApplyOrphans(ctx, w.db, corpID, msgID); err != nil {
		return n, err
	}
	return n, nil
}

// ApplyOrphans applies the parked reads of message (corpID, msgID) whose
// recipient rows now exist; see the package-level ApplyOrphans.
func (w *Writer) ApplyOrphans(ctx context.Context, corpID, msgID string) (applied int, err error) {
	return ApplyOrphans(ctx, w.db, corpID, msgID)
}

// ApplyOrphans marks read the recipient rows of message (corpID, msgID) that
// have a parked read in read_orphans and are still unread, in one UPDATE,
// then deletes the orphans whose rows are read. Registration calls it after
// writing the message's recipient rows. An orphan whose row is still unread
// is kept, so a concurrent park is never deleted before it is applied.
func ApplyOrphans(ctx context.Context, db DB, corpID, msgID string) (applied int, err error) {
	res, err := db.ExecContext(ctx, `UPDATE message_read_record r
JOIN read_orphans o ON o.corp_id = r.corp_id AND o.msgid = r.msgid AND o.uid = r.uid
SET r.is_read = 1, r.read_time = o.read_time, r.source = o.source
WHERE r.corp_id = ? AND r.msgid = ? AND r.is_read = 0`, corpID, msgID)
	if err != nil {
		return 0, fmt.Errorf("flushd: apply orphans of %s/%s: %w", corpID, msgID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("flushd: apply orphans of %s/%s: %w", corpID, msgID, err)
	}
	if _, err := db.ExecContext(ctx, `DELETE o FROM read_orphans o
JOIN message_read_record r ON r.corp_id = o.corp_id AND r.msgid = o.msgid AND r.uid = o.uid
WHERE o.corp_id = ? AND o.msgid = ? AND r.is_read = 1`, corpID, msgID); err != nil {
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
	return nil
}
