// Command yidu is the production binary: the WeCom callback receiver, the
// dashboard, flushd, migrations, directory sync and reconciliation.
//
//	yidu serve      --config yidu.yaml   # receiver + dashboard + flushd
//	yidu receiver   --config yidu.yaml
//	yidu flushd     --config yidu.yaml
//	yidu dashboard  --config yidu.yaml
//	yidu migrate    --config yidu.yaml up|status|down
//	yidu directory  --config yidu.yaml sync --app hr
//	yidu reconcile  --config yidu.yaml --msgid M | --all-active
//	yidu link       --config yidu.yaml --app hr --msgid M --to URL
//	yidu hash-password                   # reads a password on stdin
//	yidu healthcheck http://127.0.0.1:8080/readyz
//
// It reads flags and the environment, builds the parts (cmd/internal/yidu)
// and exits non-zero on failure. SIGINT/SIGTERM stop it cleanly.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
)

const usage = `usage: yidu <command> [--config FILE] [flags]

commands:
  serve        receiver + dashboard + flushd in one process
  receiver     the WeCom callback receiver
  flushd       the Kafka → MySQL micro-batcher
  dashboard    the dashboard and /api/v1
  migrate      up | status | down   (schema migrations)
  directory    sync --app NAME      (pull the WeCom directory)
  reconcile    --msgid M | --all-active   (repair Redis/MySQL drift)
  link         --app NAME --msgid M --to URL   (print a tracked link)
  hash-password  print a bcrypt hash of the password on stdin
  healthcheck URL  exit 0 when URL answers 200 (container probes)
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "yidu:", err)
		os.Exit(1)
	}
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet("yidu "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", getenv("YIDU_CONFIG"), "configuration file (YAML)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var (
		app       *string
		msgID     *string
		allActive *bool
		to        *string
	)
	switch cmd {
	case "directory":
		app = fs.String("app", "", "app name from the configuration")
	case "reconcile":
		msgID = fs.String("msgid", "", "message to reconcile")
		allActive = fs.Bool("all-active", false, "reconcile every message within the Redis TTL")
		app = fs.String("app", "", "with --msgid: the app (or corp) the message belongs to; optional")
	case "link":
		app = fs.String("app", "", "app name from the configuration")
		msgID = fs.String("msgid", "", "the tracked message the link belongs to")
		to = fs.String("to", "", "the page the link opens (http or https URL)")
	case "hash-password":
		pw, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read password: %w", err)
		}
		pw = strings.TrimRight(pw, "\r\n")
		if len(pw) < 8 {
			return errors.New("password must be at least 8 characters")
		}
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
		if err != nil {
			return fmt.Errorf("hash password: %w", err)
		}
		fmt.Fprintln(stdout, string(h))
		return nil
	case "healthcheck":
		// For container health checks in an image with no shell or curl.
		if len(args) != 1 {
			return errors.New("usage: yidu healthcheck URL")
		}
		return healthcheck(ctx, args[0], stdout)
	case "serve", "receiver", "flushd", "dashboard", "migrate":
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
	// `yidu migrate up --config F` and `yidu directory sync --app A`: the
	// step comes first, flags after it (the flag package stops at it).
	var positional []string
	if (cmd == "migrate" || cmd == "directory") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		positional, args = args[:1], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	positional = append(positional, fs.Args()...)
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := config.Load(*cfgPath, getenv)
	if err != nil {
		return err
	}

	switch cmd {
	case "migrate":
		return migrate(ctx, cfg, positional, stdout)
	case "directory":
		if len(positional) != 1 || positional[0] != "sync" || *app == "" {
			return errors.New("usage: yidu directory sync --app NAME")
		}
		return syncDirectory(ctx, cfg, *app, logger, stdout)
	case "reconcile":
		if (*msgID == "") == !*allActive {
			return errors.New("usage: yidu reconcile --msgid M | --all-active")
		}
		return runReconcile(ctx, cfg, logger, *msgID, *app, *allActive, stdout)
	case "link":
		if *app == "" || *msgID == "" || *to == "" {
			return errors.New("usage: yidu link --app NAME --msgid M --to URL")
		}
		return printLink(cfg, *app, *msgID, *to, stdout)
	}

	roles := map[string]process.Roles{
		"serve":     process.All,
		"receiver":  {Receiver: true},
		"flushd":    {Flushd: true},
		"dashboard": {Dashboard: true},
	}[cmd]
	if roles.Receiver {
		if err := cfg.ValidateReceiver(); err != nil {
			return err
		}
	}
	m := process.NewMain(cfg, logger.With("process", cmd))
	if err := m.Run(ctx, roles); err != nil {
		m.Close()
		return err
	}
	select {
	case <-ctx.Done():
		logger.Info("stopping", "reason", context.Cause(ctx))
	case <-m.FlushdDone():
		// flushd stopped on its own: a failure; the supervisor restarts us.
		m.Close()
		return fmt.Errorf("flushd stopped: %w", m.FlushdErr())
	}
	return m.Close()
}
