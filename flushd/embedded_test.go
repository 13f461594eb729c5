package flushd

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/embedded"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/migrations"
)

// embeddedDB returns a migrated database on go-mysql-server, the
// MySQL-dialect engine the demo embeds (internal/embedded).
func embeddedDB(tb testing.TB) *sql.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := embedded.Start(ctx, embedded.Options{})
	testenv.Check(tb, "embedded.Start", err)
	tb.Cleanup(func() { s.Close() })
	db, err := sql.Open("mysql", s.MySQLDSN)
	testenv.Check(tb, "open", err)
	tb.Cleanup(func() { db.Close() })
	_, err = migrations.Up(ctx, db)
	testenv.Check(tb, "migrations.Up", err)
	return db
}

// TestStatementFormsMySQLDialect is a smoke test of MySQL-8 syntax: both
// forms of the Writer's statements (the batch UPDATE, the orphan SELECT
// and INSERT, ApplyOrphans) run on go-mysql-server with the results they
// have on MariaDB. It is no test of MySQL 8 itself (docs/scaling.md).
func TestStatementFormsMySQLDialect(t *testing.T) {
	db := embeddedDB(t)
	ctx := context.Background()
	for i, st := range statements {
		t.Run(st.String(), func(t *testing.T) {
			msgID := msgName(i)
			insertRecipients(t, db, "corp", msgID, 0, 3) // uid 3 not registered yet
			w, err := NewWriter(db, WriterOptions{Statement: st})
			testenv.Check(t, "NewWriter", err)
			reads := []Read{
				{UID: 0, EnterAgent: base},
				{UID: 1, At: base + 1, Source: delta.SourceCard, Button: base + 1, EnterAgent: base},
				{UID: 3, At: base + 3, Source: delta.SourceLink, Link: base + 3},
			}
			if u, o, err := w.Write(ctx, "corp", msgID, reads); err != nil || u != 2 || o != 1 {
				t.Fatalf("Write = %d, %d, %v; want 2, 1, nil", u, o, err)
			}
			replay := []Read{{UID: 1, At: base, Source: delta.SourceLink, Link: base + 9}}
			if u, _, err := w.Write(ctx, "corp", msgID, replay); err != nil || u != 1 {
				t.Fatalf("replay Write = %d, %v; want 1 (link_at filled), nil", u, err)
			}
			insertRecipients(t, db, "corp", msgID, 3, 4)
			if n, err := w.ApplyOrphans(ctx, "corp", msgID); err != nil || n != 1 {
				t.Fatalf("ApplyOrphans = %d, %v; want 1, nil", n, err)
			}
			checkFullRows(t, db, msgID, map[uint32]string{
				0: "unread enter 0",
				1: "read 1 src 1 button 1 link 9 enter 0",
				2: "unread",
				3: "read 3 src 3 link 3",
			})
		})
	}
}
