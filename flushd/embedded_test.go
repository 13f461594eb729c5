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

// TestViewsMySQLDialect: the analysts' views (migration 00007) answer on
// go-mysql-server as on MariaDB (migrations.TestViews there): a smoke
// test of their MySQL-8 syntax.
func TestViewsMySQLDialect(t *testing.T) {
	db := embeddedDB(t)
	ctx := context.Background()
	_, err := db.ExecContext(ctx, `INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES ('corp', 'm', 'hr', 1, 't', '2025-01-01 00:00:00', 4, '', 1)`)
	testenv.Check(t, "insert message", err)
	insertRecipients(t, db, "corp", "m", 0, 4)
	w, err := NewWriter(db, WriterOptions{})
	testenv.Check(t, "NewWriter", err)
	// Reads 60, 120 and 300 s after sending (median 120 s); 3 of 4 is
	// under 90 %.
	reads := []Read{
		{UID: 0, At: base + 60, Source: delta.SourceCard, Button: base + 60},
		{UID: 1, At: base + 120, Source: delta.SourceLink, Link: base + 120},
		{UID: 2, At: base + 300, Source: delta.SourceCard, Button: base + 300},
		{UID: 3, EnterAgent: base + 5},
	}
	if _, _, err := w.Write(ctx, "corp", "m", reads); err != nil {
		t.Fatal(err)
	}
	var recipients, readCount int
	var percent, median float64
	var to90 sql.NullInt64
	testenv.Check(t, "message_summary", db.QueryRowContext(ctx, `SELECT recipients, read_count, percent, median_seconds, seconds_to_90
		FROM message_summary WHERE corp_id = 'corp' AND msgid = 'm'`).Scan(&recipients, &readCount, &percent, &median, &to90))
	if recipients != 4 || readCount != 3 || percent != 75 || median != 120 || to90.Valid {
		t.Errorf("message_summary = %d, %d, %v%%, median %v, to 90%% %v; want 4, 3, 75%%, 120, NULL", recipients, readCount, percent, median, to90)
	}
	var first sql.NullString
	var secs sql.NullInt64
	testenv.Check(t, "read_facts", db.QueryRowContext(ctx, `SELECT first_signal, seconds_to_read FROM read_facts
		WHERE corp_id = 'corp' AND msgid = 'm' AND uid = 1`).Scan(&first, &secs))
	if first.String != "link" || secs.Int64 != 120 {
		t.Errorf("read_facts uid 1 = %v, %v; want link, 120", first, secs)
	}
}
