package embedded

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkInsertRecipients measures registering a message's recipient rows
// with multi-row INSERT IGNORE (1000 rows a statement) into a fresh table.
// go-mysql-server's memory tables cost O(table rows) per inserted row, so
// time grows with the square of the row count. Run with -benchtime=1x.
func BenchmarkInsertRecipients(b *testing.B) {
	for _, rows := range []int{1000, 2000, 5000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				_, db := startDB(b)
				b.StartTimer()
				insertRecipients(b, db, "c", "m", 0, rows, 1000)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "µs/row")
		})
	}
}

// BenchmarkFlushUpdate measures flushd's UPDATE … CASE … IN (uids) on a
// message of 2000 recipient rows. Planning alone is quadratic in the number
// of uids (go-mysql-server merges the IN list's ranges pairwise).
func BenchmarkFlushUpdate(b *testing.B) {
	const table = 2000
	for _, uids := range []int{100, 500, 2000, 5000} {
		b.Run(fmt.Sprintf("uids=%d", uids), func(b *testing.B) {
			reads := make([]read, uids)
			for i := range reads {
				reads[i] = read{uid: i, at: time.Unix(1700000000, 0), source: 1}
			}
			for range b.N {
				b.StopTimer()
				_, db := startDB(b)
				insertRecipients(b, db, "c", "m", 0, table, 1000)
				b.StartTimer()
				if n := flushReads(b, db, "c", "m", reads); n != int64(min(uids, table)) {
					b.Fatalf("RowsAffected = %d; want %d", n, min(uids, table))
				}
			}
		})
	}
}
