package flushd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/ledger"
)

// Ledger appends evidence entries in the transaction of the rows they
// record (ledger.Ledger; issue 40). flushd declares it so tests can make
// appends fail.
type Ledger interface {
	Append(ctx context.Context, tx ledger.Tx, corp string, facts []ledger.Fact) (uint64, error)
}

// beginner is what a Writer with a Ledger needs of its DB (*sql.DB).
type beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

func (w *Writer) setLedger(l Ledger) error {
	if l == nil {
		return nil
	}
	if _, ok := w.db.(beginner); !ok {
		return fmt.Errorf("flushd: a ledger needs transactions, and %T has none", w.db)
	}
	w.ledger = l
	return nil
}

// txOptions: READ COMMITTED takes no gap locks, so the locking read of
// uids without a row blocks no registration inserting them.
var txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// writeLedgered writes a batch, its page events and their ledger entries
// in one transaction: a locking read of the batch's rows (those still
// unread among the reads that count, and every row with a page event),
// the page events already kept, the batch's statements, the page events
// not kept yet (page_signals), then the ledger's head lock, the entries
// and COMMIT. Each row a counted read made read has one signal entry
// (with the page event's version, IP and User-Agent when a page event
// made it read), each page_signals row it inserted one page entry. A
// redelivered batch finds its rows read and its events kept and appends
// nothing; a batch killed before COMMIT leaves neither rows nor events
// nor entries; two replicas writing the same uid serialize on its row.
func (w *Writer) writeLedgered(ctx context.Context, corpID, msgID string, reads []Read, pages []pageRow) (updated, orphaned int, err error) {
	if !w.lockFirst && len(pages) == 0 && w.stmt == StatementJSONTable && allNewCandidates(reads) {
		n, done, err := w.writeAllNew(ctx, corpID, msgID, reads)
		if err != nil || done {
			return n, 0, err
		}
		w.m.ledgerSlow.Inc()
	}
	tx, err := w.db.(beginner).BeginTx(ctx, txOptions)
	if err != nil {
		return 0, 0, fmt.Errorf("flushd: begin %s/%s: %w", corpID, msgID, err)
	}
	defer tx.Rollback()
	unread, unset, err := lockRows(ctx, tx, corpID, msgID, reads, pages)
	if err != nil {
		return 0, 0, err
	}
	kept, err := keptPages(ctx, tx, corpID, msgID, pages)
	if err != nil {
		return 0, 0, err
	}
	// Sized for the common case, a read's signal and one seen entry and a
	// page event's entry: a storm's batch is thousands of them, and a
	// slice grown from nothing copied each of them again and again.
	facts := make([]ledger.Fact, 0, 2*len(reads)+len(pages))
	for _, r := range reads {
		made := r.Source != 0 && unread[r.UID]
		if made {
			facts = append(facts, signalOf(msgID, r).Fact())
		}
		facts = append(facts, seenOf(msgID, r, made, unset[r.UID])...)
	}
	if len(reads) > 0 {
		if updated, orphaned, err = w.writeOn(ctx, tx, &facts, corpID, msgID, reads); err != nil {
			return 0, 0, err
		}
	}
	fresh := make([]pageRow, 0, len(pages))
	var receipts []receipt // acknowledgements, seq: their fact's position until Append
	for _, p := range pages {
		if k := (pageKey{p.uid, p.Source, p.Version}); !kept[k] {
			kept[k] = true
			fresh = append(fresh, p)
			if p.Source == delta.SourceAck {
				receipts = append(receipts, receipt{p: p, seq: uint64(len(facts))})
			}
			facts = append(facts, pageSignal(msgID, p.uid, p.PageEvent).PageFact())
		}
	}
	if len(fresh) > 0 {
		if err := w.writePages(ctx, tx, corpID, msgID, fresh); err != nil {
			return 0, 0, err
		}
	}
	first, err := w.ledger.Append(ctx, tx, corpID, facts)
	if err != nil {
		return 0, 0, fmt.Errorf("flushd: ledger of %s/%s: %w", corpID, msgID, err)
	}
	// Each acknowledgement's receipt names its entry, so it is queued
	// after Append (one small insert under the head lock, only for a
	// batch with an acknowledgement), in the same transaction.
	for i := range receipts {
		receipts[i].seq += first
	}
	if err := queueReceipts(ctx, tx, corpID, msgID, receipts, time.Now()); err != nil {
		return 0, 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("flushd: commit %s/%s: %w", corpID, msgID, err)
	}
	return updated, orphaned, nil
}

