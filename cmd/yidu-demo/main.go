// Command yidu-demo shows yidu doing its whole job in one process, with
// nothing installed: it starts embedded Redis-, MySQL- and Kafka-protocol
// servers (internal/embedded) for whichever of YIDU_REDIS_ADDR,
// YIDU_MYSQL_DSN and YIDU_KAFKA_BROKERS is unset, a fake WeCom API, and
// yidu's receiver, flushd and dashboard (cmd/internal/yidu, as `yidu serve`
// builds them). It seeds a synthetic company through the real directory
// sync, registers a notice to everyone through the dashboard API (which
// sends the template cards through the fake WeCom), and plays WeCom: signed,
// encrypted callbacks over HTTP with a realistic arrival curve, WeCom's
// retries and a few duplicates. It prints the dashboard URL and a login and
// shows a progress bar. Once every read arrived it shows the rest of the
// job (round.go): a notice with full text acknowledged on the reading page
// by members signed in through the fake WeCom, one member's evidence
// (JSON and PDF, saved in a temporary directory), a notice to 全员 held
// for approval until the approval card's 批准 is pressed, and the ledger
// verified. It runs until Ctrl-C.
//
//	go run ./cmd/yidu-demo [-employees N] [-speed X] [-exit-when-done -timeout D]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "yidu-demo:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := m.Run(ctx)
	if err == nil {
		err = m.Wait(ctx)
	}
	if cerr := m.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "yidu-demo:", err)
		os.Exit(1)
	}
}
