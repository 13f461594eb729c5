package flushd

import (
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// BenchmarkStatementForms runs the Writer with each statement form
// (StatementJSONTable, StatementCase) one after the other in every
// iteration, on the same 50,000-row message and card-press reads, so a
// shared machine's load weighs on both alike; it reports each form's
// rows/s and the CASE form's time as a share of JSON_TABLE's (%case).
//
//	YIDU_TEST_REAL=1 go test -run '^$' -bench BenchmarkStatementForms -benchtime 3x ./flushd
func BenchmarkStatementForms(b *testing.B) {
	db, reads := benchSetup(b)
	ctx := context.Background()
	writers := make([]*Writer, len(statements))
	for i, st := range statements {
		w, err := NewWriter(db, WriterOptions{BatchSize: DefaultBatchSize, Statement: st})
		testenv.Check(b, "NewWriter", err)
		writers[i] = w
	}
	elapsed := make([]time.Duration, len(statements))
	b.ResetTimer()
	for range b.N {
		for i, w := range writers {
			b.StopTimer()
			_, err := db.ExecContext(ctx, resetBench)
			testenv.Check(b, "reset", err)
			b.StartTimer()
			start := time.Now()
			_, _, err = w.Write(ctx, "corp", "bench", reads)
			elapsed[i] += time.Since(start)
			testenv.Check(b, statements[i].String(), err)
			if n := countRead(b, db); n != benchRows {
				b.Fatalf("%s: %d rows read; want %d", statements[i], n, benchRows)
			}
		}
	}
	b.StopTimer()
	for i, st := range statements {
		b.ReportMetric(float64(benchRows*b.N)/elapsed[i].Seconds(), st.String()+"-rows/s")
	}
	b.ReportMetric(100*elapsed[1].Seconds()/elapsed[0].Seconds(), "%case")
}
