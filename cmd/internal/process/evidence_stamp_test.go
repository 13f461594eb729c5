package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// TestEvidenceDayStampConsistency (issue 48): the evidence adapter gives
// a record's day checkpoint (sealed and stamped by a real TSA) with the
// consistency proof from it to the record's checkpoint, a later one of
// the same log; transparency-dev/merkle's verifier accepts it. A record
// whose checkpoint is older than the day's gets no day checkpoint.
func TestEvidenceDayStampConsistency(t *testing.T) {
	tsa := tsatest.Start(t)
	db := testenv.MySQL(t)
	ctx := context.Background()
	const corp = "wwdaystamp"
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, ledger.Zone)
	skey, _, err := note.GenerateKey(rand.Reader, "yidu.test")
	testenv.Check(t, "key", err)
	signer, _, err := ledger.ParseSigningKey(skey)
	testenv.Check(t, "signer", err)
	stamper, err := ledger.NewTSA(tsa.URL, nil)
	testenv.Check(t, "tsa", err)
	l, err := ledger.New(db, ledger.Options{Now: func() time.Time { return now }, Signer: signer, Stamper: stamper})
	testenv.Check(t, "ledger", err)
	appendVersions := func(from, n int) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		testenv.Check(t, "begin", err)
		var facts []ledger.Fact
		for i := from; i < from+n; i++ {
			facts = append(facts, ledger.Version{MsgID: "m1", Number: i, SHA256: strings.Repeat("ab", 32), At: now}.Fact())
		}
		_, err = l.Append(ctx, tx, corp, facts)
		testenv.Check(t, "append", err)
		testenv.Check(t, "commit", tx.Commit())
	}
	appendVersions(1, 2)
	first, err := l.Checkpoint(ctx, corp)
	testenv.Check(t, "checkpoint", err)
	appendVersions(3, 1)
	now = now.Add(24 * time.Hour)
	day, err := l.Seal(ctx, corp, "2026-12-03")
	if err != nil || day.Timestamp == nil || day.Size != 3 {
		t.Fatalf("Seal = size %d, token %v, %v; want the day's 3 entries stamped", day.Size, day.Timestamp != nil, err)
	}
	appendVersions(4, 4)
	later, err := l.Checkpoint(ctx, corp)
	testenv.Check(t, "checkpoint", err)

	st, ok, err := evidenceLedger{l}.DayStamp(ctx, corp, 2, int64(later.Size))
	if err != nil || !ok || st.Size != 3 || st.Consistency == nil || st.Consistency.TreeSize != int64(later.Size) {
		t.Fatalf("DayStamp(2, %d) = %+v, %v, %v; want the day's checkpoint with a proof to %d", later.Size, st, ok, err, later.Size)
	}
	if err := tsa.Verify([]byte(st.Note), st.Token); err != nil {
		t.Errorf("openssl ts -verify of the day checkpoint's token: %v", err)
	}
	var path [][]byte
	for _, h := range st.Consistency.Path {
		b, err := hex.DecodeString(h)
		testenv.Check(t, "path", err)
		path = append(path, b)
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, uint64(st.Size), later.Size, path, day.Root[:], later.Root[:]); err != nil {
		t.Errorf("proof.VerifyConsistency(day %d, later %d) = %v", st.Size, later.Size, err)
	}
	if _, ok, err := (evidenceLedger{l}).DayStamp(ctx, corp, 2, int64(first.Size)); err != nil || ok {
		t.Errorf("DayStamp to a checkpoint of %d = %v, %v; want none older than the day's", first.Size, ok, err)
	}
}
