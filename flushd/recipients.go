package flushd

import (
	"context"
	"fmt"
	"strings"
)

// The read archive's rows are flushd's (one owner per table group, issue
// 47): message_read_record, read_orphans, page_signals and ack_receipts
// are written here only. The registration's recipient rows, a standing
// notice's new recipients and a material version's reset are written
// through the functions of this file, in the caller's transaction when
// db is one.

// InsertRecipients writes one unread row per uid of message msgID in db
// with multi-row INSERT IGNORE statements of up to batch rows (IGNORE: a
// repeated attempt keeps rows, and reads, that are already there). It
// returns the statements run and the rows they inserted, also when one
// fails.
func InsertRecipients(ctx context.Context, db DB, corpID, msgID string, uids []uint32, batch int) (statements int, inserted int64, err error) {
	if batch < 1 {
		return 0, 0, fmt.Errorf("flushd: insert recipients of %s: batch %d", msgID, batch)
	}
	var full string // the statement for a full batch, built once
	args := make([]any, 0, 3*min(len(uids), batch))
	for len(uids) > 0 {
		n := min(len(uids), batch)
		var query string
		if n == batch && full != "" {
			query = full
		} else {
			query = insertRowsSQL(n)
			if n == batch {
				full = query
			}
		}
		args = args[:0]
		for _, uid := range uids[:n] {
			args = append(args, corpID, msgID, uid)
		}
		res, err := db.ExecContext(ctx, query, args...)
		if err != nil {
			return statements, inserted, fmt.Errorf("flushd: insert recipients of %s: %w", msgID, err)
		}
		statements++
		if k, err := res.RowsAffected(); err == nil {
			inserted += k
		}
		uids = uids[n:]
	}
	return statements, inserted, nil
}

func insertRowsSQL(n int) string {
	var b strings.Builder
	const head = "INSERT IGNORE INTO message_read_record (corp_id, msgid, uid) VALUES "
	b.Grow(len(head) + n*8)
	writeValues(&b, head, "(?,?,?)", n)
	return b.String()
}

// writeValues writes head, an INSERT up to its VALUES, and n rows of
// tuple ("(?,?,…)"), comma separated, to b.
func writeValues(b *strings.Builder, head, tuple string, n int) {
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(tuple)
	}
}

// ResetReads makes every read row of message msgID unread again (issue
// 39: a material new version under read_rule acknowledged, where every
// read is an acknowledgement; tracker.Registry.ResetAcknowledged decides
// when). The signals' first times and page_signals stay.
func ResetReads(ctx context.Context, db DB, corpID, msgID string) error {
	if _, err := db.ExecContext(ctx, "UPDATE message_read_record SET is_read = 0, read_time = NULL, source = 0"+
		" WHERE corp_id = ? AND msgid = ? AND is_read = 1", corpID, msgID); err != nil {
		return fmt.Errorf("flushd: reset reads of %s: %w", msgID, err)
	}
	return nil
}