// signalOf is the signal entry of r's counted read: a page event of the
// same source and time that made the row read lends it its version, IP
// and User-Agent.
func signalOf(msgID string, r Read) ledger.Signal {
	s := ledger.Signal{MsgID: msgID, UID: r.UID, Source: uint8(r.Source), ReadTime: time.Unix(r.At, 0)}
	if !r.Source.Page() {
		return s
	}
	for _, p := range r.Pages {
		if p.Source == r.Source && p.At == r.At {
			return pageSignal(msgID, r.UID, p)
		}
	}
	return s
}

// signalColumns are message_read_record's signal columns in the order
// lockRows reports them unset.
var signalColumns = [...]struct {
	sig yidu.Signal
	at  func(r *Read) int64
}{
	{yidu.SignalButton, func(r *Read) int64 { return r.Button }},
	{yidu.SignalLink, func(r *Read) int64 { return r.Link }},
	{yidu.SignalEnterAgent, func(r *Read) int64 { return r.EnterAgent }},
}

// seenOf are the seen entries of r: each signal column r sets (unset
// says which were NULL) at a time its signal entry does not record (made:
// r made the row read, at r.At).
func seenOf(msgID string, r Read, made bool, unset [3]bool) []ledger.Fact {
	var out []ledger.Fact
	for i, c := range signalColumns {
		at := c.at(&r)
		if at == 0 || !unset[i] || (made && at == r.At) {
			continue
		}
		// A page event of the signal at that time is its page entry.
		if slices.ContainsFunc(r.Pages, func(p PageEvent) bool {
			sig, ok := p.Source.Signal()
			return ok && sig == c.sig && p.At == at
		}) {
			continue
		}
		out = append(out, ledger.Seen{MsgID: msgID, UID: r.UID, Signal: c.sig.String(), At: time.Unix(at, 0)}.Fact())
	}
	return out
}

// pageSignal is page event p of uid as the ledger records it.
func pageSignal(msgID string, uid uint32, p PageEvent) ledger.Signal {
	s := ledger.Signal{MsgID: msgID, UID: uid, Source: uint8(p.Source), ReadTime: time.Unix(p.At, 0),
		Version: int(p.Version), ClientIP: p.IP, UserAgent: p.UserAgent}
	if sig, ok := p.Source.Signal(); ok {
		s.Signal = sig.String()
	}
	return s
}

// pageKey is a page_signals row's key within a message.
type pageKey struct {
	uid     uint32
	source  delta.Source
	version uint32
}

