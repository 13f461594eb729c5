package tracker

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/yidu-io/yidu/internal/noticedel"
)

// execer is a *sql.DB (each statement committed on its own) or a *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// noticeDeletes delete one batch of a notice's rows from each of its
// tables tracker owns besides messages, ordered by the rest of the
// primary key after (corp_id, msgid): each DELETE takes the next range
// of it, and is safe for statement-based replication.
var noticeDeletes = map[string]string{
	"message_sends": "DELETE FROM message_sends WHERE corp_id = ? AND msgid = ? ORDER BY kind, batch, sent_at LIMIT ?",
	// Each recipient's departments at send time.
	"send_departments": "DELETE FROM send_departments WHERE corp_id = ? AND msgid = ? ORDER BY set_no LIMIT ?",
}

// DeleteNotice deletes at most limit rows of message msgID from table
// (message_sends, send_departments) and returns how many it deleted: the
// retention package's purge and anonymisation call it until a batch
// comes back short.
func DeleteNotice(ctx context.Context, db execer, table, corpID, msgID string, limit int) (int64, error) {
	return noticedel.Batch(ctx, db, "tracker", noticeDeletes, table, corpID, msgID, limit)
}

// DeleteMessage deletes message msgID's messages row, the last of a
// purged notice's.
func DeleteMessage(ctx context.Context, db execer, corpID, msgID string) error {
	if _, err := db.ExecContext(ctx, "DELETE FROM messages WHERE corp_id = ? AND msgid = ?", corpID, msgID); err != nil {
		return fmt.Errorf("tracker: delete message %s: %w", msgID, err)
	}
	return nil
}

// AnonymiseSends blanks the invaliduser and unlicensed lists WeCom
// answered for message msgID's send batches, and returns how many
// batches had one.
func AnonymiseSends(ctx context.Context, db execer, corpID, msgID string) (int64, error) {
	return noticedel.Blank(ctx, db, "tracker", "sends",
		"UPDATE message_sends SET invalid = NULL, unlicensed = NULL WHERE corp_id = ? AND msgid = ? AND (invalid IS NOT NULL OR unlicensed IS NOT NULL)", corpID, msgID)
}

// MarkAnonymised records that message msgID's personal data went at at
// (messages.anonymised_at).
func MarkAnonymised(ctx context.Context, db execer, corpID, msgID string, at time.Time) error {
	if _, err := db.ExecContext(ctx, "UPDATE messages SET anonymised_at = ? WHERE corp_id = ? AND msgid = ?",
		at.UTC().Format("2006-01-02 15:04:05.000"), corpID, msgID); err != nil {
		return fmt.Errorf("tracker: mark %s anonymised: %w", msgID, err)
	}
	return nil
}
