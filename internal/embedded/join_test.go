package embedded

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
)

// TestHashJoin checks that yidu's joins are planned as hash joins
// (scanCoster): flushd's batch UPDATE, which joins JSON_TABLE to
// message_read_record, and idmap's department memberships; and that the
// batch UPDATE marks exactly its rows.
func TestHashJoin(t *testing.T) {
	_, db := startDB(t)
	ctx := context.Background()
	insertRecipients(t, db, "c", "m", 0, 2000, 1000)
	insertRecipients(t, db, "c", "other", 0, 100, 100)
	var users, members strings.Builder
	for i := range 500 {
		sep := map[bool]string{true: "", false: ","}[i == 0]
		fmt.Fprintf(&users, "%s('c', %d, 'user%d')", sep, i, i)
		fmt.Fprintf(&members, "%s('c', %d, %d)", sep, i%20, i)
	}
	mustExec(t, db, "INSERT INTO users (corp_id, uid, userid) VALUES "+users.String())
	mustExec(t, db, "INSERT INTO user_departments (corp_id, dept_id, uid) VALUES "+members.String())
	for _, q := range []string{
		"UPDATE JSON_TABLE('[[1,2]]', '$[*]' COLUMNS(uid INT UNSIGNED PATH '$[0]', src INT UNSIGNED PATH '$[1]')) AS d" +
			" STRAIGHT_JOIN message_read_record r ON r.corp_id = 'c' AND r.msgid = 'm' AND r.uid = d.uid SET r.is_read = 1 WHERE r.is_read = 0",
		"SELECT ud.dept_id, ud.uid FROM user_departments ud JOIN users u ON u.corp_id = ud.corp_id AND u.uid = ud.uid WHERE ud.corp_id = 'c' AND u.status = 1",
	} {
		var plan strings.Builder
		rows, err := db.QueryContext(ctx, "EXPLAIN PLAN "+q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		rows.Close()
		if p := plan.String(); !strings.Contains(p, "HashJoin") || strings.Contains(p, "LookupJoin") || strings.Contains(p, "MergeJoin") {
			t.Errorf("plan of %.60s…:\n%s\nwant a HashJoin, no lookup or merge join", q, p)
		}
	}
	w, err := flushd.NewWriter(db, flushd.WriterOptions{BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	if updated, orphaned, err := w.Write(ctx, "c", "m", flushdReads(800, 400)); err != nil || updated != 400 || orphaned != 0 {
		t.Fatalf("Write(400 reads) = %d, %d, %v; want 400, 0, nil", updated, orphaned, err)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE is_read = 1"); n != 400 {
		t.Errorf("rows read = %d; want 400", n)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'm' AND is_read = 1 AND uid >= 800 AND uid < 1200"); n != 400 {
		t.Errorf("rows read among uids 800..1199 = %d; want 400", n)
	}
}

func flushdReads(first, n int) []flushd.Read {
	reads := make([]flushd.Read, 0, n)
	for uid := first; uid < first+n; uid++ {
		reads = append(reads, flushd.Read{UID: uint32(uid), At: 1772355600 + int64(uid), Source: delta.Source(1)})
	}
	return reads
}

// BenchmarkFlushdWrite measures flushd's own batch UPDATE of 400 uids on a
// 2,000-row message. Run with -benchtime=1x.
func BenchmarkFlushdWrite(b *testing.B) {
	for range b.N {
		b.StopTimer()
		_, db := startDB(b)
		insertRecipients(b, db, "c", "m", 0, 2000, 1000)
		w, err := flushd.NewWriter(db, flushd.WriterOptions{BatchSize: 500})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if updated, _, err := w.Write(context.Background(), "c", "m", flushdReads(800, 400)); err != nil || updated != 400 {
			b.Fatalf("Write = %d, %v; want 400", updated, err)
		}
	}
}
