package store

import (
	"context"

	"github.com/yidu-io/yidu/internal/noticedel"
)

// noticeDeletes delete one batch of a notice's rows from each table of
// the notice store's that is kept per notice, ordered by the rest of its primary key
// after (corp_id, msgid): each DELETE takes the next range of it, and is
// safe for statement-based replication. campaigns is keyed by msgid alone (migration 00011).
var noticeDeletes = map[string]string{
	"manual_reminders": "DELETE FROM manual_reminders WHERE corp_id = ? AND msgid = ? ORDER BY uid, reminded_at LIMIT ?",
	"notice_acts":      "DELETE FROM notice_acts WHERE corp_id = ? AND msgid = ? ORDER BY msgid LIMIT ?",
	"campaigns":        "DELETE FROM campaigns WHERE corp_id = ? AND msgid = ? ORDER BY msgid LIMIT ?",
}

// DeleteNotice deletes at most limit rows of notice msgID from table,
// one of the notice store's kept per notice (noticeDeletes), and returns how many it
// deleted: the retention package's purge and anonymisation call it until
// a batch comes back short.
func DeleteNotice(ctx context.Context, db noticedel.Execer, table, corpID, msgID string, limit int) (int64, error) {
	return noticedel.Batch(ctx, db, "campaign/store", noticeDeletes, table, corpID, msgID, limit)
}
