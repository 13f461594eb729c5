package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/internal/embedded"
	"github.com/yidu-io/yidu/internal/fakewecom"
)

// Default company sizes. go-mysql-server's memory tables scan the whole table
// on every row written (internal/embedded), so about 2,000 employees is what
// the embedded MySQL handles at demo speed; a real server takes 20,000.
const (
	defaultEmployeesEmbedded = 2_000
	defaultEmployeesReal     = 20_000
	defaultDepartments       = 60
)

// Main is the demo: flags in, one running yidu with its world around it out.
// Shape (STYLE, wtf): NewMain, ParseFlags, Run that starts and returns, Wait,
// Close that stops in dependency order.
type Main struct {
	// spoolDir is the receiver's temporary spool, removed by Close.
	spoolDir string
	// Employees is the company's size; 0 picks by MySQL backend.
	Employees   int
	Departments int
	// Speed divides every delay of the arrival curve: 1 is real time.
	Speed float64
	// Seed makes the readers, their delays and the faults reproducible.
	Seed uint64
	// Send has the tracker send the cards through the fake WeCom.
	Send bool
	// ExitWhenDone makes Wait return once every read reached the dashboard
	// and MySQL; Timeout then bounds the run (0: no bound).
	ExitWhenDone bool
	Timeout      time.Duration
	// ListenDashboard falls back to 127.0.0.1:0 when taken.
	ListenDashboard string
	ListenReceiver  string
	// MySQLDatabase is the database used on a real MySQL server.
	MySQLDatabase string
	Verbose       bool

	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the YIDU_* server addresses (os.Getenv; tests pass a
	// function returning "" to force the embedded servers).
	Getenv func(string) string
	// Logger defaults to warnings on Stderr (-v: info).
	Logger *slog.Logger

	// Set by Run.
	App      *process.Main
	Servers  *embedded.Servers // nil when every server is real
	Fake     *fakewecom.Server
	MsgID    string
	User     string
	Password string
	APIToken string
	// DashboardURL is the page's address.
	DashboardURL string
	// Leader is a department leader to sign in as with WeCom (the fake's
	// sign-in page), and LeaderDept the department they lead: the banner
	// names them, and their page shows that department's subtree only.
	Leader, LeaderDept string
	// Approver is the member who approves the app's notices to 全员
	// (apps[].approval) by pressing 批准 on the approval card.
	Approver string
	// Backends says which servers are embedded, for the banner.
	Backends string
	// LedgerKey is the verifier key of the evidence log's signing key,
	// which setup makes for the demo.
	LedgerKey string
	// EvidenceDir is where the round's evidence files go (empty: a new
	// temporary directory, printed and kept); Round is what it did.
	EvidenceDir string
	Round       Round

	// Set by setUp for prepare, which runs in the background.
	secret, token, aesKey string
	company               fakewecom.Corp
	employees             int
	status                atomic.Pointer[[2]string] // zh-CN, en
	// ready is closed once prepare returned; readyErr is its error.
	ready    chan struct{}
	readyErr error
	started  time.Time

	fakeSrv   *http.Server
	front     *front
	plan      plan
	player    *player
	workers   int
	prog      *progress
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// NewMain returns a Main with its flags' defaults.
func NewMain() *Main {
	return &Main{
		Departments:     defaultDepartments,
		Speed:           1,
		Seed:            1,
		Send:            true,
		ListenDashboard: "127.0.0.1:8081",
		ListenReceiver:  "127.0.0.1:0",
		MySQLDatabase:   "yidu_demo",
		Stdout:          os.Stdout,
		Stderr:          os.Stderr,
		Getenv:          os.Getenv,
	}
}

// ParseFlags reads args into m.
func (m *Main) ParseFlags(args []string) error {
	fs := flag.NewFlagSet("yidu-demo", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: yidu-demo [flags]\n\n"+
			"Runs yidu with a fake WeCom and a synthetic company in one process and shows a notice\n"+
			"filling up. Embedded servers stand in for whichever of YIDU_REDIS_ADDR, YIDU_MYSQL_DSN\n"+
			"and YIDU_KAFKA_BROKERS is unset. Ctrl-C stops it.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&m.Employees, "employees", 0, fmt.Sprintf("employees of the synthetic company (default %d on the embedded MySQL, %d on a real one)", defaultEmployeesEmbedded, defaultEmployeesReal))
	fs.IntVar(&m.Departments, "departments", m.Departments, "departments, in a tree under department 1")
	fs.Float64Var(&m.Speed, "speed", m.Speed, "play WeCom this many times faster than real time (reads average 40 s after the send at 1)")
	fs.Uint64Var(&m.Seed, "seed", m.Seed, "random seed of the readers, their delays and the faults")
	fs.BoolVar(&m.Send, "send", m.Send, "send the template cards through the fake WeCom (\"send\": true)")
	fs.BoolVar(&m.ExitWhenDone, "exit-when-done", false, "exit 0 once every read reached the dashboard and MySQL and the reading page, evidence and approval steps succeeded")
	fs.DurationVar(&m.Timeout, "timeout", 0, "with -exit-when-done: fail when not done after this long (0: no limit)")
	fs.StringVar(&m.ListenDashboard, "listen-dashboard", m.ListenDashboard, "dashboard address (127.0.0.1:0 if taken)")
	fs.StringVar(&m.ListenReceiver, "listen-receiver", m.ListenReceiver, "WeCom callback receiver address")
	fs.StringVar(&m.MySQLDatabase, "mysql-database", m.MySQLDatabase, "database to create and use on a real MySQL (YIDU_MYSQL_DSN)")
	fs.BoolVar(&m.Verbose, "v", false, "log at info level (default: warnings only)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case m.Employees < 0 || m.Employees > 200_000:
		return fmt.Errorf("-employees %d: want 1..200000", m.Employees)
	case m.Departments < 1 || m.Departments > 1000:
		return fmt.Errorf("-departments %d: want 1..1000", m.Departments)
	case !(m.Speed > 0 && m.Speed <= 10_000):
		return fmt.Errorf("-speed %v: want a number in (0, 10000]", m.Speed)
	case m.Timeout < 0:
		return errors.New("-timeout must not be negative")
	}
	return nil
}

// Run starts the servers and yidu and returns as soon as the dashboard
// answers, with its URL and login printed; the directory sync, the
// notice's registration and WeCom's play go on in the background (the
// dashboard's status line and the console tell how far), and Wait reports
// their failure. Close undoes it, also after a failed Run.
func (m *Main) Run(ctx context.Context) error {
	m.started = time.Now()
	m.ready = make(chan struct{})
	if m.Logger == nil {
		level := slog.LevelWarn
		if m.Verbose {
			level = slog.LevelInfo
		}
		m.Logger = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: level}))
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m.cancel = cancel
	if err := m.setUp(ctx); err != nil {
		close(m.ready)
		return err
	}
	m.App.Dashboard.SetStatusIn(m.statusIn)
	m.printBanner()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := m.prepare(bg)
		if err == nil {
			m.printPlay()
			m.setStatus(fmt.Sprintf("演示：通知已发给 %d 名员工，企业微信正以 %g 倍速送来阅读记录。", m.plan.employees, m.Speed),
				fmt.Sprintf("Demo: notice registered to %d employees; WeCom is delivering the reads at %gx.", m.plan.employees, m.Speed))
			m.startPlay(bg)
		} else {
			m.setStatus("演示：准备失败："+err.Error(), "Demo: setting up failed: "+err.Error())
		}
		m.readyErr = err
		close(m.ready)
	}()
	return nil
}

