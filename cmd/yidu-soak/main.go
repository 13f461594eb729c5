// Command yidu-soak runs the production binary for a bounded time at a
// fixed fraction of the benchmark's maximum rate and checks that nothing
// grows that should not: the yidu process's memory and goroutines stay
// flat, flushd's lag stays bounded, every read answered 200 reaches MySQL
// with its CreateTime, and SIGTERM stops the process cleanly.
//
//	go run ./cmd/yidu-soak [-duration 10m] [-max-rate 4000] [-load 0.5] [-flush-interval 1m]
//
// It builds cmd/yidu and cmd/yidu-kfake into a temporary directory, creates
// its own MariaDB database and Redis key prefix, starts yidu-kfake and
// `yidu serve` as child processes, registers notices through the dashboard
// API with a bearer token (YIDU_API_TOKEN), and drives signed
// template_card_event callbacks with the wecomsim Pusher, an open loop at
// the rate given, retrying like WeCom. Every -sample it records yidu's RSS
// (/proc/<pid>/status), its goroutines, heap and flushd lag (the receiver's
// /metrics), the callbacks accepted and the window's p99, and MySQL's
// is_read count. At the end it waits for MySQL to hold exactly the reads
// answered 200, stops yidu with SIGTERM, prints the samples and a verdict
// as markdown, removes what it created and exits 1 when a check failed.
// See docs/reliability.md, "Soak".
package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
)

func main() { os.Exit(rig.Main("yidu-soak", run)) }

// run is main without the process.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := rig.NewCommand("yidu-soak", stderr, 0,
		"bound on the whole run (default -duration + 15m; cleanup runs after it)", "copy yidu's log to stderr")
	fs := cmd.FlagSet
	var cfg Config
	fs.StringVar(&cfg.YiduBin, "yidu-bin", "", "yidu binary (default: go build ./cmd/yidu)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "how long callbacks are sent")
	fs.Float64Var(&cfg.MaxRate, "max-rate", 4000, "the benchmark's maximum rate, callbacks/s (docs/benchmarks.md: 4-8k/s)")
	fs.Float64Var(&cfg.Load, "load", 0.5, "fraction of -max-rate to send")
	fs.Float64Var(&cfg.Rate, "rate", 0, "callbacks/s (overrides -max-rate × -load)")
	fs.IntVar(&cfg.Recipients, "recipients", 100_000, "recipients of each notice (the API takes at most 100,000)")
	fs.IntVar(&cfg.Messages, "messages", 0, "notices (0: enough that every callback is a new read)")
	fs.IntVar(&cfg.Conns, "c", 256, "callbacks in flight at most (the Pusher's concurrency)")
	fs.DurationVar(&cfg.FlushInterval, "flush-interval", time.Minute, "flushd interval (production default 1m)")
	fs.DurationVar(&cfg.Sample, "sample", 10*time.Second, "sampling period")
	fs.DurationVar(&cfg.Warmup, "warmup", 0, "samples before this are the warm-up, left out of the thirds compared (default: every recipient read once + one sample, at least 1m)")
	if err := cmd.Parse(args); err != nil {
		return err
	}
	cfg.Servers, cfg.KfakeBin = cmd.Servers, cmd.KfakeBin
	if cfg.Rate <= 0 {
		cfg.Rate = cfg.MaxRate * cfg.Load
	}
	cfg.Progress = stderr
	if cmd.Verbose {
		cfg.YiduLog = stderr
	}
	total := cmd.Timeout
	if total <= 0 {
		total = cfg.Duration + 15*time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, total)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if rep != nil {
		rep.WriteMarkdown(stdout)
	}
	if err == nil && !rep.Passed() {
		err = ErrFailed
	}
	return err
}
