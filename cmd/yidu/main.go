// Command yidu is the production binary: the WeCom callback receiver, the
// dashboard, flushd, migrations, directory sync and reconciliation.
//
//	yidu serve      --config yidu.yaml   # receiver + dashboard + flushd
//	yidu --config yidu.yaml serve        # the same
//	yidu receiver   --config yidu.yaml
//	yidu flushd     --config yidu.yaml
//	yidu dashboard  --config yidu.yaml
//	yidu migrate    --config yidu.yaml up|status|down
//	yidu directory  --config yidu.yaml sync --app hr
//	yidu reconcile  --config yidu.yaml --msgid M | --all-active
//	yidu link       --config yidu.yaml --app hr --msgid M --to URL
//	yidu archive    --config yidu.yaml purge --before 2025-01-01 [--execute]
//	yidu doctor     --config yidu.yaml --app hr
//	yidu evidence   --config yidu.yaml verify --corp ww… [--day 2026-12-03]
//	yidu hash-password                   # prompts without echo, or reads stdin
//	yidu healthcheck http://127.0.0.1:8080/readyz
//	yidu version                         # or yidu --version
//
// It reads flags and the environment, builds the parts (cmd/internal/process)
// and exits 1 on failure, 2 on a usage error. SIGINT/SIGTERM stop it cleanly.
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
	"slices"
	"strings"
	"syscall"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/buildinfo"
)

const usage = `usage: yidu [--config FILE] [--log-level LEVEL] <command> [flags]

commands:
  serve        receiver + dashboard + flushd in one process
  receiver     the WeCom callback receiver
  flushd       the Kafka → MySQL micro-batcher
  dashboard    the dashboard and /api/v1
  migrate      up | status | down   (schema migrations)
  directory    sync --app NAME      (pull the WeCom directory)
  reconcile    --msgid M | --all-active   (repair Redis/MySQL drift)
  link         --app NAME --msgid M --to URL   (print a tracked link)
  archive      purge [--before DATE] [--execute]   (anonymise notices past retention; delete old notices' detail, keep summaries)
  doctor       --app NAME           (check the WeCom app's setup from this server)
  evidence     verify --corp ID [--day D] | seal | check FILE.zip   (check the ledger against MySQL; seal ended days; verify an evidence ZIP offline)
  hash-password  print a bcrypt hash of a password (prompted without echo on a terminal, else one line of stdin)
  healthcheck URL  exit 0 when URL answers 200 (container probes)
  version      print the version, VCS revision and Go version (also --version)

"yidu <command> -h" lists a command's flags. --config (or YIDU_CONFIG)
and --log-level go before or after the command. Exit status: 0 done,
1 failed, 2 usage error.
`

// usageError is a command line yidu cannot run: main exits 2 on it.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// exitCode maps run's error to the process exit status: 0, 2 for a usage
// error (flag.ErrHelp after -h is 0: help was asked for), 1 otherwise.
func exitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "yidu:", err)
	}
	stop()
	os.Exit(exitCode(err))
}

// command is one subcommand: its synopsis (verbs and required flags) for
// -h and usage errors, and the flags it takes besides --config and
// --log-level.
type command struct {
	synopsis string
	summary  string
	// config: the command reads the configuration file.
	config bool
}

