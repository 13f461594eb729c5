package loops

import (
	"context"

	"github.com/yidu-io/yidu/internal/noticedel"
)

// noticeDeletes delete one batch of a notice's rows from each table of
// the follow-up loops' that is kept per notice, ordered by the rest of its primary key
// after (corp_id, msgid): each DELETE takes the next range of it, and is
// safe for statement-based replication.
var noticeDeletes = map[string]string{
	"reminder_log":      "DELETE FROM reminder_log WHERE corp_id = ? AND msgid = ? ORDER BY round, kind, uid LIMIT ?",
	"follow_up_batches": "DELETE FROM follow_up_batches WHERE corp_id = ? AND msgid = ? ORDER BY round, kind, batch LIMIT ?",
	"follow_up_rounds":  "DELETE FROM follow_up_rounds WHERE corp_id = ? AND msgid = ? ORDER BY round LIMIT ?",
	"follow_ups":        "DELETE FROM follow_ups WHERE corp_id = ? AND msgid = ? ORDER BY msgid LIMIT ?",
}

// DeleteNotice deletes at most limit rows of notice msgID from table,
// one of the follow-up loops' kept per notice (noticeDeletes), and
// returns how many it deleted: the retention package's purge and
// anonymisation call it until a batch comes back short.
func DeleteNotice(ctx context.Context, db noticedel.Execer, table, corpID, msgID string, limit int) (int64, error) {
	return noticedel.Batch(ctx, db, "campaign/loops", noticeDeletes, table, corpID, msgID, limit)
}
