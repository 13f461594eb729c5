package flushd

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// BenchmarkFlushLedger and BenchmarkFlushNoLedger are the Writer on the
// benchmark's 50,000 card presses (10 batches of 5000) with and without
// the evidence ledger (issue 40: appends may add at most 10 % to flushd's
// CPU per 1,000 reads). Besides rows/s each reports the CPU seconds per
// 1,000 reads of this process (flushd's side: building statements and
// bodies, hashing) and of the MySQL server when its pid can be found
// (YIDU_BENCH_MYSQLD_PID, else pidof mariadbd/mysqld): cpu-ms/1k-go and
// cpu-ms/1k-mysqld.
func BenchmarkFlushLedger(b *testing.B) { benchLedger(b, true) }

// BenchmarkFlushNoLedger: see BenchmarkFlushLedger.
func BenchmarkFlushNoLedger(b *testing.B) { benchLedger(b, false) }

func benchLedger(b *testing.B, withLedger bool) {
	db, reads := benchSetup(b)
	opts := WriterOptions{BatchSize: DefaultBatchSize}
	if withLedger {
		l, err := ledger.New(db, ledger.Options{})
		testenv.Check(b, "ledger", err)
		opts.Ledger = l
	}
	w, err := NewWriter(db, opts)
	testenv.Check(b, "NewWriter", err)
	ctx := context.Background()
	server := mysqldPID()
	var elapsed, goCPU, serverCPU time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		resetLedgerBench(b, db)
		b.StartTimer()
		start, c0, s0 := time.Now(), processCPU(), pidCPU(server)
		_, _, err := w.Write(ctx, "corp", "bench", reads)
		testenv.Check(b, "write", err)
		elapsed += time.Since(start)
		goCPU += processCPU() - c0
		serverCPU += pidCPU(server) - s0
	}
	b.StopTimer()
	k := float64(benchRows*b.N) / 1000
	b.ReportMetric(float64(benchRows*b.N)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(goCPU.Microseconds())/1000/k, "cpu-ms/1k-go")
	if server > 0 {
		b.ReportMetric(float64(serverCPU.Microseconds())/1000/k, "cpu-ms/1k-mysqld")
	}
	if n := countRead(b, db); n != benchRows {
		b.Fatalf("%d rows read after the benchmark; want %d", n, benchRows)
	}
	if withLedger {
		var n int
		testenv.Check(b, "count", db.QueryRow("SELECT SUM(count) FROM ledger_blocks").Scan(&n))
		if n != benchRows {
			b.Fatalf("%d ledger entries; want %d", n, benchRows)
		}
	}
}

func resetLedgerBench(b *testing.B, db *sql.DB) {
	b.Helper()
	for _, q := range []string{resetBench, "DELETE FROM ledger_blocks", "DELETE FROM ledger_heads"} {
		_, err := db.Exec(q)
		testenv.Check(b, q, err)
	}
}

// processCPU is this process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mysqldPID finds the local MySQL server's pid (0: not found).
func mysqldPID() int {
	if v, err := strconv.Atoi(os.Getenv("YIDU_BENCH_MYSQLD_PID")); err == nil {
		return v
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		if c := strings.TrimSpace(string(comm)); c == "mariadbd" || c == "mysqld" {
			return pid
		}
	}
	return 0
}

// pidCPU is process pid's user and system CPU time from /proc (clock
// ticks of 10 ms).
func pidCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkFlushLedgerReplicas and BenchmarkFlushNoLedgerReplicas: two
// Writers at once, as two flushd replicas, each writing 25,000 card
// presses of its own message of the same corp in batches of 5000. With
// the ledger both take the corp's head lock last in each batch's
// transaction; the benchmark reports rows/s and InnoDB's row-lock wait
// per batch (Innodb_row_lock_time, ms), which is the serialization.
func BenchmarkFlushLedgerReplicas(b *testing.B) { benchReplicas(b, true) }

// BenchmarkFlushNoLedgerReplicas: see BenchmarkFlushLedgerReplicas.
func BenchmarkFlushNoLedgerReplicas(b *testing.B) { benchReplicas(b, false) }

func benchReplicas(b *testing.B, withLedger bool) {
	db := testenv.MySQL(b)
	db.SetMaxOpenConns(16)
	const half = benchRows / 2
	msgs := []string{"bench", "bench2"}
	insertRecipients(b, db, "corp", msgs[0], 0, half)
	insertRecipients(b, db, "corp", msgs[1], 0, half)
	reads := make([]Read, half)
	for i := range reads {
		at := base + int64(i%3600)
		reads[i] = Read{UID: uint32(i), At: at, Source: delta.SourceCard, Button: at}
	}
	var writers [2]*Writer
	for i := range writers {
		opts := WriterOptions{BatchSize: DefaultBatchSize}
		if withLedger {
			l, err := ledger.New(db, ledger.Options{})
			testenv.Check(b, "ledger", err)
			opts.Ledger = l
		}
		w, err := NewWriter(db, opts)
		testenv.Check(b, "NewWriter", err)
		writers[i] = w
	}
	lockTime := func() int64 {
		var name string
		var v int64
		testenv.Check(b, "status", db.QueryRow("SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_time'").Scan(&name, &v))
		return v
	}
	ctx := context.Background()
	var elapsed time.Duration
	var waited int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		for _, q := range []string{
			"UPDATE message_read_record SET is_read = 0, read_time = NULL, source = 0, button_at = NULL WHERE corp_id = 'corp'",
			"DELETE FROM ledger_blocks", "DELETE FROM ledger_heads"} {
			_, err := db.Exec(q)
			testenv.Check(b, q, err)
		}
		b.StartTimer()
		start, l0 := time.Now(), lockTime()
		errs := make(chan error, 2)
		for i, w := range writers {
			go func() {
				_, _, err := w.Write(ctx, "corp", msgs[i], reads)
				errs <- err
			}()
		}
		for range writers {
			testenv.Check(b, "write", <-errs)
		}
		elapsed += time.Since(start)
		waited += lockTime() - l0
	}
	b.StopTimer()
	b.ReportMetric(float64(benchRows*b.N)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(waited)/float64(b.N*benchRows/DefaultBatchSize), "lock-wait-ms/batch")
	if withLedger {
		var n int
		testenv.Check(b, "count", db.QueryRow("SELECT SUM(count) FROM ledger_blocks").Scan(&n))
		if n != benchRows {
			b.Fatalf("%d ledger entries; want %d", n, benchRows)
		}
	}
}
