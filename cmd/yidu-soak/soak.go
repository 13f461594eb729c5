package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/kfakeproc"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

// The soak's WeCom app: the official sample's crypto parameters
// (wecom-protocol.md, "Official test vector").
const (
	appName    = "hr"
	appToken   = "QDG6eK"
	appAESKey  = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	appCorp    = "wx5823bf96d3bd56c7"
	appAgent   = 218
	readButton = "yidu_read"
	topic      = "yidu.reads"
	partitions = 4
)

// Bounds on the end of a run.
const (
	// stopWait is how long yidu may take to exit after SIGTERM.
	stopWait = 30 * time.Second
	// drainMargin is added to the flush interval for MySQL to catch up
	// with the reads answered 200 after the last callback.
	drainMargin = time.Minute
)

// ErrFailed is returned (with the report) when a verdict check failed.
var ErrFailed = errors.New("yidu-soak: a check failed")

// Config is one soak run.
type Config struct {
	// MySQLDSN names the server; its database part is ignored.
	MySQLDSN  string
	RedisAddr string
	// YiduBin and KfakeBin are the binaries; empty builds them.
	YiduBin, KfakeBin string
	Duration          time.Duration
	// MaxRate and Load give Rate when it is 0.
	MaxRate, Load, Rate float64
	// Recipients per notice and Messages (0: as many as the run needs for
	// every callback to be a first read).
	Recipients, Messages int
	// Conns bounds the callbacks in flight.
	Conns         int
	FlushInterval time.Duration
	// Sample is the sampling period; Warmup the time before the samples
	// the memory and goroutine checks compare (0: one round of every
	// recipient plus a sample, at least a minute).
	Sample, Warmup time.Duration
	// Progress receives one line per step; YiduLog a copy of yidu's log.
	Progress, YiduLog io.Writer
}

// soak is one run's state.
type soak struct {
	cfg      Config
	dir      string
	dsn      string // the soak's database
	dbName   string
	db       *sql.DB
	rdb      *redis.Client
	prefix   string
	apiToken string
	cfgPath  string
	yiduBin  string
	kfakeBin string
	kfake    *kfakeproc.Proc
	brokers  string
	yidu     *child
	sched    schedule
	report   *Report
}

func (s *soak) logf(format string, args ...any) {
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Run runs the soak and returns its report; it stops and removes
// everything it started or created, also when ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Rate <= 0 || cfg.Duration <= 0 || cfg.Recipients < 1 || cfg.Conns < 1 || cfg.FlushInterval <= 0 || cfg.Sample <= 0 {
		return nil, errors.New("yidu-soak: need a positive rate, -duration, -recipients, -c, -flush-interval and -sample")
	}
	total := int(math.Round(cfg.Rate * cfg.Duration.Seconds()))
	if total < 1 {
		return nil, errors.New("yidu-soak: -rate × -duration is less than one callback")
	}
	if cfg.Messages <= 0 {
		cfg.Messages = (total + cfg.Recipients - 1) / cfg.Recipients
	}
	if cfg.Warmup <= 0 {
		// One round (every recipient seen once) and a sample, at least 1 min.
		round := time.Duration(float64(cfg.Recipients) / cfg.Rate * float64(time.Second))
		cfg.Warmup = max(time.Minute, round+cfg.Sample)
	}
	if cfg.Messages*cfg.Recipients < total {
		return nil, fmt.Errorf("yidu-soak: %d notices × %d recipients < %d callbacks: every callback must be a first read", cfg.Messages, cfg.Recipients, total)
	}
	s := &soak{
		cfg:      cfg,
		prefix:   "yidusoak" + randomHex(6),
		apiToken: "soak-" + randomHex(16),
		report: &Report{When: time.Now().UTC(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			Rate: cfg.Rate, MaxRate: cfg.MaxRate, Duration: cfg.Duration, FlushInterval: cfg.FlushInterval,
			Messages: cfg.Messages, Recipients: cfg.Recipients, Callbacks: total, Conns: cfg.Conns,
			Warmup: cfg.Warmup, LoadAvgStart: loadAvg()},
	}
	defer s.cleanup()
	if err := s.setup(ctx); err != nil {
		return nil, err
	}
	s.sched = newSchedule(s.messageIDs(), cfg.Recipients, total, cfg.Rate)
	if err := s.register(ctx); err != nil {
		return nil, err
	}
	if err := s.runLoad(ctx); err != nil {
		return s.report, err
	}
	return s.report, nil
}

func (s *soak) messageIDs() []string {
	ids := make([]string, s.cfg.Messages)
	for i := range ids {
		ids[i] = fmt.Sprintf("soak-%02d", i)
	}
	return ids
}