// keptPages returns the keys of pages that page_signals already has. The
// caller holds the rows of their uids (lockRows), so no other writer adds
// one of them before it commits.
func keptPages(ctx context.Context, tx DB, corpID, msgID string, pages []pageRow) (map[pageKey]bool, error) {
	out := make(map[pageKey]bool, len(pages))
	if len(pages) == 0 {
		return out, nil
	}
	q := make([]byte, 0, 96+11*len(pages))
	q = append(q, "SELECT uid, source, version FROM page_signals WHERE corp_id = ? AND msgid = ? AND uid IN ("...)
	for i, p := range pages {
		if i > 0 {
			q = append(q, ',')
		}
		q = strconv.AppendUint(q, uint64(p.uid), 10)
	}
	q = append(q, ')')
	rows, err := tx.QueryContext(ctx, string(q), corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("flushd: page events kept of %s/%s: %w", corpID, msgID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k pageKey
		if err := rows.Scan(&k.uid, &k.source, &k.version); err != nil {
			return nil, fmt.Errorf("flushd: page events kept of %s/%s: %w", corpID, msgID, err)
		}
		out[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("flushd: page events kept of %s/%s: %w", corpID, msgID, err)
	}
	return out, nil
}

// allNewCandidates reports whether writeAllNew may write reads: every
// read counts, has one time (Read.compact) and carries no page event, as
// in a storm of card presses.
func allNewCandidates(reads []Read) bool {
	for _, r := range reads {
		if r.Source == 0 || len(r.Pages) > 0 {
			return false
		}
		if _, _, _, ok := r.compact(); !ok {
			return false
		}
	}
	return len(reads) > 0
}

// allNewQuery is compactQuery changing only rows still unread: each row it
// changes becomes read by its read, with every assignment compactQuery
// makes to it.
const allNewQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', t DATETIME PATH '$[1]', src INT UNSIGNED PATH '$[2]', sig INT UNSIGNED PATH '$[3]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = 1," +
	" r.read_time = IF(r.read_time IS NULL, d.t, r.read_time)," +
	" r.source = IF(r.source = 0, d.src, r.source)," +
	" r.button_at = IF(r.button_at IS NULL AND (d.sig & 1) > 0, d.t, r.button_at)," +
	" r.link_at = IF(r.link_at IS NULL AND (d.sig & 2) > 0, d.t, r.link_at)," +
	" r.enter_at = IF(r.enter_at IS NULL AND (d.sig & 4) > 0, d.t, r.enter_at)" +
	" WHERE r.is_read = 0"

// writeAllNew is the transaction of a batch whose reads all count, when
// every one of them makes its row read (a storm's first presses): the
// UPDATE changes only unread rows, and when it changed as many rows as
// there are reads, each read made its row read, so its signal entry is
// due, with no locking read to learn which rows were unread; the ledger's
// head, the entries and COMMIT follow. When fewer rows changed (a
// replay, a row read before, a read without its row yet) it rolls back
// and done is false: writeLedgered takes the general path, which finds
// the rows one by one. A concurrent writer of the same row waits for the
// UPDATE's row lock and then finds the row read, so it too falls back,
// and the entry is written once.
func (w *Writer) writeAllNew(ctx context.Context, corpID, msgID string, reads []Read) (updated int, done bool, err error) {
	tx, err := w.db.(beginner).BeginTx(ctx, txOptions)
	if err != nil {
		return 0, false, fmt.Errorf("flushd: begin %s/%s: %w", corpID, msgID, err)
	}
	defer tx.Rollback()
	start := time.Now()
	res, err := tx.ExecContext(ctx, allNewQuery, compactJSON(reads), corpID, msgID)
	if err != nil {
		return 0, false, fmt.Errorf("flushd: update %s/%s (%d uids): %w", corpID, msgID, len(reads), err)
	}
	w.m.latency.Observe(time.Since(start).Seconds())
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, fmt.Errorf("flushd: update %s/%s: rows affected: %w", corpID, msgID, err)
	}
	if int(n) != len(reads) {
		return 0, false, tx.Rollback()
	}
	facts := make([]ledger.Fact, len(reads))
	for i, r := range reads {
		facts[i] = ledger.Signal{MsgID: msgID, UID: r.UID, Source: uint8(r.Source), ReadTime: time.Unix(r.At, 0)}.Fact()
	}
	if _, err := w.ledger.Append(ctx, tx, corpID, facts); err != nil {
		return 0, false, fmt.Errorf("flushd: ledger of %s/%s: %w", corpID, msgID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, false, fmt.Errorf("flushd: commit %s/%s: %w", corpID, msgID, err)
	}
	w.m.batches.Inc()
	w.m.rows.Observe(float64(len(reads)))
	w.m.updated.Add(float64(n))
	return int(n), true, nil
}

// lockRows locks the rows the batch may change and returns those still
// unread among the reads that count (the rows the batch will make read)
// and, per uid, which of its signal columns (button_at, link_at,
// enter_at) are still NULL among those its reads set (their seen
// entries). It locks the rows of the reads that count and are unread,
// of the reads that set a signal column still NULL, and, with page
// events, every row of their uids, in one statement (one walk of the
// primary key in uid order, so two writers cannot take the same rows in
// opposite orders).
func lockRows(ctx context.Context, tx DB, corpID, msgID string, reads []Read, pages []pageRow) (map[uint32]bool, map[uint32][3]bool, error) {
	counted := make(map[uint32]bool, len(reads))
	uids := make([]uint32, 0, len(reads)+len(pages))
	for _, r := range reads {
		if r.Source != 0 {
			counted[r.UID] = true
		}
		if r.Source != 0 || r.Button != 0 || r.Link != 0 || r.EnterAgent != 0 {
			uids = append(uids, r.UID)
		}
	}
	out := make(map[uint32]bool, len(counted))
	unset := make(map[uint32][3]bool, len(uids))
	for _, p := range pages {
		uids = append(uids, p.uid)
	}
	slices.Sort(uids)
	uids = slices.Compact(uids)
	if len(uids) == 0 {
		return out, unset, nil
	}
	// The uids are literals (numbers only): a prepared statement of 5000
	// parameters costs more to prepare and bind than to run.
	q := make([]byte, 0, 160+11*len(uids))
	q = append(q, "SELECT uid, is_read, button_at IS NULL, link_at IS NULL, enter_at IS NULL FROM message_read_record WHERE corp_id = ? AND msgid = ?"...)
	if len(pages) == 0 {
		q = append(q, " AND (is_read = 0 OR button_at IS NULL OR link_at IS NULL OR enter_at IS NULL)"...)
	}
	q = append(q, " AND uid IN ("...)
	for i, u := range uids {
		if i > 0 {
			q = append(q, ',')
		}
		q = strconv.AppendUint(q, uint64(u), 10)
	}
	q = append(q, ") FOR UPDATE"...)
	rows, err := tx.QueryContext(ctx, string(q), corpID, msgID)
	if err != nil {
		return nil, nil, fmt.Errorf("flushd: lock rows of %s/%s: %w", corpID, msgID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid uint32
		var read bool
		var u [3]bool
		if err := rows.Scan(&uid, &read, &u[0], &u[1], &u[2]); err != nil {
			return nil, nil, fmt.Errorf("flushd: lock rows of %s/%s: %w", corpID, msgID, err)
		}
		if !read && counted[uid] {
			out[uid] = true
		}
		unset[uid] = u
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("flushd: lock rows of %s/%s: %w", corpID, msgID, err)
	}
	return out, unset, nil
}

// orphanFacts locks the rows that parked reads are about to change
// (ApplyOrphans) and returns their facts: a signal entry per unread row a
// parked counted read makes read, and a seen entry per signal column it
// sets at a time that read does not record (a parked press that does not
// count).
func orphanFacts(ctx context.Context, tx DB, corpID, msgID string) ([]ledger.Fact, error) {
	const secs = "COALESCE(TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', %s), 0)"
	rows, err := tx.QueryContext(ctx, `SELECT r.uid, r.is_read, o.source, `+fmt.Sprintf(secs, "o.read_time")+`,
r.button_at IS NULL, r.link_at IS NULL, r.enter_at IS NULL, `+fmt.Sprintf(secs, "o.button_at")+`, `+fmt.Sprintf(secs, "o.link_at")+`, `+fmt.Sprintf(secs, "o.enter_at")+`
FROM message_read_record r JOIN read_orphans o ON o.corp_id = r.corp_id AND o.msgid = r.msgid AND o.uid = r.uid
WHERE r.corp_id = ? AND r.msgid = ? AND ((r.is_read = 0 AND o.source > 0)
  OR (r.button_at IS NULL AND o.button_at IS NOT NULL) OR (r.link_at IS NULL AND o.link_at IS NOT NULL) OR (r.enter_at IS NULL AND o.enter_at IS NOT NULL))
ORDER BY r.uid FOR UPDATE`, corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("flushd: lock orphaned rows of %s/%s: %w", corpID, msgID, err)
	}
	defer rows.Close()
	var out []ledger.Fact
	for rows.Next() {
		var r Read
		var source uint8
		var read bool
		var unset [3]bool
		if err := rows.Scan(&r.UID, &read, &source, &r.At, &unset[0], &unset[1], &unset[2], &r.Button, &r.Link, &r.EnterAgent); err != nil {
			return nil, fmt.Errorf("flushd: lock orphaned rows of %s/%s: %w", corpID, msgID, err)
		}
		r.Source = delta.Source(source)
		made := !read && source > 0
		if made {
			out = append(out, ledger.Signal{MsgID: msgID, UID: r.UID, Source: source, ReadTime: time.Unix(r.At, 0)}.Fact())
		}
		out = append(out, seenOf(msgID, r, made, unset)...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("flushd: lock orphaned rows of %s/%s: %w", corpID, msgID, err)
	}
	return out, nil
}

// ApplyOrphansLedgered is ApplyOrphans with the ledger entries of the rows
// it makes read, in one transaction (registration calls it when flushd
// keeps a ledger).
func ApplyOrphansLedgered(ctx context.Context, db *sql.DB, l Ledger, corpID, msgID string) (applied int, err error) {
	if l == nil {
		return ApplyOrphans(ctx, db, corpID, msgID)
	}
	if db == nil {
		return 0, errors.New("flushd: apply orphans: db is required")
	}
	tx, err := db.BeginTx(ctx, txOptions)
	if err != nil {
		return 0, fmt.Errorf("flushd: apply orphans of %s/%s: %w", corpID, msgID, err)
	}
	defer tx.Rollback()
	facts, err := orphanFacts(ctx, tx, corpID, msgID)
	if err != nil {
		return 0, err
	}
	n, err := ApplyOrphans(ctx, tx, corpID, msgID)
	if err != nil {
		return n, err
	}
	if _, err := l.Append(ctx, tx, corpID, facts); err != nil {
		return 0, fmt.Errorf("flushd: ledger of %s/%s: %w", corpID, msgID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("flushd: apply orphans of %s/%s: commit: %w", corpID, msgID, err)
	}
	return n, nil
}
