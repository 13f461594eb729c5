// Command yidu-bench measures the 9:00 storm: one notice to R recipients,
// every recipient's template_card_event (plus WeCom retries and
// duplicates) pre-encrypted and signed, delivered on C keep-alive
// connections to three systems in turn, with the same generator:
//
//   - ceiling: the receiver's HTTP stack (chi, callback.NewServer)
//     answering 200 after reading the body;
//   - naive: verify, decrypt, parse, then one MySQL transaction per
//     callback with a hot read_count row (package naive);
//   - yidu: the real pipeline, receiver → Redis → Kafka (yidu-kfake, its
//     own process) → flushd → MySQL, the dashboard polled throughout.
//
// It prints a markdown table (and -json FILE) and exits non-zero when naive
// or yidu did not end with exactly R reads. See docs/benchmarks.md.
//
//	go run ./cmd/yidu-bench [-r 100000] [-c 64] [-extra 0.05] [-flush-interval 1s] [-json out.json] [-cpuprofile yidu.pprof]
//
// Everything runs on loopback against the MariaDB and Redis given; the
// bench creates its own database and Redis key prefix and removes both,
// and stops yidu-kfake, on every exit path including SIGINT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/yidu-io/yidu/internal/kafkatest"
	"github.com/yidu-io/yidu/internal/rig"
)

func main() { os.Exit(rig.Main("yidu-bench", run)) }

// run is main without the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := rig.NewCommand("yidu-bench", stderr, 5*time.Minute,
		"bound on the whole run (cleanup runs after it)", "log the yidu arm's warnings")
	fs := cmd.FlagSet
	var cfg Config
	kafka := fs.String("kafka", "", "Kafka of the yidu arm: \"apache\" starts a three-node Apache Kafka cluster from -kafka-libs; host:port,... uses those brokers; empty starts yidu-kfake as a child process")
	fs.StringVar(&cfg.KafkaLibs, "kafka-libs", os.Getenv(kafkatest.LibsEnv), "with -kafka apache: the folder of Kafka's jars (.ci/kafka/fetch.sh prints it)")
	fs.IntVar(&cfg.Partitions, "partitions", 4, "partitions of the deltas topic (yidu-kfake)")
	fs.IntVar(&cfg.Recipients, "r", 100_000, "recipients R of the notice")
	fs.IntVar(&cfg.Conns, "c", 64, "concurrent keep-alive connections C")
	fs.Float64Var(&cfg.Extra, "extra", 0.05, "fraction of R delivered again: half WeCom retries, half duplicate presses")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", time.Second, "flushd interval for the yidu arm (production default is 1m)")
	fs.BoolVar(&cfg.Cold, "cold", false, "start the yidu arm's receiver with receiver.warm false (a cold UserID cache)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop at this many callbacks/s (0: closed loop, each connection sends when answered)")
	arms := fs.String("arms", strings.Join(defaultArms, ","), "arms to run, in order ceiling,naive,yidu,page (page: the reading page, issue 39)")
	fs.DurationVar(&cfg.ArmTimeout, "arm-timeout", 3*time.Minute, "bound on one arm's load phase")
	fs.StringVar(&cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the yidu arm here (generator goroutines carry the label role=generator), and its allocations to this path .allocs0 (start) and .allocs (end)")
	fs.IntVar(&cfg.AttachmentReaders, "attachment-readers", DefaultAttachmentReaders, "page arm: readers that fetch a 2 MiB PDF in ranges, then again with its ETag, in a phase of their own (0: none, -1: all)")
	fs.Float64Var(&cfg.PageSignIn, "page-signin", 0.2, "page arm: share of the readers without a session, who sign in first (the others signed in earlier)")
	fs.BoolVar(&cfg.NoLedger, "no-ledger", false, "run the yidu arm's flushd without the evidence ledger (the comparison arm of its cost)")
	jsonOut := fs.String("json", "", "write the report as JSON here")
	if err := cmd.Parse(args); err != nil {
		return err
	}
	cfg.Servers, cfg.KfakeBin = cmd.Servers, cmd.KfakeBin
	switch *kafka {
	case "":
	case "apache":
		cfg.ApacheKafka = true
	default:
		cfg.KafkaBrokers = strings.Split(*kafka, ",")
	}
	cfg.Arms = strings.Split(*arms, ",")
	cfg.Progress = stderr
	if cmd.Verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	ctx, cancel := context.WithTimeout(ctx, cmd.Timeout)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if rep != nil {
		writeTable(stdout, rep)
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); werr != nil {
				return errors.Join(err, werr)
			}
		}
	}
	return err
}