var commands = map[string]command{
	"serve":         {"serve", "Runs the receiver, the dashboard and flushd in one process.", true},
	"receiver":      {"receiver", "Runs the WeCom callback receiver (receiver.listen).", true},
	"flushd":        {"flushd", "Runs flushd: Kafka deltas → MySQL in batches (probes on flushd.listen).", true},
	"dashboard":     {"dashboard", "Runs the dashboard page and /api/v1 (dashboard.listen).", true},
	"migrate":       {"migrate up|status|down", "Applies (up), lists (status) or rolls back one (down) schema migration.", true},
	"kafka":         {"kafka topic [--check]", "Creates the deltas topic (kafka.topic) with kafka.partitions, replication_factor and min_insync_replicas when it does not exist, and checks the one there; --check creates nothing. Exits 1 when the topic differs (docs/deploy.md, Kafka).", true},
	"directory":     {"directory sync --app NAME", "Pulls app NAME's WeCom address book into MySQL (departments, members, leavers).", true},
	"reconcile":     {"reconcile --msgid M [--app NAME] | --all-active", "Compares messages' Redis bitmaps with MySQL and repairs either side.", true},
	"link":          {"link --app NAME --msgid M --to URL", "Prints the tracked link of message M that opens URL (receiver.public_url).", true},
	"archive":       {"archive purge [--before DATE] [--corp ID] [--batch N] [--execute] [--keep-summaries=false]", "Anonymises the notices past their retention (the notice's own, else apps[].retention: per-person rows, invaliduser lists, audit IPs; docs/evidence-records.md), then deletes the notices sent before DATE from MySQL (recipient rows, parked reads, send attempts, the notice) in small batches, keeping each one's summary in message_summaries (docs/analytics.md, Retention). A dry run (the default) prints what would go.", true},
	"doctor":        {"doctor --app NAME", "Checks app NAME's WeCom setup from this server: its secrets, what the API lets it read, the callback URL (docs/wecom-setup.md). Sends nothing.", true},
	"evidence":      {"evidence verify --corp ID [--day YYYY-MM-DD] | evidence seal | evidence check FILE.zip", "verify recomputes the corp's daily Merkle trees from the evidence ledger and cross-checks its entries with the read records and send batches; it prints each day's root and exits 0 when all agree, or names the first entry altered, deleted or inserted and exits 1 (docs/evidence.md). seal records the root of every ended day not sealed yet. check verifies an evidence ZIP offline with no configuration (docs/evidence-records.md): each file's SHA-256 against manifest.csv, each inclusion proof against its day's root; it exits 1 naming every file that fails.", true},
	"hash-password": {"hash-password", "Prints a bcrypt hash for dashboard users: prompts twice without echo on a terminal, else reads one line of stdin.", false},
	"healthcheck":   {"healthcheck URL", "Exits 0 when URL answers 200 (for container health checks: the image has no shell or curl).", false},
	"version":       {"version", "Prints the module version, VCS revision and time, and the Go version.", false},
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	// Flags before the command: yidu --config F serve.
	global := flag.NewFlagSet("yidu", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	cfgPath := global.String("config", getenv("YIDU_CONFIG"), "configuration file (YAML); default $YIDU_CONFIG")
	logLevel := global.String("log-level", "info", "debug, info, warn or error")
	showVersion := global.Bool("version", false, "print the version and exit")
	global.Usage = func() {}
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return flag.ErrHelp
		}
		fmt.Fprint(stderr, usage)
		return usagef("%v", err)
	}
	if *showVersion {
		fmt.Fprintln(stdout, buildinfo.Read())
		return nil
	}
	args = global.Args()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command")
	}
	name, args := args[0], args[1:]
	if name == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	spec, ok := commands[name]
	if !ok {
		fmt.Fprint(stderr, usage)
		return usagef("unknown command %q", name)
	}
	fs := flag.NewFlagSet("yidu "+name, flag.ContinueOnError)
	if spec.config {
		fs.StringVar(cfgPath, "config", *cfgPath, "configuration file (YAML); default $YIDU_CONFIG")
		fs.StringVar(logLevel, "log-level", *logLevel, "debug, info, warn or error")
	}
	var (
		app       *string
		msgID     *string
		allActive *bool
		to        *string
		check     *bool
		purge     purgeFlags
		evCorp    *string
		evDay     *string
	)
	switch name {
	case "directory", "doctor":
		app = fs.String("app", "", "app name from the configuration (required)")
	case "reconcile":
		msgID = fs.String("msgid", "", "message to reconcile")
		allActive = fs.Bool("all-active", false, "reconcile every message within the Redis TTL")
		app = fs.String("app", "", "with --msgid: the app (or corp) the message belongs to; optional")
	case "archive":
		purge.register(fs)
	case "evidence":
		evCorp = fs.String("corp", "", "verify: the corp whose ledger to check (required)")
		evDay = fs.String("day", "", "verify: check only this Asia/Shanghai day, YYYY-MM-DD (default: every day)")
	case "kafka":
		check = fs.Bool("check", false, "only check the topic; create nothing")
	case "link":
		app = fs.String("app", "", "app name from the configuration (required)")
		msgID = fs.String("msgid", "", "the tracked message the link belongs to (required)")
		to = fs.String("to", "", "the page the link opens, an http or https URL (required)")
	}
	help := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintf(w, "usage: yidu %s\n\n%s\n", spec.synopsis, spec.summary)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nflags:")
			fs.PrintDefaults()
		}
	}
	// The flag package prints nothing itself: help goes to stdout when
	// asked for, to stderr with a usage error.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	// `yidu migrate up --config F` and `yidu directory sync --app A`: the
	// step comes first, flags after it (the flag package stops at it).
	var positional []string
	if (name == "migrate" || name == "directory" || name == "archive" || name == "kafka" || name == "evidence") && len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		positional, args = args[:1], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			help(stdout)
			return flag.ErrHelp
		}
		help(stderr)
		return usagef("%v", err)
	}
	positional = append(positional, fs.Args()...)
	bad := func() error { return usagef("usage: yidu %s (yidu %s -h for the flags)", spec.synopsis, name) }

	switch name {
	case "version":
		if len(positional) != 0 {
			return bad()
		}
		fmt.Fprintln(stdout, buildinfo.Read())
		return nil
	case "hash-password":
		if len(positional) != 0 {
			return bad()
		}
		return hashPassword(stdin, stdout, stderr)
	case "healthcheck":
		if len(positional) != 1 {
			return bad()
		}
		return healthcheck(ctx, positional[0], stdout)
	case "evidence":
		// check reads a ZIP and needs no configuration.
		if len(positional) > 0 && positional[0] == "check" {
			if len(positional) != 2 {
				return bad()
			}
			return evidenceCheck(positional[1], stdout)
		}
		if err := checkEvidenceArgs(positional, *evCorp, *evDay); err != nil {
			return err
		}
	case "migrate":
		if len(positional) != 1 || !slices.Contains([]string{"up", "status", "down"}, positional[0]) {
			return bad()
		}
	case "directory":
		if len(positional) != 1 || positional[0] != "sync" || *app == "" {
			return bad()
		}
	case "kafka":
		if len(positional) != 1 || positional[0] != "topic" {
			return bad()
		}
	case "reconcile":
		if (*msgID == "") == !*allActive || len(positional) != 0 {
			return bad()
		}
		// yidu.MsgID.Valid, the one rule: such a msgid names no message.
		if *msgID != "" && !yidu.MsgID(*msgID).Valid() {
			return usagef("reconcile: --msgid %q must match %s", yidu.Truncate(*msgID, 128), yidu.MsgIDRule)
		}
	case "link":
		if *app == "" || *msgID == "" || *to == "" || len(positional) != 0 {
			return bad()
		}
		if !yidu.MsgID(*msgID).Valid() {
			return usagef("link: --msgid %q must match %s", yidu.Truncate(*msgID, 128), yidu.MsgIDRule)
		}
	case "archive":
		if len(positional) != 1 || positional[0] != "purge" {
			return bad()
		}
		if err := purge.check(); err != nil {
			return err
		}
	case "doctor":
		if *app == "" || len(positional) != 0 {
			return bad()
		}
	default:
		if len(positional) != 0 {
			return bad()
		}
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return usagef("--log-level: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := config.Load(*cfgPath, getenv)
	if err != nil {
		return err
	}
	// The libraries' own checks of what the file maps onto.
	if err := process.Check(cfg); err != nil {
		return err
	}
	// mysql.tls: registered with the driver once, for every command.
	if cfg.MySQL.DSN, err = process.MySQLDSN(cfg.MySQL); err != nil {
		return err
	}

	switch name {
	case "migrate":
		return migrate(ctx, cfg, positional, stdout)
	case "kafka":
		return kafkaTopic(ctx, cfg.Kafka, *check, stdout)
	case "directory":
		return syncDirectory(ctx, cfg, *app, logger, stdout)
	case "reconcile":
		return runReconcile(ctx, cfg, logger, *msgID, *app, *allActive, stdout)
	case "link":
		return printLink(cfg, *app, *msgID, *to, stdout)
	case "doctor":
		return doctor(ctx, cfg, *app, stdout)
	case "archive":
		return runPurge(ctx, cfg, purge, logger, stdout)
	case "evidence":
		return runEvidence(ctx, cfg, positional[0], *evCorp, *evDay, logger, stdout)
	}

	roles := map[string]process.Roles{
		"serve":     process.All,
		"receiver":  {Receiver: true},
		"flushd":    {Flushd: true},
		"dashboard": {Dashboard: true},
	}[name]
	if roles.Receiver {
		if err := cfg.ValidateReceiver(); err != nil {
			return err
		}
	}
	logger.Info("starting", "command", name, "version", buildinfo.Read().Version, "revision", buildinfo.Read().Revision)
	m := process.NewMain(cfg, logger.With("process", name))
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

// hashPassword prints the bcrypt hash of a password: on a terminal it is
// asked for twice without echo; otherwise one line of stdin is read.
func hashPassword(stdin io.Reader, stdout, stderr io.Writer) error {
	var pw string
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		read := func(prompt string) (string, error) {
			fmt.Fprint(stderr, prompt)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(stderr)
			if err != nil {
				return "", fmt.Errorf("read password: %w", err)
			}
			return string(b), nil
		}
		a, err := read("Password: ")
		if err != nil {
			return err
		}
		b, err := read("Again: ")
		if err != nil {
			return err
		}
		if a != b {
			return errors.New("the passwords differ")
		}
		pw = a
	} else {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read password: %w", err)
		}
		pw = strings.TrimRight(line, "\r\n")
	}
	if len(pw) < 8 {
		return errors.New("password must be at least 8 characters")
	}
	if len(pw) > 72 {
		return errors.New("password must be at most 72 bytes (bcrypt reads no more)")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	fmt.Fprintln(stdout, string(h))
	return nil
}
