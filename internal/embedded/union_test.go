package embedded

import (
	"context"
	"testing"
	"time"
)

// TestUnionDatetime: a UNION of a DATETIME and a DATETIME(3) column is a
// DATETIME(3), as on MariaDB, so the driver scans it into a time.Time
// (evidence's follow-ups: reminder_log UNION ALL manual_reminders; issue
// 49). go-mysql-server alone answers LONGTEXT.
func TestUnionDatetime(t *testing.T) {
	_, db := startDB(t)
	round := time.Date(2026, 12, 3, 10, 5, 6, 0, time.UTC)
	manual := time.Date(2026, 12, 3, 10, 5, 7, 123_000_000, time.UTC)
	mustExec(t, db, `INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES ('c','m',1,'reminder',7,'u7',0,?,'sent')`, round)
	mustExec(t, db, `INSERT INTO manual_reminders (corp_id, msgid, uid, reminded_at, reminded_by, scope) VALUES ('c','m',7,?,'hr','all')`, manual)
	tests := []struct {
		name, query string
		want        []time.Time
	}{
		{"union all", `SELECT kind, reminded_at FROM reminder_log WHERE corp_id = 'c'
			UNION ALL SELECT 'manual', reminded_at FROM manual_reminders WHERE corp_id = 'c' ORDER BY 2`, []time.Time{round, manual}},
		{"union all reversed", `SELECT 'manual', reminded_at FROM manual_reminders
			UNION ALL SELECT kind, reminded_at FROM reminder_log ORDER BY 2`, []time.Time{round, manual}},
		{"max of union", `SELECT 'x', MAX(at) FROM (SELECT reminded_at AS at FROM manual_reminders
			UNION ALL SELECT reminded_at AS at FROM reminder_log) x`, []time.Time{manual}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := db.QueryContext(context.Background(), tt.query)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var got []time.Time
			for rows.Next() {
				var k string
				var at time.Time
				if err := rows.Scan(&k, &at); err != nil {
					t.Fatalf("Scan: %v", err)
				}
				got = append(got, at.UTC())
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("rows = %v; want %v", got, tt.want)
			}
			for i := range got {
				if !got[i].Equal(tt.want[i]) {
					t.Errorf("row %d = %v; want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