// setup creates the database and the binaries, starts yidu-kfake, migrates
// and starts `yidu serve`.
func (s *soak) setup(ctx context.Context) error {
	var err error
	if s.dir, err = os.MkdirTemp("", "yidu-soak-"); err != nil {
		return err
	}
	c, err := mysql.ParseDSN(s.cfg.MySQLDSN)
	if err != nil {
		return fmt.Errorf("mysql dsn: %w", err)
	}
	s.dbName = "yidu_soak_" + randomHex(6)
	c.DBName = ""
	admin, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	_, err = admin.ExecContext(ctx, "CREATE DATABASE `"+s.dbName+"` CHARACTER SET utf8mb4")
	admin.Close()
	if err != nil {
		s.dbName = "" // nothing to drop
		return fmt.Errorf("create database: %w", err)
	}
	c.DBName = s.dbName
	c.ParseTime = true
	s.dsn = c.FormatDSN()
	// The soak's own pool reads read_time in UTC, as yidu writes it.
	c.Params = map[string]string{"time_zone": "'+00:00'"}
	if s.db, err = sql.Open("mysql", c.FormatDSN()); err != nil {
		return err
	}
	s.report.Database, s.report.RedisPrefix = s.dbName, s.prefix
	s.logf("database %s, redis prefix %s", s.dbName, s.prefix)
	s.rdb = redis.NewClient(&redis.Options{Addr: s.cfg.RedisAddr})
	if err := s.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis %s: %w", s.cfg.RedisAddr, err)
	}

	if s.yiduBin, err = s.binary(ctx, s.cfg.YiduBin, "yidu"); err != nil {
		return err
	}
	if s.kfakeBin, err = s.binary(ctx, s.cfg.KfakeBin, "yidu-kfake"); err != nil {
		return err
	}
	if err := s.startKfake(ctx); err != nil {
		return err
	}
	if err := s.writeConfig(); err != nil {
		return err
	}
	mig := exec.CommandContext(ctx, s.yiduBin, "migrate", "up", "--config", s.cfgPath, "--log-level", "warn")
	mig.Env = s.env()
	if out, err := mig.CombinedOutput(); err != nil {
		return fmt.Errorf("yidu migrate up: %w: %s", err, out)
	}
	return s.startYidu(ctx)
}

// binary returns bin, or builds github.com/yidu-io/yidu/cmd/<name>.
func (s *soak) binary(ctx context.Context, bin, name string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	out := filepath.Join(s.dir, name)
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/yidu-io/yidu/cmd/"+name)
	if b, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s (or pass -%s-bin): %w: %s", name, strings.TrimPrefix(name, "yidu-"), err, b)
	}
	s.logf("built %s in %s", name, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// startKfake starts yidu-kfake; it exits with the soak in any way.
func (s *soak) startKfake(ctx context.Context) error {
	p, err := kfakeproc.Start(ctx, s.kfakeBin, topic, partitions)
	if err != nil {
		return err
	}
	s.kfake, s.brokers = p, p.Addr
	s.logf("yidu-kfake pid %d at %s", p.Pid(), p.Addr)
	return nil
}

// writeConfig writes yidu.yaml: everything but the addresses of the
// backends, the Redis prefix and the API token, which come from the
// environment as a deployment would pass them (s.env).
func (s *soak) writeConfig() error {
	cfg := config.Default()
	cfg.Receiver.Listen = "127.0.0.1:0"
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Redis.Addr = s.cfg.RedisAddr
	cfg.Redis.TTL = config.Duration(2 * time.Hour) // cleanup deletes them; this bounds a crash
	cfg.Flushd.Interval = config.Duration(s.cfg.FlushInterval)
	cfg.Flushd.Listen = ""
	cfg.WeCom.APIBase = "http://127.0.0.1:1" // nothing is sent; never reach WeCom
	cfg.Apps = []config.App{{Name: appName, CorpID: appCorp, AgentID: appAgent, Token: appToken,
		EncodingAESKey: appAESKey, ReadButtonKey: readButton}}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	s.cfgPath = filepath.Join(s.dir, "yidu.yaml")
	return os.WriteFile(s.cfgPath, b, 0o600)
}

// env is the environment of every yidu process: the parent's without its
// YIDU_ variables (a stray override must not redirect the soak), plus the
// soak's own.
func (s *soak) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "YIDU_") {
			env = append(env, kv)
		}
	}
	return append(env,
		"YIDU_MYSQL_DSN="+s.dsn,
		"YIDU_REDIS_PREFIX="+s.prefix,
		"YIDU_KAFKA_BROKERS="+s.brokers,
		"YIDU_API_TOKEN="+s.apiToken,
	)
}

// child is the running `yidu serve`.
type child struct {
	cmd       *exec.Cmd
	log       string
	receiver  string
	dashboard string
	done      chan struct{}
	err       error
}