// writeTable prints the report as markdown.
func writeTable(w io.Writer, rep *Report) {
	cold := ""
	if rep.Cold {
		cold = " receiver.warm=false"
	}
	if rep.NoLedger {
		cold += " flushd without ledger"
	}
	fmt.Fprintf(w, "\nR=%d C=%d extra=%.0f%% flush=%s rate=%s%s Kafka: %s GOMAXPROCS=%d GOGC=%d %s load avg before %.2f %.2f %.2f\n\n",
		rep.Recipients, rep.Conns, rep.Extra*100, rep.FlushInterval, rateString(rep.Rate), cold, rep.Kafka, rep.GOMAXPROCS, rep.GOGC, rep.GoVersion,
		rep.LoadAvgBefore[0], rep.LoadAvgBefore[1], rep.LoadAvgBefore[2])
	fmt.Fprintln(w, "| arm | accepted/s | p50 ms | p99 ms | p999 ms | errors | dashboard exact | MySQL exact | exact | MySQL UPDATEs | Redis msg / dedup | peak RSS MB | CPU s/1k: bench proc (Kafka) / mysqld (its threads of the bench's database) / redis | load avg |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---|---|")
	for _, r := range rep.Arms {
		exact := "n/a"
		if r.Exact != nil {
			exact = "yes"
			if !*r.Exact {
				exact = "NO: " + r.ExactDetail
			}
		}
		redisCol := "–"
		if r.RedisMsgBytes > 0 {
			redisCol = fmt.Sprintf("%.1f KB / %.1f MB (%d keys)", float64(r.RedisMsgBytes)/1024, float64(r.RedisDedupBytes)/1e6, r.RedisDedupKeys)
		}
		upd := "–"
		if r.Arm != armCeiling {
			upd = fmt.Sprint(r.MySQLUpdates)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f | %.2f | %.2f | %d | %s | %s | %s | %s | %s | %.0f | %s / %.3f (%.3f) / %.3f | %.2f |\n",
			r.Arm, r.PerSecond, r.P50ms, r.P99ms, r.P999ms, r.Errors, dashCell(r), after(r.MySQLExactMs, r.Arm),
			exact, upd, redisCol, r.PeakRSSMB, procCPUCell(r), r.MySQLdCPUPer1000, r.MySQLdDBCPUPer1000, r.RedisCPUPer1000, r.LoadAvg[0])
	}
	for _, r := range rep.Arms {
		if p := r.Page; p != nil {
			fmt.Fprintf(w, "\npage: %d readers (%d signed in, the others with a session), %d acks answered 200, %d opens deferred (429 请稍候) and tried again, %d refused (503); p99 ms: sign-in %.2f, page GET %.2f (p50 %.2f), read_to_end %.2f, ack POST %.2f (p50 %.2f); MySQL per reader (the server's, less its rate before the storm; flushd's writes included): %.2f queries, %.2f SELECTs; Redis acknowledged %d, page_signals (6) %d, read %d\n",
				p.Readers, p.SignedIn, p.Acked, p.Deferred, p.Refused, p.SignInP99ms, p.PageP99ms, p.PageP50ms, p.EndP99ms, p.AckP99ms, p.AckP50ms, p.MySQLQueries, p.MySQLSelects, p.InRedis, p.PageSignals, p.Read)
		}
		writeAttachment(w, r)
	}
	if len(rep.Ratios) > 0 {
		fmt.Fprintln(w)
		for _, k := range []string{"yidu/ceiling", "yidu/naive"} {
			if v, ok := rep.Ratios[k]; ok {
				fmt.Fprintf(w, "%s accepted/s: %.2f×\n", k, v)
			}
		}
		if v, ok := rep.Ratios[ratioPageCPU]; ok {
			fmt.Fprintf(w, "page CPU (all processes) per reader / ceiling CPU per callback: %.1f×\n", v)
		}
	}
	fmt.Fprintln(w)
}

// dashCell is the dashboard column: the page arm does not poll it (its
// exactness is Redis's and MySQL's counts, page.go).
func dashCell(r ArmResult) string {
	if r.Arm == armPage {
		return "–"
	}
	return after(r.DashboardExactMs, r.Arm)
}

func procCPUCell(r ArmResult) string {
	if r.KafkaCPUPer1000 > 0 {
		return fmt.Sprintf("%.3f (%.3f)", r.CPUPer1000, r.KafkaCPUPer1000)
	}
	return fmt.Sprintf("%.3f", r.CPUPer1000)
}

func rateString(r float64) string {
	if r <= 0 {
		return "closed-loop"
	}
	return fmt.Sprintf("%.0f/s", r)
}

func after(ms *float64, arm string) string {
	switch {
	case arm == armCeiling:
		return "–"
	case ms == nil:
		return "never"
	}
	return fmt.Sprintf("%+.0f ms", *ms)
}
