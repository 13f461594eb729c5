package faulttest

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestLedgerFlushdKill9: the real flushd process is killed with SIGKILL
// twice inside a batch's transaction, while WeCom delivers a burst. Each
// time the test holds the corp's ledger head (ledger_heads, FOR UPDATE:
// the last lock every writer takes) until flushd's batch has updated its
// read rows and waits for the head, then kills flushd there, between its
// UPDATEs and its COMMIT, and lets the head go. The killed batch must
// leave nothing (the read count does not move), its reads come back from
// Kafka to the next flushd, and at the end the evidence ledger has no
// gap and no duplicate, one signal entry per read row, one for one, and
// `yidu evidence verify` finds nothing.
func TestLedgerFlushdKill9(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, envOptions{Notices: 2, Members: 800, Flushd: []string{"flushd-0"}})
	cfg, err := mysql.ParseDSN(e.dsn)
	testenv.Check(t, "dsn", err)
	fl := e.flushd[0]
	// The burst in two halves: the second is played once the head is
	// held for the second kill, so the restarted flushd has new reads to
	// batch then (the whole burst could be flushed before it otherwise).
	half := len(e.reads) / 2
	done := e.wecom.goPlay(context.Background(), e.reads[:half], 8)
	var rest <-chan struct{}
	const kills = 2
	last := 0
	for i := 1; i <= kills; i++ {
		// The head exists once a first batch committed; the second kill
		// waits for the restarted flushd to commit batches of its own.
		testenv.WaitFor(t, 60*time.Second, "a batch committed", func() bool { return e.readRows() > last })
		tx, err := e.db.BeginTx(context.Background(), nil)
		testenv.Check(t, "begin", err)
		var next uint64
		testenv.Check(t, "hold the head", tx.QueryRow("SELECT next_seq FROM ledger_heads WHERE corp_id = ? FOR UPDATE", app.CorpID).Scan(&next))
		var holder int64
		testenv.Check(t, "the holder's connection", tx.QueryRow("SELECT CONNECTION_ID()").Scan(&holder))
		// A failed wait below must not keep the head (and the database's
		// DROP at cleanup) held; after the Rollback below this is a no-op.
		t.Cleanup(func() { _ = tx.Rollback() })
		if i == kills {
			<-done
			rest = e.wecom.goPlay(context.Background(), e.reads[half:], 8)
		}
		before := e.readRows()
		// flushd's batch: rows updated, waiting for the head (Append's
		// first statement on it; MariaDB may show the transaction
		// RUNNING while it waits).
		// Found two ways: a transaction waits for a lock this test's
		// transaction holds (InnoDB's lock waits: the head is all it
		// holds), or one shows Append's statement on the head
		// (innodb_trx's trx_query, the processlist's info). It may have
		// modified no row: a batch Kafka delivers again after a kill,
		// whose reads are all on record, still takes the head. Looked
		// for past InnoDB's lock wait timeout (50 s), after which flushd
		// retries the batch and waits again; what the server shows is
		// logged while nothing is found, for the next one to read.
		// Polled every 250 ms: MariaDB refreshes innodb_trx and
		// innodb_lock_waits only when they have not been read for 100 ms
		// (at WaitFor's 20 ms they stayed the snapshot of the first look,
		// taken before the batch arrived: CI, stop 54).
		var modified int
		lastDump := time.Now()
		testenv.WaitEvery(t, 150*time.Second, 250*time.Millisecond, "flushd's batch waits for the ledger head", func() bool {
			var waiting int
			err := e.db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(r.trx_rows_modified), 0) FROM information_schema.innodb_lock_waits w
				JOIN information_schema.innodb_trx r ON r.trx_id = w.requesting_trx_id
				JOIN information_schema.innodb_trx b ON b.trx_id = w.blocking_trx_id
				WHERE b.trx_mysql_thread_id = ?`, holder).Scan(&waiting, &modified)
			if err == nil && waiting == 0 {
				err = e.db.QueryRow(`SELECT COUNT(*), COALESCE(MAX(t.trx_rows_modified), 0) FROM information_schema.innodb_trx t
					JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
					WHERE p.db = ? AND (COALESCE(t.trx_query, '') LIKE 'INSERT INTO ledger_heads%' OR COALESCE(p.info, '') LIKE 'INSERT INTO ledger_heads%')`, cfg.DBName).Scan(&waiting, &modified)
			}
			if err != nil {
				t.Logf("looking for the waiting batch: %v", err)
			}
			if waiting == 0 && time.Since(lastDump) > 10*time.Second {
				lastDump = time.Now()
				dumpTransactions(t, e, cfg.DBName)
			}
			return err == nil && waiting > 0
		})
		fl.kill9(t)
		testenv.Check(t, "let the head go", tx.Rollback())
		time.Sleep(500 * time.Millisecond)
		if after := e.readRows(); after != before {
			t.Fatalf("kill %d: %d read rows before, %d after; the killed batch (%d rows modified) committed", i, before, after, modified)
		}
		t.Logf("kill %d: flushd killed inside a batch waiting at the ledger head (%d rows modified), at ledger seq %d, %d rows read: nothing of it committed", i, modified, next, before)
		last = before
		e.expire(fl)
		fl = e.startMember(fmt.Sprintf("flushd-%d", i), "")
	}
	<-rest
	e.verify("ledger: flushd kill -9 mid-batch", fmt.Sprintf("%d× kill -9 of flushd inside a batch's transaction (held at the ledger head), restarted at once", kills))
	checkLedger(t, e)
}

// checkLedger: the corp's ledger has no gap and no duplicate, its signal
// entries are the read rows one for one, and `yidu evidence verify`
// agrees.
func checkLedger(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	blocks := testenv.Column[string](t, e.db, "SELECT CONCAT(first_seq, '+', count) FROM ledger_blocks WHERE corp_id = ? ORDER BY first_seq", app.CorpID)
	next := uint64(1)
	for _, b := range blocks {
		var first, count uint64
		fmt.Sscanf(b, "%d+%d", &first, &count)
		if first != next {
			t.Fatalf("ledger blocks %v: a gap or an overlap at seq %d", blocks, next)
		}
		next += count
	}
	var head uint64
	testenv.Check(t, "head", e.db.QueryRow("SELECT next_seq FROM ledger_heads WHERE corp_id = ?", app.CorpID).Scan(&head))
	if head != next {
		t.Fatalf("the head's next seq is %d, the blocks end at %d", head, next-1)
	}
	l, err := ledger.New(e.db, ledger.Options{})
	testenv.Check(t, "ledger", err)
	signals := map[string]int{}
	for _, m := range e.msgs {
		es, err := l.EntriesOf(ctx, app.CorpID, m.ID)
		testenv.Check(t, "entries", err)
		for _, en := range es {
			if en.Kind == ledger.KindSignal {
				signals[fmt.Sprintf("%s/%d", m.ID, en.UID)]++
			}
		}
	}
	rows := testenv.Column[string](t, e.db, "SELECT CONCAT(msgid, '/', uid) FROM message_read_record WHERE corp_id = ? AND is_read = 1", app.CorpID)
	for _, r := range rows {
		if signals[r] != 1 {
			t.Errorf("read row %s has %d signal entries; want 1", r, signals[r])
		}
		delete(signals, r)
	}
	if len(signals) != 0 {
		t.Errorf("%d signal entries without a read row: %v", len(signals), signals)
	}
	out, err := exec.Command(yiduBin, "evidence", "verify", "--corp", app.CorpID, "--config", e.cfgPath, "--log-level", "warn").CombinedOutput()
	if err != nil {
		t.Fatalf("yidu evidence verify: %v\n%s", err, out)
	}
	t.Logf("%d read rows, %d ledger entries in %d blocks, one signal entry each; yidu evidence verify: %s", len(rows), next-1, len(blocks),
		strings.TrimSpace(lastLine(string(out))))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// dumpTransactions logs the server's open transactions of db and what
// their connections run (a batch not found waiting at the head).
func dumpTransactions(t *testing.T, e *env, db string) {
	t.Helper()
	rows, err := e.db.Query(`SELECT t.trx_mysql_thread_id, t.trx_state, t.trx_rows_modified, COALESCE(t.trx_query, ''),
		COALESCE(p.db, ''), COALESCE(p.command, ''), COALESCE(p.state, ''), COALESCE(p.info, '')
		FROM information_schema.innodb_trx t LEFT JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id`)
	if err != nil {
		t.Logf("transactions: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id, mod int64
		var state, query, pdb, cmd, pstate, info string
		if rows.Scan(&id, &state, &mod, &query, &pdb, &cmd, &pstate, &info) == nil {
			t.Logf("transaction of connection %d: %s, %d rows modified, db %q, %s %q, query %.80q, info %.80q", id, state, mod, pdb, cmd, pstate, query, info)
		}
	}
}