// startYidu runs `yidu serve`, learns its listen addresses from its log
// (it binds 127.0.0.1:0) and waits until the receiver is ready.
func (s *soak) startYidu(ctx context.Context) error {
	logPath := filepath.Join(s.dir, "yidu.log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.yiduBin, "serve", "--config", s.cfgPath)
	cmd.Env = s.env()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start yidu serve: %w", err)
	}
	c := &child{cmd: cmd, log: logPath, done: make(chan struct{})}
	s.yidu = c
	addrs := make(chan [2]string, 1)
	go func() {
		var w io.Writer = f
		if s.cfg.YiduLog != nil {
			w = io.MultiWriter(f, s.cfg.YiduLog)
		}
		found := addrs // nil once both are known
		var rcv, dash string
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = w.Write(append(line, '\n'))
			if found == nil {
				continue
			}
			var l struct{ Msg, Addr string }
			if json.Unmarshal(line, &l) != nil {
				continue
			}
			switch l.Msg {
			case "receiver listening":
				rcv = l.Addr
			case "dashboard listening":
				dash = l.Addr
			}
			if rcv != "" && dash != "" {
				found <- [2]string{rcv, dash}
				found = nil
			}
		}
		_, _ = io.Copy(f, pr)
		f.Close()
	}()
	go func() {
		c.err = cmd.Wait()
		pw.Close()
		close(c.done)
	}()
	select {
	case a := <-addrs:
		c.receiver, c.dashboard = a[0], a[1]
	case <-c.done:
		return fmt.Errorf("yidu serve exited: %v\n%s", c.err, tail(logPath, 20))
	case <-time.After(30 * time.Second):
		return fmt.Errorf("yidu serve: not listening within 30 s\n%s", tail(logPath, 20))
	case <-ctx.Done():
		return ctx.Err()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + c.receiver + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("yidu serve: /readyz not 200 within 30 s (%v)\n%s", err, tail(logPath, 20))
		}
		select {
		case <-c.done:
			return fmt.Errorf("yidu serve exited: %v\n%s", c.err, tail(logPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	s.logf("yidu serve pid %d: receiver %s, dashboard %s", cmd.Process.Pid, c.receiver, c.dashboard)
	return nil
}

// stop sends SIGTERM and waits up to stopWait for the exit; it returns
// the exit code (-1: killed after stopWait) and how long it took.
func (c *child) stop() (code int, took time.Duration) {
	start := time.Now()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(stopWait):
		_ = c.cmd.Process.Kill()
		<-c.done
		return -1, time.Since(start)
	}
	return c.cmd.ProcessState.ExitCode(), time.Since(start)
}

func (c *child) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// register registers every notice through POST /api/v1/messages with the
// bearer token, as HR's tooling would: the recipients' UserIDs, sent a
// minute before the first callback.
func (s *soak) register(ctx context.Context) error {
	start := time.Now()
	users := make([]string, s.cfg.Recipients)
	for i := range users {
		users[i] = userID(i)
	}
	sentAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	client := &http.Client{Timeout: 5 * time.Minute}
	for _, id := range s.sched.msgs {
		body, err := json.Marshal(map[string]any{
			"msgid": id, "app": appName, "title": "soak " + id, "sent_at": sentAt,
			"audience": map[string]any{"userids": users},
		})
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.yidu.dashboard+"/api/v1/messages", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("register %s: %w", id, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("register %s: %s: %s", id, resp.Status, out)
		}
	}
	s.logf("registered %d notices × %d recipients in %s", len(s.sched.msgs), s.cfg.Recipients, time.Since(start).Round(time.Millisecond))
	return nil
}

// cleanup stops the processes, deletes the Redis keys, drops the database
// and removes the temporary directory.
func (s *soak) cleanup() {
	if s.yidu != nil && s.yidu.running() {
		_ = s.yidu.cmd.Process.Kill()
		<-s.yidu.done
	}
	if s.kfake != nil {
		s.kfake.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.rdb != nil {
		n := 0
		var keys []string
		del := func() {
			n += len(keys)
			s.rdb.Del(ctx, keys...)
			keys = keys[:0]
		}
		iter := s.rdb.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if keys = append(keys, iter.Val()); len(keys) == 1000 {
				del()
			}
		}
		if len(keys) > 0 {
			del()
		}
		s.rdb.Close()
		s.logf("deleted %d redis keys under %s", n, s.prefix)
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.dbName != "" {
		c, _ := mysql.ParseDSN(s.cfg.MySQLDSN)
		c.DBName = ""
		if db, err := sql.Open("mysql", c.FormatDSN()); err == nil {
			if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+s.dbName+"`"); err != nil {
				s.logf("drop database %s: %v", s.dbName, err)
			} else {
				s.logf("dropped database %s", s.dbName)
			}
			db.Close()
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// userID is recipient i's WeCom UserID.
func userID(i int) string { return fmt.Sprintf("s%06d", i) }

// userIndex is userID's inverse.
func userIndex(id string) (int, bool) {
	if len(id) < 2 || id[0] != 's' {
		return 0, false
	}
	n, err := strconv.Atoi(id[1:])
	return n, err == nil && n >= 0
}

// appConfig is the app as the Pusher signs for it.
func appConfig() wecomsim.App {
	return wecomsim.App{CorpID: appCorp, AgentID: appAgent, Token: appToken, EncodingAESKey: appAESKey}
}
