package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/buildinfo"
)

// invocation is one command line: the command, its flags and its
// positional arguments.
type invocation struct {
	name string
	spec command
	fs   *flag.FlagSet
	// cfgPath and logLevel are the global flags (a configured command
	// takes them after its name too).
	cfgPath, logLevel *string

	app        *string
	msgID      *string
	allActive  *bool
	to         *string
	check      *bool
	purge      purgeFlags
	ev         evidenceArgs
	positional []string
}

// parseCommandLine parses the global flags, the command and its flags.
// A nil invocation and a nil error: the line was answered (--version,
// help).
func parseCommandLine(args []string, stdout, stderr io.Writer, getenv func(string) string) (*invocation, error) {
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
			return nil, flag.ErrHelp
		}
		fmt.Fprint(stderr, usage)
		return nil, usagef("%v", err)
	}
	if *showVersion {
		fmt.Fprintln(stdout, buildinfo.Read())
		return nil, nil
	}
	args = global.Args()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return nil, usagef("no command")
	}
	name, args := args[0], args[1:]
	if name == "help" {
		fmt.Fprint(stdout, usage)
		return nil, nil
	}
	spec, ok := commands[name]
	if !ok {
		fmt.Fprint(stderr, usage)
		return nil, usagef("unknown command %q", name)
	}
	inv := &invocation{name: name, spec: spec, fs: flag.NewFlagSet("yidu "+name, flag.ContinueOnError), cfgPath: cfgPath, logLevel: logLevel}
	inv.defineFlags()
	if err := inv.parse(args, stdout, stderr); err != nil {
		return nil, err
	}
	return inv, nil
}

// defineFlags declares the command's flags.
func (inv *invocation) defineFlags() {
	fs := inv.fs
	if inv.spec.config {
		fs.StringVar(inv.cfgPath, "config", *inv.cfgPath, "configuration file (YAML); default $YIDU_CONFIG")
		fs.StringVar(inv.logLevel, "log-level", *inv.logLevel, "debug, info, warn or error")
	}
	ev := &inv.ev
	switch inv.name {
	case "directory", "doctor":
		inv.app = fs.String("app", "", "app name from the configuration (required)")
	case "reconcile":
		inv.msgID = fs.String("msgid", "", "message to reconcile")
		inv.allActive = fs.Bool("all-active", false, "reconcile every message within the Redis TTL")
		inv.app = fs.String("app", "", "with --msgid: the app (or corp) the message belongs to; optional")
	case "archive":
		inv.purge.register(fs)
	case "evidence":
		fs.StringVar(&ev.corp, "corp", "", "verify, consistency: the corp whose log to check (required)")
		fs.StringVar(&ev.day, "day", "", "verify: check only the entries of this Asia/Shanghai day, YYYY-MM-DD (default: the whole log and its checkpoints)")
		fs.Uint64Var(&ev.from, "from", 0, "consistency: the size of the older checkpoint (the pack's)")
		fs.Uint64Var(&ev.to, "to", 0, "consistency: the size of the newer checkpoint (default: the newest)")
		fs.StringVar(&ev.key, "key", "", "check: the log's verifier key (yidu evidence key prints it); default: the pack's own key.txt")
		fs.StringVar(&ev.consistency, "checkpoint", "", "check: a file of yidu evidence consistency's output: a newer checkpoint and the proof the pack's is a prefix of it")
		fs.StringVar(&ev.tsaCA, "tsa-ca", "", "check, verify: the TSA's CA certificates (PEM): each TSA token's certificate must chain to one (default: its signature is checked with the certificate it carries, not against a trusted root)")
	case "kafka":
		inv.check = fs.Bool("check", false, "only check the topic; create nothing")
	case "link":
		inv.app = fs.String("app", "", "app name from the configuration (required)")
		inv.msgID = fs.String("msgid", "", "the tracked message the link belongs to (required)")
		inv.to = fs.String("to", "", "the page the link opens, an http or https URL (required)")
	}
}

// help prints the command's synopsis, summary and flags to w.
func (inv *invocation) help(w io.Writer) {
	fs := inv.fs
	fs.SetOutput(w)
	fmt.Fprintf(w, "usage: yidu %s\n\n%s\n", inv.spec.synopsis, inv.spec.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.PrintDefaults()
	}
}

// bad is the usage error of a command line that does not fit the
// command's synopsis.
func (inv *invocation) bad() error {
	return usagef("usage: yidu %s (yidu %s -h for the flags)", inv.spec.synopsis, inv.name)
}

// parse parses the command's flags and positional arguments.
func (inv *invocation) parse(args []string, stdout, stderr io.Writer) error {
	fs, name := inv.fs, inv.name
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
			inv.help(stdout)
			return flag.ErrHelp
		}
		inv.help(stderr)
		return usagef("%v", err)
	}
	positional = append(positional, fs.Args()...)
	if name == "evidence" {
		// `yidu evidence check FILE.zip --key K`: flags after the file too.
		positional = positional[:len(positional)-len(fs.Args())]
		for rest := fs.Args(); len(rest) > 0; {
			if strings.HasPrefix(rest[0], "-") {
				if err := fs.Parse(rest); err != nil {
					inv.help(stderr)
					return usagef("%v", err)
				}
				rest = fs.Args()
				continue
			}
			positional, rest = append(positional, rest[0]), rest[1:]
		}
	}
	inv.positional = positional
	return nil
}

