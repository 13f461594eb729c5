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
	"os"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/term"
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
  evidence     verify --corp ID | seal | key [generate NAME] | consistency --corp ID --from N | check FILE.zip [--key K]   (check the log against MySQL; close ended days; the log's key; prove checkpoints consistent; verify an evidence ZIP offline)
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
	"evidence":      {"evidence verify --corp ID [--day YYYY-MM-DD] | evidence seal | evidence key [generate NAME] | evidence consistency --corp ID --from N [--to M] | evidence check FILE.zip [--key KEY] [--checkpoint CONSISTENCY.json]", "verify recomputes the corp's evidence log (one RFC 6962 Merkle log per corp) from the ledger, checks every checkpoint's signature and root, and cross-checks the entries with the read records, page events, send batches and versions; it prints the checkpoints and exits 0 when all agree, or names the first entry altered, deleted or inserted and exits 1 (docs/evidence.md). seal closes every ended day with its signed checkpoint. key prints the log's verifier key (generate NAME makes a new signing key). consistency prints two signed checkpoints and the proof that the first is a prefix of the second. check verifies an evidence ZIP offline with no configuration (docs/evidence-records.md): the manifest's signature, each file's SHA-256, each entry's body, inclusion proof and signed checkpoint, and that each fact of each record is an entry of that person's; it prints the checkpoint it relied on and exits 1 naming every problem.", true},
	"hash-password": {"hash-password", "Prints a bcrypt hash for dashboard users: prompts twice without echo on a terminal, else reads one line of stdin.", false},
	"healthcheck":   {"healthcheck URL", "Exits 0 when URL answers 200 (for container health checks: the image has no shell or curl).", false},
	"version":       {"version", "Prints the module version, VCS revision and time, and the Go version.", false},
}

// run is main without the process: tests call it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) error {
	inv, err := parseCommandLine(args, stdout, stderr, getenv)
	if inv == nil || err != nil {
		return err
	}
	if done, err := inv.preflight(ctx, stdin, stdout, stderr); done || err != nil {
		return err
	}
	cfg, logger, err := inv.load(stderr, getenv)
	if err != nil {
		return err
	}
	return inv.runConfigured(ctx, cfg, logger, stdout)
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
