// Package rig is the harness the benchmark (cmd/yidu-bench), the soak
// (cmd/yidu-soak) and the fault tests (internal/faulttest) share: it
// builds yidu's commands once per run (Binaries), runs them as child
// processes whose output it keeps and whose listen addresses it reads off
// their logs (Proc, StartKfake), and holds the helpers all three need: the
// WeCom app they play, recipients' UserIDs, random names, percentiles,
// /proc figures, progress lines and the removal of a run's database and
// Redis keys. Benchmark, soak and test code only.
package rig

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// WeComApp is a WeCom app as a harness writes it into yidu's configuration.
type WeComApp struct {
	Name           string
	CorpID         string
	AgentID        int64
	Token          string
	EncodingAESKey string
	ReadButtonKey  string
}

// App is the WeCom app every harness plays: the official test vector's
// Token, EncodingAESKey and CorpID (wecom-protocol.md, "Official test
// vector"), so a captured callback reads like WeCom's.
func App() WeComApp {
	return WeComApp{Name: "hr", CorpID: "wx5823bf96d3bd56c7", AgentID: 218, Token: "QDG6eK",
		EncodingAESKey: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C", ReadButtonKey: "yidu_read"}
}

// UserIDs names a run's recipients: recipient i is Prefix followed by i
// with at least Digits digits ("u0000042"). Each harness has its own
// prefix, so a row in a shared database says which run wrote it.
type UserIDs struct {
	Prefix string
	Digits int
}

// ID is recipient i's WeCom UserID.
func (u UserIDs) ID(i int) string {
	return fmt.Sprintf("%s%0*d", u.Prefix, u.Digits, i)
}

// Index is ID's inverse: the recipient id names, and whether it is one.
func (u UserIDs) Index(id string) (int, bool) {
	digits, ok := strings.CutPrefix(id, u.Prefix)
	if !ok || digits == "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil && n >= 0
}

// RandomHex returns n random bytes as 2n hex digits: the suffix of a
// run's database, key prefix or token, so runs on shared servers never
// meet.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Percentile returns the q-quantile of sorted, ascending latencies
// (nearest rank); 0 for none.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Logf writes one progress line to w, stamped with the time of day; a nil
// w writes nothing.
func Logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
}

// Servers are the MariaDB/MySQL server and the Redis a bench or soak run
// uses: it creates a database and a key prefix of its own there, and
// removes both.
type Servers struct {
	// MySQLDSN names the server; its database part is ignored.
	MySQLDSN  string
	RedisAddr string
}

// Flags registers -mysql and -redis on fs; run ("bench", "soak") names
// the run in their help.
func (s *Servers) Flags(fs *flag.FlagSet, run string) {
	fs.StringVar(&s.MySQLDSN, "mysql", "root@tcp(127.0.0.1:3306)/", "MySQL/MariaDB server DSN (the "+run+" creates and drops its own database)")
	fs.StringVar(&s.RedisAddr, "redis", "127.0.0.1:6379", "Redis address (the "+run+" uses and deletes its own key prefix)")
}

// Command is the command line every harness command shares: its flag set
// (usage to stderr, errors returned for Main) with the run's Servers
// (-mysql, -redis), the yidu-kfake binary (-kfake-bin), a bound on the
// whole run (-timeout) and -v registered. The command adds its own flags
// to FlagSet before Parse.
type Command struct {
	FlagSet  *flag.FlagSet
	Servers  Servers
	KfakeBin string
	Timeout  time.Duration
	Verbose  bool
}

// NewCommand returns the command line of harness command name
// ("yidu-bench"); timeout is -timeout's default and timeoutHelp its help,
// verboseHelp -v's.
func NewCommand(name string, stderr io.Writer, timeout time.Duration, timeoutHelp, verboseHelp string) *Command {
	c := &Command{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := c.FlagSet
	fs.SetOutput(stderr)
	c.Servers.Flags(fs, strings.TrimPrefix(name, "yidu-"))
	fs.StringVar(&c.KfakeBin, "kfake-bin", "", "yidu-kfake binary (default: go build ./cmd/yidu-kfake)")
	fs.DurationVar(&c.Timeout, "timeout", timeout, timeoutHelp)
	fs.BoolVar(&c.Verbose, "v", false, verboseHelp)
	return c
}

// Parse parses args; a harness command takes no positional arguments.
func (c *Command) Parse(args []string) error {
	if err := c.FlagSet.Parse(args); err != nil {
		return err
	}
	if c.FlagSet.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", c.FlagSet.Args())
	}
	return nil
}

// Main is a harness command's main without the exit: it calls run with
// the command line, stdout and stderr under a context that SIGINT and
// SIGTERM cancel, so every exit path cleans up, and returns the exit
// code: 0; 2 after -h (flag has printed the usage); 1 after printing
// "name: err" to stderr.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 2
	}
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	return 1
}
