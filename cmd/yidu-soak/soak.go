package main

import (
	"bytes"
	"context"
	"database/sql"
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
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

// The soak's Kafka topic and its partitions (yidu-kfake).
const (
	topic      = "yidu.reads"
	partitions = 4
)

// app is the WeCom app the soak plays; userIDs names its recipients
// s000000, s000001, ...
var (
	app     = rig.App()
	userIDs = rig.UserIDs{Prefix: "s", Digits: 6}
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
	// Servers are the MariaDB and Redis: the soak creates a database and a
	// key prefix of its own there and removes both at the end.
	rig.Servers
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
	cfg     Config
	dir     string
	scratch *rig.Scratch
	// dsn is the scratch database's, with parseTime; db the soak's own
	// pool on it; rdb and prefix are the scratch's.
	dsn      string
	db       *sql.DB
	rdb      *redis.Client
	prefix   string
	apiToken string
	cfgPath  string
	bins     rig.Binaries
	yiduBin  string
	kfakeBin string
	kfake    *rig.Proc
	brokers  string
	// yidu is `yidu serve`, listening on receiver and dashboard.
	yidu                *rig.Proc
	receiver, dashboard string
	sched               schedule
	report              *Report
}

func (s *soak) logf(format string, args ...any) { rig.Logf(s.cfg.Progress, format, args...) }

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
		apiToken: "soak-" + rig.RandomHex(16),
		report: &Report{When: time.Now().UTC(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			Rate: cfg.Rate, MaxRate: cfg.MaxRate, Duration: cfg.Duration, FlushInterval: cfg.FlushInterval,
			Messages: cfg.Messages, Recipients: cfg.Recipients, Callbacks: total, Conns: cfg.Conns,
			Warmup: cfg.Warmup, LoadAvgStart: rig.LoadAvg()},
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
	if s.scratch, err = rig.NewScratch(ctx, s.cfg.Servers, "yidu_soak_", "yidusoak", s.cfg.Progress); err != nil {
		return err
	}
	s.rdb, s.prefix = s.scratch.Redis, s.scratch.Prefix
	c, err := mysql.ParseDSN(s.scratch.DSN)
	if err != nil {
		return err
	}
	c.ParseTime = true
	s.dsn = c.FormatDSN()
	// The soak's own pool reads read_time in UTC, as yidu writes it.
	c.Params = map[string]string{"time_zone": "'+00:00'"}
	if s.db, err = sql.Open("mysql", c.FormatDSN()); err != nil {
		return err
	}
	s.report.Database, s.report.RedisPrefix = s.scratch.DBName, s.prefix
	s.logf("database %s, redis prefix %s", s.scratch.DBName, s.prefix)

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
	start := time.Now()
	out, err := s.bins.Path(ctx, name)
	if err != nil {
		return "", fmt.Errorf("%w (or pass -%s-bin)", err, strings.TrimPrefix(name, "yidu-"))
	}
	s.logf("built %s in %s", name, time.Since(start).Round(time.Millisecond))
	return out, nil
}

// startKfake starts yidu-kfake; it exits with the soak in any way.
func (s *soak) startKfake(ctx context.Context) error {
	p, addr, err := rig.StartKfake(ctx, s.kfakeBin, topic, partitions)
	if err != nil {
		return err
	}
	s.kfake, s.brokers = p, addr
	s.logf("yidu-kfake pid %d at %s", p.Pid(), addr)
	return nil
}

// writeConfig writes yidu.yaml: everything but the addresses of the
// backends, the Redis prefix and the API token, which come from the
// environment as a deployment would pass them (s.env).
func (s *soak) writeConfig() error {
	cfg := config.Default()
	cfg.Receiver.Listen = "127.0.0.1:0"
	// Go's own collector, not the receiver's storm setting (400): the
	// memory checks compare the peaks of the heap between collections,
	// twice the live heap at Go's 100 and five times it at 400, against
	// a slack (8 MB) set at 100. The short soak's caches still fill after
	// its warm-up (a few MB of live heap), which at 400 overran that
	// slack. A leak grows the heap under either.
	cfg.Receiver.GOGC = 0
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Redis.Addr = s.cfg.RedisAddr
	cfg.Redis.TTL = config.Duration(2 * time.Hour) // cleanup deletes them; this bounds a crash
	cfg.Flushd.Interval = config.Duration(s.cfg.FlushInterval)
	cfg.Flushd.Listen = ""
	cfg.WeCom.APIBase = "http://127.0.0.1:1" // nothing is sent; never reach WeCom
	// The receiver's spool in the soak's own directory: a yidu running on
	// the host (or another soak) holds the default one.
	cfg.DataDir = filepath.Join(s.dir, "data")
	cfg.Apps = []config.App{{Name: app.Name, CorpID: app.CorpID, AgentID: app.AgentID, Token: app.Token,
		EncodingAESKey: app.EncodingAESKey, ReadButtonKey: app.ReadButtonKey}}
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

// startYidu runs `yidu serve`, learns its listen addresses from its log
// (it binds 127.0.0.1:0) and waits until the receiver is ready.
func (s *soak) startYidu(ctx context.Context) error {
	p, err := rig.Start(rig.Spec{Name: "yidu serve", Path: s.yiduBin, Args: []string{"serve", "--config", s.cfgPath},
		Env: s.env(), Echo: s.cfg.YiduLog})
	if err != nil {
		return err
	}
	s.yidu = p
	if s.receiver, err = p.Addr(ctx, "receiver", 30*time.Second); err != nil {
		return err
	}
	if s.dashboard, err = p.Addr(ctx, "dashboard", 30*time.Second); err != nil {
		return err
	}
	if err := p.WaitHTTP(ctx, "http://"+s.receiver+"/readyz", 30*time.Second); err != nil {
		return err
	}
	s.logf("yidu serve pid %d: receiver %s, dashboard %s", p.Pid(), s.receiver, s.dashboard)
	return nil
}

// register registers every notice through POST /api/v1/messages with the
// bearer token, as HR's tooling would: the recipients' UserIDs, sent a
// minute before the first callback.
func (s *soak) register(ctx context.Context) error {
	start := time.Now()
	users := make([]string, s.cfg.Recipients)
	for i := range users {
		users[i] = userIDs.ID(i)
	}
	// The directory knows them (a directory sync's work): a registration's
	// audience is made of known members.
	ids, err := idmap.New(s.db, idmap.Options{})
	if err != nil {
		return err
	}
	if _, err := ids.Assign(ctx, app.CorpID, users); err != nil {
		return fmt.Errorf("seed members: %w", err)
	}
	sentAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	client := &http.Client{Timeout: 5 * time.Minute}
	for _, id := range s.sched.msgs {
		body, err := json.Marshal(map[string]any{
			"msgid": id, "app": app.Name, "title": "soak " + id, "sent_at": sentAt,
			"audience": map[string]any{"userids": users},
		})
		if err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.dashboard+"/api/v1/messages", bytes.NewReader(body))
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
// and removes the temporary directory and the built binaries.
func (s *soak) cleanup() {
	if s.yidu != nil && s.yidu.Running() {
		s.yidu.Kill()
	}
	if s.kfake != nil {
		_ = s.kfake.Stop(5 * time.Second)
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.scratch != nil {
		s.scratch.Close()
	}
	_ = s.bins.Close()
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// appConfig is the app as the Pusher signs for it.
func appConfig() wecomsim.App {
	return wecomsim.App{CorpID: app.CorpID, AgentID: app.AgentID, Token: app.Token, EncodingAESKey: app.EncodingAESKey}
}
