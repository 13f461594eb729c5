package flushd

import (
	"context"
	"testing"

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
	forms := make([]benchForm, len(statements))
	for i, st := range statements {
		w, err := NewWriter(db, WriterOptions{BatchSize: DefaultBatchSize, Statement: st})
		testenv.Check(b, "NewWriter", err)
		forms[i] = benchForm{st.String(), func() error { _, _, err := w.Write(ctx, "corp", "bench", reads); return err }}
	}
	elapsed := benchForms(b, db, forms)
	b.ReportMetric(100*elapsed[1].Seconds()/elapsed[0].Seconds(), "%case")
}
