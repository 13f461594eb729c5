package flushd

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

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

// writeLedgered writes a batch and its ledger entries in one transaction:
// a locking read of the batch's rows still unread, the batch's
// statements, one signal entry for each of those rows that a counted read
// made read (and for each parked read applied), then the ledger's head
// lock, the entries and COMMIT. A redelivered batch finds its rows read
// and appends nothing; a batch killed before COMMIT leaves neither rows
// nor entries; two replicas writing the same uid serialize on its row.
func (w *Writer) writeLedgered(ctx context.Context, corpID, msgID string, reads []Read) (updated, orphaned int, err error) {
	tx, err := w.db.(beginner).BeginTx(ctx, txOptions)
	if err != nil {
		return 0, 0, fmt.Errorf("flushd: begin %s/%s: %w", corpID, msgID, err)
	}
	defer tx.Rollback()
	unread, err := unreadRows(ctx, tx, corpID, msgID, reads)
	if err != nil {
		return 0, 0, err
	}
	var facts []ledger.Fact
	for _, r := range reads {
		if r.Source != 0 && unread[r.UID] {
			facts = append(facts, ledger.Signal{MsgID: msgID, UID: r.UID, Source: uint8(r.Source), ReadTime: time.Unix(r.At, 0)}.Fact())
		}
	}
	updated, orphaned, err = w.writeOn(ctx, tx, &facts, corpID, msgID, reads)
	if err != nil {
		return 0, 0, err
	}
	if _, err := w.ledger.Append(ctx, tx, corpID, facts); err != nil {
		return 0, 0, fmt.Errorf("flushd: ledger of %s/%s: %w", corpID, msgID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("flushd: commit %s/%s: %w", corpID, msgID, err)
	}
	return updated, orphaned, nil
}

// unreadRows locks the rows of reads that count and returns those still
// unread: the rows the batch will make read.
func unreadRows(ctx context.Context, tx DB, corpID, msgID string, reads []Read) (map[uint32]bool, error) {
	counted := make([]Read, 0, len(reads))
	for _, r := range reads {
		if r.Source != 0 {
			counted = append(counted, r)
		}
	}
	out := make(map[uint32]bool, len(counted))
	if len(counted) == 0 {
		return out, nil
	}
	// The uids are literals (numbers only): a prepared statement of 5000
	// parameters costs more to prepare and bind than to run.
	q := make([]byte, 0, 96+11*len(counted))
	q = append(q, "SELECT uid FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 0 AND uid IN ("...)
	for i, r := range counted {
		if i > 0 {
			q = append(q, ',')
		}
		q = strconv.AppendUint(q, uint64(r.UID), 10)
	}
	q = append(q, ") FOR UPDATE"...)
	rows, err := tx.QueryContext(ctx, string(q), corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("flushd: lock unread rows of %s/%s: %w", corpID, msgID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid uint32
		if err := rows.Scan(&uid); err != nil {
			return nil, fmt.Errorf("flushd: lock unread rows of %s/%s: %w", corpID, msgID, err)
		}
		out[uid] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("flushd: lock unread rows of %s/%s: %w", corpID, msgID, err)
	}
	return out, nil
}

// orphanFacts locks the unread rows that a parked counted read is about
// to make read (ApplyOrphans) and returns their signal facts.
func orphanFacts(ctx context.Context, tx DB, corpID, msgID string) ([]ledger.Fact, error) {
	rows, err := tx.QueryContext(ctx, `SELECT r.uid, o.source, TIMESTAMPDIFF(SECOND, '1970-01-01 00:00:00', o.read_time)
FROM message_read_record r JOIN read_orphans o ON o.corp_id = r.corp_id AND o.msgid = r.msgid AND o.uid = r.uid
WHERE r.corp_id = ? AND r.msgid = ? AND r.is_read = 0 AND o.source > 0 ORDER BY r.uid FOR UPDATE`, corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("flushd: lock orphaned rows of %s/%s: %w", corpID, msgID, err)
	}
	defer rows.Close()
	var out []ledger.Fact
	for rows.Next() {
		var uid uint32
		var source uint8
		var at int64
		if err := rows.Scan(&uid, &source, &at); err != nil {
			return nil, fmt.Errorf("flushd: lock orphaned rows of %s/%s: %w", corpID, msgID, err)
		}
		out = append(out, ledger.Signal{MsgID: msgID, UID: uid, Source: source, ReadTime: time.Unix(at, 0)}.Fact())
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