// setStatus sets the dashboard's status line, in Chinese and in English
// (the page shows the one of its language).
func (m *Main) setStatus(zh, en string) { m.status.Store(&[2]string{zh, en}) }

// statusLine is the status line in English (the terminal's).
func (m *Main) statusLine() string { return m.statusIn("en") }

func (m *Main) statusIn(lang string) string {
	p := m.status.Load()
	if p == nil {
		return ""
	}
	if lang == "zh-CN" {
		return p[0]
	}
	return p[1]
}

// Wait blocks until ctx ends (Ctrl-C: nil), flushd stops on its own
// (error), or, with ExitWhenDone, the run is done (nil), failed or timed
// out (error). Without ExitWhenDone it keeps running once done.
func (m *Main) Wait(ctx context.Context) error {
	var timeout <-chan time.Time
	if m.ExitWhenDone && m.Timeout > 0 {
		t := time.NewTimer(m.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(m.Stdout, "\nstopping…")
		return nil
	case <-m.App.FlushdDone():
		return fmt.Errorf("flushd stopped: %w", m.App.FlushdErr())
	case <-timeout:
		return fmt.Errorf("not done after %v: still setting up (%s)", m.Timeout, m.statusLine())
	case <-m.ready:
		if m.readyErr != nil {
			return m.readyErr
		}
	}
	done := m.prog.done
	for {
		select {
		case <-ctx.Done():
			m.prog.stop()
			fmt.Fprintln(m.Stdout, "\nstopping…")
			return nil
		case <-m.App.FlushdDone():
			m.prog.stop()
			return fmt.Errorf("flushd stopped: %w", m.App.FlushdErr())
		case <-done:
			done = nil
			if stop, err := m.roundDone(ctx); stop {
				return err
			}
		case <-timeout:
			m.prog.stop()
			return fmt.Errorf("not done after %v: %s", m.Timeout, m.prog.last().String())
		}
	}
}

// roundDone follows the storm once every read arrived: the round's
// steps (reading page, evidence, approval). It reports whether Wait
// returns, with what: Ctrl-C during the steps (nil); with ExitWhenDone,
// the run's end (nil) or its failure. Without ExitWhenDone a failure is
// printed and the dashboard stays up.
func (m *Main) roundDone(ctx context.Context) (stop bool, err error) {
	if err = m.prog.err(); err == nil {
		m.setStatus("演示：所有阅读记录已到达页面和 MySQL；接下来演示阅读页、证据和审批。",
			"Demo: every read is on the dashboard and in MySQL; now the reading page, evidence and an approval.")
		if err = m.showRound(ctx); err != nil {
			if ctx.Err() != nil { // Ctrl-C during the steps
				fmt.Fprintln(m.Stdout, "\nstopping…")
				return true, nil
			}
			err = fmt.Errorf("this round's steps: %w", err)
		}
	}
	if err != nil {
		if m.ExitWhenDone {
			return true, err
		}
		fmt.Fprintln(m.Stdout, "yidu-demo:", err)
		return false, nil
	}
	m.setStatus("演示：所有阅读记录已到达页面和 MySQL；托管通知已审批、已确认知悉并已校验存证。",
		"Demo: every read is on the dashboard and in MySQL; the hosted notice was approved, acknowledged and verified.")
	if m.ExitWhenDone {
		return true, nil
	}
	fmt.Fprintf(m.Stdout, "Every read is on the dashboard and in MySQL. The dashboard stays up at %s; Ctrl-C stops.\n", m.DashboardURL)
	return false, nil
}

// Close stops everything Run started: the simulated WeCom first (nothing
// more arrives), then yidu (receiver, dashboard, flushd's final flush), then
// the embedded servers it used, then the fake WeCom API.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	var errs []error
	if m.cancel != nil {
		m.cancel()
	}
	m.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.front != nil {
		if err := m.front.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("wecom front: %w", err))
		}
	}
	if m.App != nil {
		if err := m.App.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.Servers != nil {
		if err := m.Servers.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if m.spoolDir != "" {
		if err := os.RemoveAll(m.spoolDir); err != nil {
			errs = append(errs, fmt.Errorf("demo spool: %w", err))
		}
	}
	if m.fakeSrv != nil {
		if err := m.fakeSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("fake wecom: %w", err))
		}
	}
	return errors.Join(errs...)
}

