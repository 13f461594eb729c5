package faulttest

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The official WeCom test vector (docs: /work/shared/wecom-protocol.md,
// "Official test vector"), so a captured callback reads like WeCom's.
const (
	testToken  = "QDG6eK"
	testAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	testCorp   = "wx5823bf96d3bd56c7"
	testAgent  = 218
	testApp    = "hr"
	readButton = "yidu_read"
	apiToken   = "faulttest-api-token-0123456789"
	topic      = "yidu.reads"
)

// envOptions shape one scenario's deployment.
type envOptions struct {
	// Partitions of the deltas topic (default 4).
	Partitions int32
	// BatchSize is flushd's uids per UPDATE (default 100: small, so one
	// flush is many statements and a kill lands between two of them).
	BatchSize int
}

// env is one scenario's deployment: a fresh database, a Redis prefix, a
// kfake cluster that outlives the yidu processes, the configuration file
// every process reads, and the processes started.
type env struct {
	t       *testing.T
	dsn     string
	db      *sql.DB
	rdb     *redis.Client
	prefix  string
	store   *bitmap.Store
	kafka   *kafkaCluster
	cfgPath string
	cfg     config.Config

	mu    sync.Mutex
	procs []*proc
	kcl   *kgo.Client // admin, see group_test.go
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	if o.BatchSize == 0 {
		o.BatchSize = 100
	}
	e := &env{t: t}
	e.dsn = testenv.MySQLDSN(t)
	e.rdb, e.prefix = testenv.Redis(t)
	e.db = openUTC(t, e.dsn)
	e.store = bitmap.New(e.rdb, bitmap.Options{Prefix: e.prefix, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(e.store.Close)
	e.kafka = startKafka(t, o.Partitions)

	cfg := config.Default()
	cfg.Receiver.Listen = "127.0.0.1:0" // every process gets its own via YIDU_RECEIVER_LISTEN
	// Each member reads each message once (plus WeCom's retries): the
	// per-member token bucket must never be what drops a read here.
	cfg.Receiver.MemberRate = 10_000
	cfg.Receiver.MemberBurst = 10_000
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Dashboard.Tokens = []config.Token{{Name: "faulttest", Token: apiToken, Corps: []string{testCorp}}}
	cfg.Redis.Addr = testenv.RedisAddr(t)
	cfg.Redis.Prefix = e.prefix
	cfg.MySQL.DSN = e.dsn
	cfg.Kafka.Brokers = []string{e.kafka.addr()}
	cfg.Kafka.Topic = topic
	cfg.Flushd.Listen = "127.0.0.1:0" // several flushd per scenario, tests in parallel
	cfg.Flushd.Interval = config.Duration(300 * time.Millisecond)
	cfg.Flushd.BatchSize = o.BatchSize
	cfg.Flushd.DrainTimeout = config.Duration(5 * time.Second)
	cfg.WeCom.APIBase = "http://127.0.0.1:1" // nothing is sent; never reach WeCom
	cfg.Apps = []config.App{{Name: testApp, CorpID: testCorp, AgentID: testAgent, Token: testToken,
		EncodingAESKey: testAESKey, ReadButtonKey: readButton}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	e.cfg = cfg
	e.cfgPath = filepath.Join(t.TempDir(), "yidu.yaml")
	if err := os.WriteFile(e.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Registered after testenv's cleanups, so it runs before them: the
	// processes die before their database is dropped.
	t.Cleanup(e.stopAll)
	return e
}

// openUTC opens dsn with the session in UTC, as yidu's own pool is, so
// UNIX_TIMESTAMP(read_time) is the stored instant.
func openUTC(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// freePort returns a TCP port free on 127.0.0.1 now; processes restarted
// by a scenario listen on the same port again.
func freePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// freeAddr returns 127.0.0.1:<free port>.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	return "127.0.0.1:" + strconv.Itoa(freePort(tb))
}

// kafkaCluster is kfake in the test process, on a fixed port and with its
// log on disk, so it can be stopped and started again as the same broker
// with the same records and committed offsets.
type kafkaCluster struct {
	port  int
	dir   string
	parts int32

	mu sync.Mutex
	c  *kfake.Cluster
}

func startKafka(tb testing.TB, partitions int32) *kafkaCluster {
	tb.Helper()
	k := &kafkaCluster{port: freePort(tb), dir: tb.TempDir(), parts: partitions}
	k.start(tb)
	tb.Cleanup(k.stop)
	return k
}

func (k *kafkaCluster) addr() string { return "127.0.0.1:" + strconv.Itoa(k.port) }

func (k *kafkaCluster) start(tb testing.TB) {
	tb.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	var err error
	for range 50 { // the old listener's port may take a moment to free
		k.c, err = kfake.NewCluster(kfake.Ports(k.port), kfake.DataDir(k.dir), kfake.SeedTopics(k.parts, topic))
		if err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("kfake on %d: %v", k.port, err)
}

func (k *kafkaCluster) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.c != nil {
		k.c.Close()
		k.c = nil
	}
}

// proc is one yidu process.
type proc struct {
	name string
	addr string // the receiver's listen address, if any
	// member is a flushd's consumer group member id (startMember).
	member string
	log    string
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

// start runs `yidu <args...> --config <file>` with extra environment
// (YIDU_RECEIVER_LISTEN, YIDU_MYSQL_DSN ...), logging to a file.
func (e *env) start(name string, extraEnv []string, args ...string) *proc {
	e.t.Helper()
	logPath := filepath.Join(e.t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		e.t.Fatal(err)
	}
	args = append(args, "--config", e.cfgPath)
	cmd := exec.Command(yiduBin, args...)
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		e.t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// startReceiver runs `yidu receiver` on addr and waits until it answers.
func (e *env) startReceiver(name, addr string) *proc {
	e.t.Helper()
	p := e.start(name, []string{"YIDU_RECEIVER_LISTEN=" + addr}, "receiver")
	p.addr = addr
	e.waitHTTP(p, "http://"+addr+"/healthz")
	return p
}

// startFlushd runs `yidu flushd`, optionally with another MySQL DSN.
func (e *env) startFlushd(name, dsn string) *proc {
	e.t.Helper()
	var extra []string
	if dsn != "" {
		extra = append(extra, "YIDU_MYSQL_DSN="+dsn)
	}
	return e.start(name, extra, "flushd")
}

func (e *env) waitHTTP(p *proc, url string) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			e.t.Fatalf("%s exited: %v\n%s", p.name, p.err, tail(p.log, 20))
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("%s: %s never answered 200\n%s", p.name, url, tail(p.log, 20))
}

// kill9 kills p with SIGKILL, as the OOM killer or a lost host would:
// no drain, no offset commit, no deferred anything.
func (p *proc) kill9(tb testing.TB) {
	tb.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(tb testing.TB) {
	tb.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		tb.Errorf("%s did not stop within 30 s of SIGTERM", p.name)
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stopAll kills what is still running and, when the test failed, shows
// the end of every process's log.
func (e *env) stopAll() {
	e.mu.Lock()
	procs := e.procs
	e.mu.Unlock()
	for _, p := range procs {
		if p.running() {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
	if e.t.Failed() {
		for _, p := range procs {
			e.t.Logf("--- %s log (tail) ---\n%s", p.name, tail(p.log, 15))
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// reconcile runs `yidu reconcile --all-active` to completion.
func (e *env) reconcile() string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, yiduBin, "reconcile", "--all-active", "--config", e.cfgPath, "--log-level", "warn")
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("yidu reconcile --all-active: %v\n%s", err, out)
	}
	return string(out)
}

// message is one tracked notice and its audience.
type message struct {
	ID     string
	Users  []string
	SentAt time.Time
}

// register starts `yidu dashboard`, registers msgs through POST
// /api/v1/messages as HR's tooling would, and stops it again.
func (e *env) register(msgs []message) {
	e.t.Helper()
	addr := freeAddr(e.t)
	p := e.start("dashboard", []string{"YIDU_DASHBOARD_LISTEN=" + addr}, "dashboard")
	e.waitHTTP(p, "http://"+addr+"/login") // the dashboard has no /healthz
	for _, m := range msgs {
		body, _ := json.Marshal(map[string]any{
			"msgid": m.ID, "app": testApp, "title": "fault test " + m.ID, "sent_at": m.SentAt,
			"audience": map[string]any{"userids": m.Users},
		})
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/messages", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatalf("register %s: %v", m.ID, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			e.t.Fatalf("register %s = %d %s; want 201", m.ID, resp.StatusCode, b)
		}
	}
	p.stop(e.t)
}

// messages returns n messages with the same audience of users members
// ("user-0000" ...), sent a minute ago.
func messages(n, users int) []message {
	aud := make([]string, users)
	for i := range aud {
		aud[i] = fmt.Sprintf("user-%04d", i)
	}
	sent := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	ms := make([]message, n)
	for i := range ms {
		ms[i] = message{ID: fmt.Sprintf("notice-%d", i), Users: aud, SentAt: sent}
	}
	return ms
}
