package retention

import (
	"context"
	"database/sql"
	"testing"

	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/testenv"
)

// insertRecipients writes unread recipient rows for uids [from, to),
// through their owner (flushd.InsertRecipients), 5,000 a statement.
func insertRecipients(tb testing.TB, db *sql.DB, corpID, msgID string, from, to uint32) {
	tb.Helper()
	uids := make([]uint32, 0, to-from)
	for uid := from; uid < to; uid++ {
		uids = append(uids, uid)
	}
	_, _, err := flushd.InsertRecipients(context.Background(), db, corpID, msgID, uids, 5000)
	testenv.Check(tb, "insert recipients", err)
}