// startPlay starts WeCom's player and the progress bar; Close stops both.
func (m *Main) startPlay(ctx context.Context) {
	m.prog = &progress{
		out: m.Stdout, tty: isTerminal(m.Stdout), msgID: m.MsgID, db: m.App.DB, api: m.api,
		player: m.player, expected: m.plan.readers, start: time.Now(), done: make(chan struct{}),
	}
	m.wg.Add(2)
	go func() {
		defer m.wg.Done()
		m.player.run(ctx, m.plan, m.workers)
	}()
	go func() {
		defer m.wg.Done()
		m.prog.run(ctx)
	}()
}

func (m *Main) printBanner() {
	w := m.Stdout
	fmt.Fprintf(w, "\nyidu demo: %d employees in %d departments, notice %q to everyone (%s)\n\n",
		m.employees, m.Departments, m.MsgID, m.Backends)
	fmt.Fprintf(w, "  Dashboard  %s\n", m.DashboardURL)
	fmt.Fprintf(w, "  Login      %s / %s\n", m.User, m.Password)
	if m.Leader != "" {
		fmt.Fprintf(w, "  As leader  %slogin → 使用企业微信登录 → %s, leader of %s: sees that department's people only\n", m.DashboardURL, m.Leader, m.LeaderDept)
	}
	fmt.Fprintf(w, "  API token  %s\n", m.APIToken)
	fmt.Fprintf(w, "  Receiver   http://%s/wecom/callback/%s\n\n", m.App.ReceiverAddr, demoApp)
	fmt.Fprintf(w, "Ready after %.1fs. The directory sync and the notice follow in the background; the page shows them.\n", time.Since(m.started).Seconds())
	if m.ExitWhenDone {
		fmt.Fprintln(w, "Exits once every read is on the dashboard and in MySQL and the reading page, evidence and approval are shown.")
	} else {
		fmt.Fprintln(w, "Ctrl-C stops.")
	}
	fmt.Fprintln(w)
}

// printPlay says what WeCom's player is about to do.
func (m *Main) printPlay() {
	fmt.Fprintf(m.Stdout, "Playing WeCom at %gx: %d of %d will read (%d by opening the app), %d duplicate deliveries, %d lost answers WeCom retries.\n",
		m.Speed, m.plan.readers, m.plan.employees, m.plan.enterOnly, m.plan.duplicates, m.plan.flaky)
}
