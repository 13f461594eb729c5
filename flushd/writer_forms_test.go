package flushd

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// statements are the batch UPDATE's forms; every behaviour test in this
// file runs for each on the real MariaDB.
var statements = []Statement{StatementJSONTable, StatementCase}

// countingDB counts batch UPDATEs of either form.
type countingDB struct {
	DB
	mu         sync.Mutex
	statements []string // the prefix of each batch UPDATE, in order
}

func (c *countingDB) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	for _, p := range []string{updatePrefix, casePrefix} {
		if strings.HasPrefix(q, p) {
			c.mu.Lock()
			c.statements = append(c.statements, p)
			c.mu.Unlock()
		}
	}
	return c.DB.ExecContext(ctx, q, args...)
}

func (c *countingDB) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.statements)
}

// fullRows returns each row of a message as one string: "unread" or
// "read <read_time> src <source>", then " button|link|enter <time>" for
// each signal seen (times as seconds after base).
func fullRows(tb testing.TB, db *sql.DB, corpID, msgID string) map[uint32]string {
	tb.Helper()
	rows, sigs := readRows(tb, db, corpID, msgID), signalRows(tb, db, corpID, msgID)
	out := map[uint32]string{}
	for uid, r := range rows {
		s := "unread"
		if r.read {
			s = fmt.Sprintf("read %d src %d", r.at-base, r.source)
		} else if r.at != 0 || r.source != 0 {
			s = fmt.Sprintf("unread with read_time %d src %d", r.at, r.source)
		}
		for _, c := range []struct {
			name string
			t    int64
		}{{"button", sigs[uid].button}, {"link", sigs[uid].link}, {"enter", sigs[uid].enter}} {
			if c.t != 0 {
				s += fmt.Sprintf(" %s %d", c.name, c.t-base)
			}
		}
		out[uid] = s
	}
	return out
}

func checkFullRows(tb testing.TB, db *sql.DB, msgID string, want map[uint32]string) {
	tb.Helper()
	got := fullRows(tb, db, "corp", msgID)
	for uid, w := range want {
		if got[uid] != w {
			tb.Errorf("row %d = %q; want %q", uid, got[uid], w)
		}
	}
}

// TestStatementForms: both forms of the batch UPDATE write the same rows
// and count the same changes: the first counted read wins and is never
// undone (the is_read guard), read_time and source are the first counted
// signal's, each signal column keeps its first time whether it counted or
// not, and reads without a recipient row are parked and applied.
func TestStatementForms(t *testing.T) {
	for _, st := range statements {
		t.Run(st.String(), func(t *testing.T) {
			db := testenv.MySQL(t)
			ctx := context.Background()
			w, err := NewWriter(db, WriterOptions{Statement: st})
			testenv.Check(t, "NewWriter", err)
			write := func(t *testing.T, msgID string, reads []Read, updated, orphaned int) {
				t.Helper()
				u, o, err := w.Write(ctx, "corp", msgID, reads)
				if err != nil || u != updated || o != orphaned {
					t.Fatalf("Write(%v) = %d, %d, %v; want %d, %d, nil", reads, u, o, err, updated, orphaned)
				}
			}

			t.Run("first read wins, never unread", func(t *testing.T) {
				insertRecipients(t, db, "corp", "guard", 0, 4)
				write(t, "guard", []Read{
					{UID: 2, At: base + 50, Source: delta.SourceEnterAgent, EnterAgent: base + 50},
					{UID: 1, At: base + 10, Source: delta.SourceCard, Button: base + 10},
					{UID: 2, At: base + 20, Source: delta.SourceCard, Button: base + 20},
				}, 2, 0)
				// A replay with earlier times, and a signal that does not
				// count on a read row: read, read_time and source stay;
				// only the empty link_at is filled.
				write(t, "guard", []Read{
					{UID: 1, At: base + 5, Source: delta.SourceLink, Button: base + 5},
					{UID: 2, Link: base + 60},
					{UID: 3, At: base + 30, Source: delta.SourceLink, Link: base + 30},
				}, 2, 0)
				write(t, "guard", []Read{{UID: 1, At: base + 1, Source: delta.SourceCard, Button: base + 1}}, 0, 0)
				checkFullRows(t, db, "guard", map[uint32]string{
					0: "unread",
					1: "read 10 src 1 button 10",
					2: "read 20 src 1 button 20 link 60 enter 50",
					3: "read 30 src 3 link 30",
				})
			})

			t.Run("signals apart", func(t *testing.T) {
				insertRecipients(t, db, "corp", "signals", 0, 3)
				// Opening the app does not count by default: only enter_at.
				write(t, "signals", []Read{{UID: 0, EnterAgent: base + 1}, {UID: 1, EnterAgent: base + 2}}, 2, 0)
				checkFullRows(t, db, "signals", map[uint32]string{0: "unread enter 1", 1: "unread enter 2", 2: "unread"})
				// A later press counts; an earlier app entry replayed keeps
				// the first enter_at written.
				write(t, "signals", []Read{
					{UID: 0, At: base + 9, Source: delta.SourceCard, Button: base + 9, EnterAgent: base},
					{UID: 1, EnterAgent: base + 2},
				}, 1, 0)
				checkFullRows(t, db, "signals", map[uint32]string{0: "read 9 src 1 button 9 enter 1", 1: "unread enter 2", 2: "unread"})
			})

			t.Run("orphans", func(t *testing.T) {
				insertRecipients(t, db, "corp", "orphans", 0, 3) // uids 3, 4 not registered yet
				write(t, "orphans", []Read{
					{UID: 1, At: base + 1, Source: delta.SourceCard, Button: base + 1},
					{UID: 3, At: base + 3, Source: delta.SourceLink, Link: base + 3},
					{UID: 4, EnterAgent: base + 4},
				}, 1, 2)
				insertRecipients(t, db, "corp", "orphans", 3, 5)
				if n, err := w.ApplyOrphans(ctx, "corp", "orphans"); err != nil || n != 2 {
					t.Fatalf("ApplyOrphans = %d, %v; want 2, nil", n, err)
				}
				checkFullRows(t, db, "orphans", map[uint32]string{
					0: "unread", 1: "read 1 src 1 button 1", 3: "read 3 src 3 link 3", 4: "unread enter 4",
				})
			})
		})
	}
}