// preflight checks the command's arguments, and runs the commands that
// need no configuration (done true).
func (inv *invocation) preflight(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) (done bool, err error) {
	positional, ev := inv.positional, inv.ev
	switch inv.name {
	case "version":
		if len(positional) != 0 {
			return true, inv.bad()
		}
		fmt.Fprintln(stdout, buildinfo.Read())
		return true, nil
	case "hash-password":
		if len(positional) != 0 {
			return true, inv.bad()
		}
		return true, hashPassword(stdin, stdout, stderr)
	case "healthcheck":
		if len(positional) != 1 {
			return true, inv.bad()
		}
		return true, healthcheck(ctx, positional[0], stdout)
	case "evidence":
		// check reads a ZIP and needs no configuration.
		if len(positional) > 0 && positional[0] == "check" {
			if len(positional) != 2 {
				return true, inv.bad()
			}
			return true, evidenceCheck(positional[1], ev.key, ev.consistency, ev.tsaCA, stdout)
		}
		if len(positional) == 3 && positional[0] == "key" && positional[1] == "generate" {
			return true, generateKey(positional[2], stdout)
		}
		return false, checkEvidenceArgs(positional, ev)
	}
	return false, inv.checkArgs()
}

// checkArgs checks a configured command's arguments.
func (inv *invocation) checkArgs() error {
	positional := inv.positional
	switch inv.name {
	case "migrate":
		if len(positional) != 1 || !slices.Contains([]string{"up", "status", "down"}, positional[0]) {
			return inv.bad()
		}
	case "directory":
		if len(positional) != 1 || positional[0] != "sync" || *inv.app == "" {
			return inv.bad()
		}
	case "kafka":
		if len(positional) != 1 || positional[0] != "topic" {
			return inv.bad()
		}
	case "reconcile":
		if (*inv.msgID == "") == !*inv.allActive || len(positional) != 0 {
			return inv.bad()
		}
		// yidu.MsgID.Valid, the one rule: such a msgid names no message.
		if *inv.msgID != "" && !yidu.MsgID(*inv.msgID).Valid() {
			return usagef("reconcile: --msgid %q must match %s", yidu.Truncate(*inv.msgID, 128), yidu.MsgIDRule)
		}
	case "link":
		if *inv.app == "" || *inv.msgID == "" || *inv.to == "" || len(positional) != 0 {
			return inv.bad()
		}
		if !yidu.MsgID(*inv.msgID).Valid() {
			return usagef("link: --msgid %q must match %s", yidu.Truncate(*inv.msgID, 128), yidu.MsgIDRule)
		}
	case "archive":
		if len(positional) != 1 || positional[0] != "purge" {
			return inv.bad()
		}
		if err := inv.purge.check(); err != nil {
			return err
		}
	case "doctor":
		if *inv.app == "" || len(positional) != 0 {
			return inv.bad()
		}
	default:
		if len(positional) != 0 {
			return inv.bad()
		}
	}
	return nil
}

// load reads and checks the configuration, and makes the logger.
func (inv *invocation) load(stderr io.Writer, getenv func(string) string) (config.Config, *slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(*inv.logLevel)); err != nil {
		return config.Config{}, nil, usagef("--log-level: %v", err)
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg, err := config.Load(*inv.cfgPath, getenv)
	if err != nil {
		return cfg, nil, err
	}
	// The libraries' own checks of what the file maps onto.
	if err := process.Check(cfg); err != nil {
		return cfg, nil, err
	}
	// mysql.tls: registered with the driver once, for every command.
	if cfg.MySQL.DSN, err = process.MySQLDSN(cfg.MySQL); err != nil {
		return cfg, nil, err
	}
	return cfg, logger, nil
}

// runConfigured runs a command that takes the configuration: a one-shot
// task, or a server until ctx ends.
func (inv *invocation) runConfigured(ctx context.Context, cfg config.Config, logger *slog.Logger, stdout io.Writer) error {
	switch inv.name {
	case "migrate":
		return migrate(ctx, cfg, inv.positional, stdout)
	case "kafka":
		return kafkaTopic(ctx, cfg.Kafka, *inv.check, stdout)
	case "directory":
		return syncDirectory(ctx, cfg, *inv.app, logger, stdout)
	case "reconcile":
		return runReconcile(ctx, cfg, logger, *inv.msgID, *inv.app, *inv.allActive, stdout)
	case "link":
		return printLink(cfg, *inv.app, *inv.msgID, *inv.to, stdout)
	case "doctor":
		return doctor(ctx, cfg, *inv.app, stdout)
	case "archive":
		return runPurge(ctx, cfg, inv.purge, logger, stdout)
	case "evidence":
		return runEvidence(ctx, cfg, inv.positional[0], inv.ev, logger, stdout)
	}
	return serve(ctx, inv.name, cfg, logger)
}

// serve runs the roles of command name (serve, receiver, flushd,
// dashboard) until ctx ends or flushd stops on its own.
func serve(ctx context.Context, name string, cfg config.Config, logger *slog.Logger) error {
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
