package flushd

import (
	"context"

	"github.com/yidu-io/yidu/internal/noticedel"
)

// noticeDeletes delete one batch of a notice's rows from each table of
// the read archive, ordered by the rest of its primary key after
// (corp_id, msgid): each DELETE takes the next range of it, and is safe
// for statement-based replication.
var noticeDeletes = map[string]string{
	"message_read_record": "DELETE FROM message_read_record WHERE corp_id = ? AND msgid = ? ORDER BY uid LIMIT ?",
	"read_orphans":        "DELETE FROM read_orphans WHERE corp_id = ? AND msgid = ? ORDER BY uid LIMIT ?",
	// The reading page's signals: who, on which version, from which IP
	// and User-Agent.
	"page_signals": "DELETE FROM page_signals WHERE corp_id = ? AND msgid = ? ORDER BY uid, source, version LIMIT ?",
	// The members' acknowledgement receipts (issue 48).
	"ack_receipts": "DELETE FROM ack_receipts WHERE corp_id = ? AND msgid = ? ORDER BY uid, version LIMIT ?",
}

// DeleteNotice deletes at most limit rows of message msgID from table,
// one of the read archive's (message_read_record, read_orphans,
// page_signals, ack_receipts), and returns how many it deleted: the
// retention package's purge and anonymisation call it until a batch
// comes back short.
func DeleteNotice(ctx context.Context, db DB, table, corpID, msgID string, limit int) (int64, error) {
	return noticedel.Batch(ctx, db, "flushd", noticeDeletes, table, corpID, msgID, limit)
}