// TestCaseStatementLimit: the CASE form's largest statement (every column
// written for maxCaseBatch uids: 65,534 placeholders) runs, and a batch
// over it is split in two.
func TestCaseStatementLimit(t *testing.T) {
	db := testenv.MySQL(t)
	spy := &countingDB{DB: db}
	w, err := NewWriter(spy, WriterOptions{BatchSize: MaxBatchSize, Statement: StatementCase})
	testenv.Check(t, "NewWriter", err)
	if q, args := caseStatement("corp", "m", make([]Read, maxCaseBatch)); strings.Count(q, "?") != len(args) {
		t.Fatalf("caseStatement: %d placeholders, %d args", strings.Count(q, "?"), len(args))
	}
	n := maxCaseBatch + 1
	insertRecipients(t, db, "corp", "big", 0, uint32(n))
	reads := make([]Read, n)
	for i := range reads {
		at := base + int64(i%3600)
		reads[i] = Read{UID: uint32(i), At: at, Source: delta.SourceCard, Button: at, Link: at + 1, EnterAgent: at + 2}
	}
	if u, o, err := w.Write(context.Background(), "corp", "big", reads); err != nil || u != n || o != 0 {
		t.Fatalf("Write(%d reads) = %d, %d, %v; want %d, 0, nil", n, u, o, err, n)
	}
	if got := spy.count(); got != 2 {
		t.Errorf("Write(%d reads) ran %d batch UPDATEs; want 2 (at most %d uids each)", n, got, maxCaseBatch)
	}
	if got := countRead(t, db); got != n {
		t.Errorf("%d rows read; want %d", got, n)
	}
	checkFullRows(t, db, "big", map[uint32]string{0: "read 0 src 1 button 0 link 1 enter 2", uint32(n - 1): fmt.Sprintf("read %d src 1 button %[1]d link %d enter %d", (n-1)%3600, (n-1)%3600+1, (n-1)%3600+2)})
}

func TestStatementFor(t *testing.T) {
	tests := []struct {
		version string
		dialect Dialect
		want    Statement
	}{
		{"10.11.19-MariaDB-0+deb12u1", DialectMariaDB, StatementJSONTable},
		{"5.5.5-10.6.0-MariaDB", DialectMariaDB, StatementJSONTable},
		{"10.5.23-MariaDB", DialectMariaDB, StatementCase},
		{"8.0.36", DialectMySQL, StatementJSONTable},
		{"8.0.3-rc", DialectMySQL, StatementCase},
		{"5.7.44-log", DialectMySQL, StatementCase},
		{"8.4.0", DialectMySQL, StatementJSONTable},
		{"8.0.11-TiDB-v7.5.1", DialectTiDB, StatementCase},
		{"", DialectMySQL, StatementJSONTable},
		{"garbage", DialectMySQL, StatementJSONTable},
	}
	for _, tt := range tests {
		d := DialectOf(tt.version)
		if d != tt.dialect {
			t.Errorf("DialectOf(%q) = %q; want %q", tt.version, d, tt.dialect)
		}
		if got := StatementFor(d, tt.version); got != tt.want {
			t.Errorf("StatementFor(%q, %q) = %v; want %v", d, tt.version, got, tt.want)
		}
	}
	for _, d := range []Dialect{DialectMariaDB, DialectMySQL} {
		if got := StatementFor(d, ""); got != StatementJSONTable {
			t.Errorf("StatementFor(%q, \"\") = %v; want json_table", d, got)
		}
	}
	if got := StatementFor(DialectTiDB, ""); got != StatementCase {
		t.Errorf("StatementFor(tidb, \"\") = %v; want case (TiDB has no JSON_TABLE)", got)
	}
}

// TestServerVersion: the real server's VERSION() names MariaDB, whose
// 10.11 gets the JSON_TABLE form.
func TestServerVersion(t *testing.T) {
	db := testenv.MySQL(t)
	v, err := ServerVersion(context.Background(), db)
	if err != nil || DialectOf(v) != DialectMariaDB {
		t.Fatalf("ServerVersion = %q, %v; want a MariaDB version", v, err)
	}
	if got := StatementFor(DialectOf(v), v); got != StatementJSONTable {
		t.Errorf("StatementFor(%q) = %v; want json_table", v, got)
	}
}
