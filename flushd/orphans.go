package flushd

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/yidu-io/yidu/ledger"
)

// maxParkRows is the most orphans one INSERT parks (8 placeholders each).
const maxParkRows = 65535 / 8

// parkStatement keeps orphans in read_orphans. A uid parked before keeps
// what it has and gains what it lacked (its first counted read, each
// signal's first time), as the batch UPDATE would; each assignment reads
// only its own column's old value. (go-mysql-server takes VALUES() only
// in an INSERT … VALUES, not after a SELECT from JSON_TABLE.)
func parkStatement(corpID, msgID string, orphans []Read) (string, []any) {
	var q strings.Builder
	args := make([]any, 0, 8*len(orphans))
	writeValues(&q, "INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source, button_at, link_at, enter_at) VALUES ", "(?,?,?,?,?,?,?,?)", len(orphans))
	for _, r := range orphans {
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
