package flushd

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// The kill test's child: env childDSN names the database. It writes
// killReads reads of message "kill" in batches of killBatch with the
// ledger, from the start (as Kafka redelivers what was not committed),
// and prints "appended" after each batch's entries are in its
// transaction and before its COMMIT, then pauses, so the parent can kill
// it between the two.
const (
	childDSN  = "YIDU_LEDGER_KILL_DSN"
	killReads = 3000
	killBatch = 250
)

// pausingLedger appends, then tells the parent and waits: a kill then
// lands inside the batch's transaction.
type pausingLedger struct{ l *ledger.Ledger }

func (p pausingLedger) Append(ctx context.Context, tx ledger.Tx, corp string, facts []ledger.Fact) (uint64, error) {
	seq, err := p.l.Append(ctx, tx, corp, facts)
	fmt.Println("appended", seq, len(facts))
	time.Sleep(30 * time.Millisecond)
	return seq, err
}

func TestLedgerKillChild(t *testing.T) {
	dsn := os.Getenv(childDSN)
	if dsn == "" {
		t.Skip("the child of TestLedgerKill9")
	}
	db, err := sql.Open("mysql", dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	l, err := ledger.New(db, ledger.Options{})
	testenv.Check(t, "ledger", err)
	w, err := NewWriter(db, WriterOptions{BatchSize: killBatch, Ledger: pausingLedger{l}})
	testenv.Check(t, "writer", err)
	reads := make([]Read, killReads)
	for i := range reads {
		at := base + int64(i)
		reads[i] = Read{UID: uint32(i), At: at, Source: delta.SourceCard, Button: at}
	}
	if _, _, err := w.Write(context.Background(), "wwkill", "kill", reads); err != nil {
		t.Fatalf("Write: %v", err)
	}
	fmt.Println("done")
}

// child starts the kill test's child on dsn and returns it and its
// stdout's lines.
func startChild(t *testing.T, dsn string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLedgerKillChild$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), childDSN+"="+dsn)
	out, err := cmd.StdoutPipe()
	testenv.Check(t, "pipe", err)
	cmd.Stderr = os.Stderr
	testenv.Check(t, "start child", cmd.Start())
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, lines
}

// TestLedgerKill9: flushd's batch writer killed with SIGKILL between a
// batch's ledger append and its COMMIT, twice, then two replicas writing
// the same reads at once (every batch redelivered): the ledger has no gap
// and no duplicate, and one signal entry per read row, one for one.
func TestLedgerKill9(t *testing.T) {
	testenv.Long(t)
	dsn := testenv.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	testenv.Check(t, "open", err)
	defer db.Close()
	_, err = db.Exec("INSERT INTO messages (corp_id, msgid, app, agent_id, sent_at, recipient_count, audience_hash, state) VALUES ('wwkill', 'kill', 'hr', 1, '2024-12-31 00:00:00', ?, '', 1)", killReads)
	testenv.Check(t, "message", err)
	insertRecipients(t, db, "wwkill", "kill", 0, killReads)

	for round, killAt := range []int{3, 5} {
		cmd, lines := startChild(t, dsn)
		n := 0
		for line := range lines {
			if strings.HasPrefix(line, "appended") {
				if n++; n == killAt {
					break
				}
			}
		}
		if n != killAt {
			t.Fatalf("round %d: the child ended after %d appends, before the kill", round, n)
		}
		testenv.Check(t, "kill -9", cmd.Process.Kill())
		cmd.Wait()
		var entries, read int
		testenv.Check(t, "count", db.QueryRow("SELECT COALESCE(SUM(count), 0) FROM ledger_blocks WHERE corp_id = 'wwkill'").Scan(&entries))
		testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM message_read_record WHERE corp_id = 'wwkill' AND is_read = 1").Scan(&read))
		if entries != read || read == 0 || read == killReads {
			t.Fatalf("after kill %d: %d entries, %d read rows; want equal, some and not all", round+1, entries, read)
		}
		t.Logf("kill %d after %d appends: %d rows read, %d entries", round+1, killAt, read, entries)
	}
	// Two replicas at once, both from the start.
	var done [2]bool
	for i := range 2 {
		_, lines := startChild(t, dsn)
		go func() {
			for line := range lines {
				if line == "done" {
					done[i] = true
				}
			}
		}()
	}
	testenv.WaitFor(t, 2*time.Minute, "both replicas done", func() bool {
		var n int
		db.QueryRow("SELECT COUNT(*) FROM message_read_record WHERE corp_id = 'wwkill' AND is_read = 1").Scan(&n)
		return n == killReads
	})
	time.Sleep(500 * time.Millisecond)

	seqs := testenv.Column[string](t, db, "SELECT CONCAT(first_seq, '+', count) FROM ledger_blocks WHERE corp_id = 'wwkill' ORDER BY first_seq")
	next := uint64(1)
	for _, s := range seqs {
		var first, count uint64
		fmt.Sscanf(s, "%d+%d", &first, &count)
		if first != next {
			t.Fatalf("blocks %v: a gap or overlap at seq %d", seqs, next)
		}
		next += count
	}
	if next-1 != killReads {
		t.Fatalf("%d entries for %d reads", next-1, killReads)
	}
	l, err := ledger.New(db, ledger.Options{})
	testenv.Check(t, "ledger", err)
	rep, err := l.Verify(context.Background(), "wwkill", "")
	testenv.Check(t, "verify", err)
	if len(rep.Problems) != 0 || rep.Entries != killReads || rep.Facts != killReads {
		t.Fatalf("Verify: %d entries, %d read rows, problems %v; want %d each, none", rep.Entries, rep.Facts, rep.Problems, killReads)
	}
}
