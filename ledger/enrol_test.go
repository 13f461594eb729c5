package ledger_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestEnrolEntry (issue 51): a standing notice's enrolment is an entry
// about its member (uid kept, found by their UserID), whose body names
// when they joined and were told, and which verify leaves clean.
func TestEnrolEntry(t *testing.T) {
	f := newFixture(t, 2)
	ctx := context.Background()
	joined := f.clk.t.Add(-time.Minute)
	tx, err := f.db.BeginTx(ctx, &sql.TxOptions{})
	testenv.Check(t, "begin", err)
	_, err = f.l.Append(ctx, tx, corp, []ledger.Fact{ledger.Enrolment{MsgID: msg, UID: 1, UserID: "u1", Version: 1, Batch: 1_000_000,
		JoinedAt: joined, SentAt: f.clk.t, Deadline: joined.AddDate(0, 0, 7)}.Fact()})
	testenv.Check(t, "append", err)
	testenv.Check(t, "commit", tx.Commit())
	es, err := f.l.EntriesFor(ctx, corp, msg, "u1")
	testenv.Check(t, "entries", err)
	if len(es) != 1 || es[0].Kind != ledger.KindEnrol || !es[0].Person || es[0].UID != 1 {
		t.Fatalf("u1's entries = %+v; want one enrol entry about uid 1", es)
	}
	for _, want := range []string{`"joined_at":"` + joined.UTC().Format("2006-01-02T15:04:05Z") + `"`, `"sent_at":"`, `"userid":"u1"`, `"version":1`} {
		if !strings.Contains(string(es[0].Body), want) {
			t.Errorf("body %s lacks %s", es[0].Body, want)
		}
	}
	if rep := f.verify(t, ledger.Day(f.clk.t)); len(rep.Problems) != 0 {
		t.Errorf("verify: %v; want clean", rep.Problems)
	}
}
