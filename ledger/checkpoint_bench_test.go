package ledger_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// BenchmarkCheckpoint is what flushd's minute costs the log: a signed
// checkpoint of a corp whose log grew by a storm's 5,000-entry batch
// since the last one (the compact range of the last one is the start),
// over a log of 50,000 entries; and, once, the first checkpoint of such
// a log (every leaf hashed, as after the migration).
func BenchmarkCheckpoint(b *testing.B) {
	db := testenv.MySQL(b)
	ctx := context.Background()
	skey, _, _ := note.GenerateKey(rand.Reader, "bench")
	signer, _, err := ledger.ParseSigningKey(skey)
	testenv.Check(b, "key", err)
	l, err := ledger.New(db, ledger.Options{Signer: signer})
	testenv.Check(b, "ledger", err)
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	uid := uint32(0)
	grow := func(n int) {
		facts := make([]ledger.Fact, n)
		for i := range facts {
			facts[i] = ledger.Signal{MsgID: "storm", UID: uid, Source: 1, ReadTime: at}.Fact()
			uid++
		}
		tx, err := db.BeginTx(ctx, nil)
		testenv.Check(b, "begin", err)
		_, err = l.Append(ctx, tx, "wwbench", facts)
		testenv.Check(b, "append", err)
		testenv.Check(b, "commit", tx.Commit())
	}
	for range 10 {
		grow(5000)
	}
	start := time.Now()
	if _, err := l.Checkpoint(ctx, "wwbench"); err != nil {
		b.Fatal(err)
	}
	first := time.Since(start)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		grow(5000)
		b.StartTimer()
		if _, err := l.Checkpoint(ctx, "wwbench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(first.Microseconds())/1000, "ms/first-of-50k")
}
