package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/cmd/yidu-bench/naive"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/kafkatest"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/migrations"
)

// The arms, in the order they run.
const (
	armCeiling = "ceiling"
	armNaive   = "naive"
	armYidu    = "yidu"
)

// allArms is every arm in the order they run; defaultArms those run
// without -arms (the page arm, page.go, is asked for by name).
var (
	allArms     = []string{armCeiling, armNaive, armYidu, armPage}
	defaultArms = []string{armCeiling, armNaive, armYidu}
)

// Bench's fixed identities besides the app (rig.App): a bearer token for
// the dashboard API and the app's callback path.
const (
	apiToken    = "yidu-bench-api-token-0123456789"
	callbackURL = "/wecom/callback/hr"
)

// userIDs names the bench's recipients: u0000000, u0000001, ...
var userIDs = rig.UserIDs{Prefix: "u", Digits: 7}

// Config is one bench invocation.
type Config struct {
	// Servers are the MariaDB and Redis: the bench creates a database and
	// a key prefix of its own there and removes both at the end.
	rig.Servers
	// KafkaBrokers, when set, is used instead of starting yidu-kfake.
	KafkaBrokers []string
	// ApacheKafka starts a three-node Apache Kafka cluster (kafkatest:
	// replication 3, min.insync.replicas 2) from the jars in KafkaLibs
	// instead of yidu-kfake; its JVMs' CPU counts with the yidu arm's.
	ApacheKafka bool
	KafkaLibs   string
	// KfakeBin is the yidu-kfake binary; empty builds it with `go build`.
	KfakeBin   string
	Partitions int
	// Recipients is R, the notice's audience.
	Recipients int
	// Conns is C, the generator's concurrent keep-alive connections.
	Conns int
	// Extra is the fraction of R sent again: half WeCom retries (identical
	// deliveries), half duplicates (a second press).
	Extra float64
	// Cold starts the yidu arm's receiver with receiver.warm false: each
	// member's first callback asks MySQL for its uid.
	Cold bool
	// FlushInterval is flushd's interval for the yidu arm.
	FlushInterval time.Duration
	// Rate > 0 runs an open loop at this many callbacks/s instead of a
	// closed loop.
	Rate float64
	Arms []string
	// ArmTimeout bounds one arm's load phase.
	ArmTimeout time.Duration
	// CPUProfile, when set, receives a CPU profile of the yidu arm.
	CPUProfile string
	// NoLedger runs the yidu arm's flushd without the evidence ledger
	// (process.Main.FlushdWithoutLedger): the comparison arm of what the
	// ledger costs.
	NoLedger bool
	// Logger receives the yidu arm's logs.
	Logger *slog.Logger
	// Progress receives one line per step.
	Progress io.Writer
}

// ArmResult is one arm's figures.
type ArmResult struct {
	Arm       string  `json:"arm"`
	Requests  int     `json:"requests"`
	Accepted  int     `json:"accepted"`
	Errors    int     `json:"errors"`
	Failed    int     `json:"failed"`
	Status    any     `json:"status"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"accepted_per_second"`
	P50ms     float64 `json:"p50_ms"`
	P99ms     float64 `json:"p99_ms"`
	P999ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
	// DashboardExactMs and MySQLExactMs are measured from the last 200
	// (negative: exact before it, the last answers being retries). Nil:
	// never exact, or not applicable (ceiling).
	DashboardExactMs *float64 `json:"dashboard_exact_after_last_200_ms"`
	MySQLExactMs     *float64 `json:"mysql_exact_after_last_200_ms"`
	Exact            *bool    `json:"exact,omitempty"`
	ExactDetail      string   `json:"exact_detail,omitempty"`
	MySQLUpdates     int64    `json:"mysql_update_statements"`
	MySQLTxs         int64    `json:"mysql_transactions,omitempty"`
	RedisMsgBytes    int64    `json:"redis_message_bytes"`
	RedisDedupKeys   int64    `json:"redis_dedup_keys"`
	RedisDedupBytes  int64    `json:"redis_dedup_bytes_estimate"`
	StartRSSMB       float64  `json:"rss_at_start_mb"`
	PeakRSSMB        float64  `json:"peak_rss_mb"`
	// CPUPer1000 is the bench process (generator + server) plus, for yidu,
	// the yidu-kfake process, from the start to exactness, per 1000
	// accepted callbacks (KafkaCPUPer1000 is the yidu-kfake part).
	// MySQLdCPUPer1000 and RedisCPUPer1000 are the servers' over the same
	// span (shared with whatever else runs on the machine).
	CPUPer1000       float64 `json:"cpu_s_per_1000"`
	KafkaCPUPer1000  float64 `json:"kafka_cpu_s_per_1000,omitempty"`
	MySQLdCPUPer1000 float64 `json:"mysqld_cpu_s_per_1000"`
	// MySQLdDBCPUPer1000 is the part of it spent by the mysqld threads
	// serving the bench's database (dbThreadsCPU): flushd's statements
	// and the bench's count of read rows, without other engineers'.
	MySQLdDBCPUPer1000 float64    `json:"mysqld_db_threads_cpu_s_per_1000"`
	RedisCPUPer1000    float64    `json:"redis_cpu_s_per_1000"`
	LoadAvg            [3]float64 `json:"loadavg_after"`
	// Timeline samples, every second from the start of the storm, the
	// reads the dashboard and MySQL showed: [ms, dashboard, mysql].
	Timeline [][3]int64 `json:"timeline,omitempty"`
	// Counters are the yidu arm's own metrics at the end (non-zero series
	// of the read path and flushd): outcomes, dedup hits, errors.
	Counters map[string]float64 `json:"counters,omitempty"`
	// Page is the page arm's own figures (page.go).
	Page *pageFigures `json:"page,omitempty"`
}

// Report is the whole run.
type Report struct {
	When          time.Time          `json:"when"`
	GoVersion     string             `json:"go_version"`
	GOMAXPROCS    int                `json:"gomaxprocs"`
	Recipients    int                `json:"recipients"`
	Conns         int                `json:"conns"`
	Extra         float64            `json:"extra"`
	FlushInterval string             `json:"flush_interval"`
	Rate          float64            `json:"rate"`
	Cold          bool               `json:"cold_receiver,omitempty"`
	NoLedger      bool               `json:"flushd_without_ledger,omitempty"`
	Kafka         string             `json:"kafka"`
	WorkloadBytes int64              `json:"workload_bytes"`
	LoadAvgBefore [3]float64         `json:"loadavg_before"`
	Arms          []ArmResult        `json:"arms"`
	Ratios        map[string]float64 `json:"ratios"`
}

// ErrNotExact is returned (with the report) when naive or yidu did not end
// with exactly R reads.
var ErrNotExact = errors.New("yidu-bench: not exact")

type bench struct {
	cfg     Config
	app     rig.WeComApp
	scratch *rig.Scratch
	// dsn, rdb and prefix are the scratch's.
	dsn     string
	db      *sql.DB
	rdb     *redis.Client
	prefix  string
	sentAt  time.Time
	bins    rig.Binaries
	brokers []string
	kfake   *rig.Proc
	ak      *kafkatest.Cluster
	akDir   string
	mysqld  []int
	redisd  []int
	report  *Report
}

func (b *bench) logf(format string, args ...any) { rig.Logf(b.cfg.Progress, format, args...) }

// Run runs the selected arms and returns the report; it stops and removes
// everything it started or created, also when ctx is cancelled.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if cfg.Recipients < 1 || cfg.Conns < 1 || cfg.Extra < 0 || cfg.Extra > 1 || cfg.FlushInterval <= 0 {
		return nil, errors.New("yidu-bench: need -r ≥ 1, -c ≥ 1, 0 ≤ -extra ≤ 1, -flush-interval > 0")
	}
	for _, a := range cfg.Arms {
		if !slices.Contains(allArms, a) {
			return nil, fmt.Errorf("yidu-bench: unknown arm %q (want %s)", a, strings.Join(allArms, ","))
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Partitions <= 0 {
		cfg.Partitions = 4
	}
	b := &bench{
		cfg:    cfg,
		app:    rig.App(),
		sentAt: time.Now().Add(-20 * time.Minute).UTC().Truncate(time.Second),
		report: &Report{When: time.Now().UTC(), GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0),
			Recipients: cfg.Recipients, Conns: cfg.Conns, Extra: cfg.Extra, FlushInterval: cfg.FlushInterval.String(), Cold: cfg.Cold, NoLedger: cfg.NoLedger,
			Rate: cfg.Rate, LoadAvgBefore: rig.LoadAvg(), Ratios: map[string]float64{}},
	}
	b.mysqld, b.redisd = procsNamed("mariadbd", "mysqld"), procsNamed("redis-server")
	defer b.cleanup()
	if err := b.setup(ctx); err != nil {
		return nil, err
	}
	notExact := false
	for _, name := range allArms {
		if !slices.Contains(cfg.Arms, name) {
			continue
		}
		var r ArmResult
		var err error
		switch name {
		case armCeiling:
			r, err = b.ceiling(ctx)
		case armNaive:
			r, err = b.naive(ctx)
		case armYidu:
			r, err = b.yidu(ctx)
		case armPage:
			r, err = b.page(ctx)
		}
		if err != nil {
			return b.report, fmt.Errorf("%s arm: %w", name, err)
		}
		if r.Exact != nil && !*r.Exact {
			notExact = true
		}
		b.report.Arms = append(b.report.Arms, r)
		b.logf("%s: %.0f callbacks/s, p99 %.1f ms, errors %d", name, r.PerSecond, r.P99ms, r.Errors)
		runtime.GC()
		debug.FreeOSMemory()
	}
	per := map[string]float64{}
	for _, r := range b.report.Arms {
		per[r.Arm] = r.PerSecond
	}
	if per[armYidu] > 0 && per[armCeiling] > 0 {
		b.report.Ratios["yidu/ceiling"] = per[armYidu] / per[armCeiling]
	}
	if per[armYidu] > 0 && per[armNaive] > 0 {
		b.report.Ratios["yidu/naive"] = per[armYidu] / per[armNaive]
	}
	cpu := map[string]float64{}
	for _, r := range b.report.Arms {
		cpu[r.Arm] = r.CPUPer1000 + r.MySQLdCPUPer1000 + r.RedisCPUPer1000
	}
	if cpu[armPage] > 0 && cpu[armCeiling] > 0 {
		b.report.Ratios[ratioPageCPU] = cpu[armPage] / cpu[armCeiling]
	}
	if notExact {
		return b.report, ErrNotExact
	}
	return b.report, nil
}

// setup creates the database and the R members, and starts Kafka.
func (b *bench) setup(ctx context.Context) error {
	var err error
	if b.scratch, err = rig.NewScratch(ctx, b.cfg.Servers, "yidu_bench_", "yidubench", b.cfg.Progress); err != nil {
		return err
	}
	b.dsn, b.rdb, b.prefix = b.scratch.DSN, b.scratch.Redis, b.scratch.Prefix
	b.logf("database %s", b.scratch.DBName)
	if b.db, err = process.OpenDB(b.dsn); err != nil {
		return err
	}
	if _, err := migrations.Up(ctx, b.db); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	start := time.Now()
	ids, err := idmap.New(b.db, idmap.Options{Logger: b.cfg.Logger})
	if err != nil {
		return err
	}
	const chunk = 10_000
	users := make([]string, 0, chunk)
	for i := 0; i < b.cfg.Recipients; i += chunk {
		users = users[:0]
		for j := i; j < min(i+chunk, b.cfg.Recipients); j++ {
			users = append(users, userIDs.ID(j))
		}
		if _, err := ids.Assign(ctx, b.app.CorpID, users); err != nil {
			return fmt.Errorf("assign members: %w", err)
		}
	}
	b.logf("%d members in %s", b.cfg.Recipients, time.Since(start).Round(time.Millisecond))

	if slices.Contains(b.cfg.Arms, armYidu) || slices.Contains(b.cfg.Arms, armPage) {
		switch {
		case b.cfg.ApacheKafka:
			if err := b.startApacheKafka(ctx); err != nil {
				return err
			}
		case len(b.cfg.KafkaBrokers) > 0:
			b.brokers = b.cfg.KafkaBrokers
			b.report.Kafka = "brokers " + strings.Join(b.brokers, ",")
		default:
			if err := b.startKfake(ctx); err != nil {
				return err
			}
			b.report.Kafka = "kfake (yidu-kfake, one process)"
		}
	}
	return nil
}

// startKfake starts yidu-kfake (-kfake-bin, or built) as a child process
// that exits with the bench in any way (rig.StartKfake).
func (b *bench) startKfake(ctx context.Context) error {
	bin := b.cfg.KfakeBin
	if bin == "" {
		var err error
		if bin, err = b.bins.Path(ctx, "yidu-kfake"); err != nil {
			return fmt.Errorf("%w (or pass -kfake-bin)", err)
		}
	}
	p, addr, err := rig.StartKfake(ctx, bin, "yidu.reads", b.cfg.Partitions)
	if err != nil {
		return err
	}
	b.kfake = p
	b.brokers = []string{addr}
	b.logf("yidu-kfake pid %d at %s", p.Pid(), addr)
	return nil
}

// startApacheKafka starts a three-node Apache Kafka cluster in a scratch
// folder and creates the deltas topic on it as `yidu kafka topic` does:
// replication 3, min.insync.replicas 2.
func (b *bench) startApacheKafka(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "yidu-bench-kafka-")
	if err != nil {
		return err
	}
	b.akDir = dir
	start := time.Now()
	if b.ak, err = kafkatest.Start(ctx, kafkatest.Options{Libs: b.cfg.KafkaLibs, Dir: dir, Nodes: 3}); err != nil {
		return err
	}
	b.brokers = b.ak.Brokers()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, _, problems, err := delta.EnsureTopic(ctx, cl, delta.TopicSpec{Name: "yidu.reads", Partitions: int32(b.cfg.Partitions)}); err != nil || len(problems) > 0 {
		return fmt.Errorf("yidu-bench: deltas topic: %v %v", err, problems)
	}
	b.report.Kafka = "Apache Kafka 4.4, three nodes (replication 3, min.insync.replicas 2)"
	b.logf("Apache Kafka: three nodes at %s (pids %v) in %s", strings.Join(b.brokers, ","), b.ak.Pids(), time.Since(start).Round(time.Millisecond))
	return nil
}

// cleanup stops the broker, deletes the Redis keys, drops the database
// and removes the built binary.
func (b *bench) cleanup() {
	if b.kfake != nil {
		_ = b.kfake.Stop(5 * time.Second)
	}
	if b.ak != nil {
		b.ak.Close()
	}
	if b.akDir != "" {
		_ = os.RemoveAll(b.akDir)
	}
	_ = b.bins.Close()
	if b.db != nil {
		b.db.Close()
	}
	if b.scratch != nil {
		b.scratch.Close()
	}
}

// serve starts h on a fresh loopback port with the receiver's server
// settings (process.ReceiverServer).
func serve(h http.Handler) (addr string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := process.ReceiverServer()
	srv.Addr, srv.Handler = ln.Addr().String(), h
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// ceiling answers 200 after reading the body: what the machine and the
// generator can do at all through chi and the receiver's server settings.
func (b *bench) ceiling(ctx context.Context) (ArmResult, error) {
	r := chi.NewRouter()
	r.Post("/wecom/callback/{app}", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	})
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	addr, stop, err := serve(r)
	if err != nil {
		return ArmResult{}, err
	}
	defer stop()
	w, err := b.workload("storm-ceiling", 1)
	if err != nil {
		return ArmResult{}, err
	}
	return b.measure(ctx, arm{name: armCeiling, host: addr}, w)
}

// naive runs the design yidu replaces (package naive).
func (b *bench) naive(ctx context.Context) (ArmResult, error) {
	const msgID = "storm-naive"
	n, err := naive.Setup(ctx, b.db, b.app, msgID, b.sentAt)
	if err != nil {
		return ArmResult{}, err
	}
	if n != int64(b.cfg.Recipients) {
		return ArmResult{}, fmt.Errorf("naive setup: %d recipient rows; want %d", n, b.cfg.Recipients)
	}
	c, _ := mysql.ParseDSN(b.dsn)
	c.InterpolateParams = true
	db, err := process.OpenDB(c.FormatDSN())
	if err != nil {
		return ArmResult{}, err
	}
	defer db.Close()
	ids, err := idmap.New(db, idmap.Options{Logger: b.cfg.Logger})
	if err != nil {
		return ArmResult{}, err
	}
	if _, err := ids.Warm(ctx, b.app.CorpID); err != nil {
		return ArmResult{}, err
	}
	srv, err := naive.New(naive.Options{App: b.app, DB: db, IDs: ids, Logger: b.cfg.Logger})
	if err != nil {
		return ArmResult{}, err
	}
	addr, stop, err := serve(srv.Routes())
	if err != nil {
		return ArmResult{}, err
	}
	defer stop()
	w, err := b.workload(msgID, 2)
	if err != nil {
		return ArmResult{}, err
	}
	res, err := b.measure(ctx, arm{
		name: armNaive, host: addr,
		dashboard: func(ctx context.Context) (int64, error) { return naive.ReadCount(ctx, b.db, b.app.CorpID, msgID) },
		mysql:     func(ctx context.Context) (int64, error) { return b.mysqlReads(ctx, msgID) },
		written:   func() int64 { return srv.Stats().Reads },
		statements: func() (int64, int64) {
			s := srv.Stats()
			return s.Updates, s.Transactions
		},
	}, w)
	if err != nil {
		return res, err
	}
	problems := b.verify(ctx, msgID)
	if got, err := naive.ReadCount(ctx, b.db, b.app.CorpID, msgID); err != nil || got != int64(b.cfg.Recipients) {
		problems = append(problems, fmt.Sprintf("read_count %d (err %v); want %d", got, err, b.cfg.Recipients))
	}
	setExact(&res, problems)
	return res, nil
}

func setExact(r *ArmResult, problems []string) {
	ok := len(problems) == 0 && r.Failed == 0
	if r.Failed > 0 {
		problems = append(problems, fmt.Sprintf("%d callbacks never answered 200", r.Failed))
	}
	r.Exact = &ok
	r.ExactDetail = strings.Join(problems, "; ")
	if ok {
		r.ExactDetail = "R reads, each read_time one of the member's CreateTimes"
	}
}

// yidu runs the real pipeline: receiver, dashboard and flushd in this
// process (cmd/internal/yidu), Kafka in yidu-kfake.
func (b *bench) yidu(ctx context.Context) (ArmResult, error) {
	const msgID = "storm-yidu"
	cfg := config.Default()
	cfg.MySQL.DSN = b.dsn
	cfg.Redis.Addr = b.cfg.RedisAddr
	cfg.Redis.Prefix = b.prefix
	cfg.Redis.TTL = config.Duration(time.Hour) // the bench deletes them; this bounds a crash
	cfg.Kafka.Brokers = b.brokers
	cfg.Kafka.Group = "yidu-bench-" + rig.RandomHex(4)
	cfg.Flushd.Interval = config.Duration(b.cfg.FlushInterval)
	cfg.Receiver.Listen = "127.0.0.1:0"
	// The members exist before Run, so the receiver meets the storm with
	// its UserID cache filled (receiver.warm) unless -cold.
	cfg.Receiver.Warm = !b.cfg.Cold
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Dashboard.Tokens = []config.Token{{Name: "bench", Token: apiToken, Corps: []string{b.app.CorpID}}}
	cfg.Apps = []config.App{{Name: b.app.Name, CorpID: b.app.CorpID, AgentID: b.app.AgentID, Token: b.app.Token,
		EncodingAESKey: b.app.EncodingAESKey, ReadButtonKey: b.app.ReadButtonKey}}
	if err := cfg.Validate(); err != nil {
		return ArmResult{}, err
	}
	m := process.NewMain(cfg, b.cfg.Logger)
	m.FlushdWithoutLedger = b.cfg.NoLedger
	if err := m.Run(ctx, process.All); err != nil {
		m.Close()
		return ArmResult{}, err
	}
	defer func() {
		if err := m.Close(); err != nil {
			b.logf("yidu close: %v", err)
		}
	}()
	start := time.Now()
	if err := b.register(ctx, m.DashboardAddr, msgID); err != nil {
		return ArmResult{}, err
	}
	b.logf("registered %s for %d recipients in %s", msgID, b.cfg.Recipients, time.Since(start).Round(time.Millisecond))
	w, err := b.workload(msgID, 3)
	if err != nil {
		return ArmResult{}, err
	}
	dash := &http.Client{Timeout: 5 * time.Second}
	var pids []int
	if b.kfake != nil {
		pids = append(pids, b.kfake.Pid())
	}
	if b.ak != nil {
		pids = append(pids, b.ak.Pids()...)
	}
	res, err := b.measure(ctx, arm{
		name: armYidu, host: m.ReceiverAddr, pids: pids, profile: b.cfg.CPUProfile,
		dashboard: func(ctx context.Context) (int64, error) {
			p, err := progress(ctx, dash, m.DashboardAddr, msgID)
			if err != nil || p.Recipients != int64(b.cfg.Recipients) {
				return -1, err
			}
			return p.Read, nil
		},
		mysql: func(ctx context.Context) (int64, error) { return b.mysqlReads(ctx, msgID) },
		// Rows flushd's UPDATEs changed, counted after each statement
		// committed; every read of the storm is a card press, so each
		// changed row is a new read.
		written: func() int64 { return int64(counter(m.Registry, "yidu_flushd_rows_updated_total")) },
		statements: func() (int64, int64) {
			return int64(counter(m.Registry, "yidu_flushd_batches_total")), 0
		},
	}, w)
	if err != nil {
		return res, err
	}
	res.RedisMsgBytes, res.RedisDedupKeys, res.RedisDedupBytes = b.redisMemory(ctx, msgID)
	res.Counters = counters(m.Registry, "yidu_callback_requests_total", "yidu_callback_dedup_hits_total",
		"yidu_callback_dedup_errors_total", "yidu_callback_rate_limited_total", "yidu_bitmap_reads_total",
		"yidu_bitmap_queue_full_total", "yidu_bitmap_redis_errors_total", "yidu_bitmap_publish_errors_total",
		"yidu_bitmap_ack_errors_total", "yidu_flushd_batches_total", "yidu_flushd_rows_updated_total",
		"yidu_flushd_retries_total", "yidu_idmap_db_queries_total", "yidu_flushd_statement_seconds",
		"yidu_bitmap_publish_seconds", "yidu_bitmap_redis_roundtrip_seconds", "yidu_callback_duration_seconds")
	problems := b.verify(ctx, msgID)
	if p, err := progress(ctx, dash, m.DashboardAddr, msgID); err != nil || p.Read != int64(b.cfg.Recipients) || p.Recipients != int64(b.cfg.Recipients) {
		problems = append(problems, fmt.Sprintf("dashboard %+v (err %v); want %d of %d", p, err, b.cfg.Recipients, b.cfg.Recipients))
	}
	setExact(&res, problems)
	return res, nil
}

// register registers msgID through the dashboard API for every member.
func (b *bench) register(ctx context.Context, dashAddr, msgID string) error {
	return b.postMessage(ctx, dashAddr, "register", map[string]any{
		"msgid": msgID, "app": b.app.Name, "title": "9:00 storm", "sent_at": b.sentAt,
		"audience": map[string]any{"all": true},
	})
}

// postMessage POSTs a notice to the dashboard API and checks that it was
// created for every member; what names the step in errors.
func (b *bench) postMessage(ctx context.Context, dashAddr, what string, msg map[string]any) error {
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+dashAddr+"/api/v1/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: %s: %s", what, resp.Status, out)
	}
	var m struct {
		Recipients int64 `json:"recipients"`
	}
	if err := json.Unmarshal(out, &m); err != nil || m.Recipients != int64(b.cfg.Recipients) {
		return fmt.Errorf("%s: %s; want %d recipients", what, out, b.cfg.Recipients)
	}
	return nil
}

type progressJSON struct {
	Recipients int64 `json:"recipients"`
	Read       int64 `json:"read"`
}

// progress reads the dashboard's progress of msgID, as HR's page does.
func progress(ctx context.Context, c *http.Client, dashAddr, msgID string) (progressJSON, error) {
	var p progressJSON
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dashAddr+"/api/v1/messages/"+msgID+"/progress", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := c.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return p, fmt.Errorf("progress: %s", resp.Status)
	}
	return p, json.NewDecoder(resp.Body).Decode(&p)
}

// counter sums a counter's series in g.
func counter(g prometheus.Gatherer, name string) float64 {
	mfs, err := g.Gather()
	if err != nil {
		return 0
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				v += m.GetCounter().GetValue()
			}
		}
	}
	return v
}

// counters returns the non-zero counter series of names in g, keyed
// name{label="value",...}.
func counters(g prometheus.Gatherer, names ...string) map[string]float64 {
	mfs, err := g.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !slices.Contains(names, mf.GetName()) {
			continue
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				// A histogram gives its mean: where a callback's time goes.
				if n := h.GetSampleCount(); n > 0 {
					out[mf.GetName()+"_mean_ms"] = h.GetSampleSum() / float64(n) * 1000
					out[mf.GetName()+"_count"] = float64(n)
				}
				continue
			}
			v := m.GetCounter().GetValue()
			if v == 0 {
				continue
			}
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			k := mf.GetName()
			if len(ls) > 0 {
				k += "{" + strings.Join(ls, ",") + "}"
			}
			out[k] = v
		}
	}
	return out
}

// workload builds the storm on msgID, timed for the progress log.
func (b *bench) workload(msgID string, seed uint64) (*workload, error) {
	start := time.Now()
	w, err := buildWorkload(b.app, msgID, b.cfg.Recipients, b.cfg.Extra, b.sentAt, seed)
	if err != nil {
		return nil, err
	}
	b.report.WorkloadBytes = w.bytes
	b.logf("built %d callbacks (%d retries, %d duplicates, %.1f MB) in %s", len(w.reqs), w.retries, w.duplicates,
		float64(w.bytes)/1e6, time.Since(start).Round(time.Millisecond))
	return w, nil
}

// mysqlReads returns the reads MySQL holds for msgID.
//
// It counts the rows still unread (index mrr_read) and subtracts them from
// R, the rows registered: near the end, when it is polled every 100 ms,
// that range is nearly empty, where counting the read rows scanned all R
// of them each time (~50 ms of mysqld at R = 100k, charged to the arm).
// verify checks afterwards that there are exactly R rows, all read.
func (b *bench) mysqlReads(ctx context.Context, msgID string) (int64, error) {
	var unread int64
	err := b.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 0",
		b.app.CorpID, msgID).Scan(&unread)
	return int64(b.cfg.Recipients) - unread, err
}

// verify checks MySQL holds exactly R reads of msgID, one per member, each
// with the CreateTime of one of the member's presses and source 1.
func (b *bench) verify(ctx context.Context, msgID string) []string {
	var problems []string
	rows, err := b.db.QueryContext(ctx, `SELECT u.userid, r.is_read, COALESCE(UNIX_TIMESTAMP(r.read_time), 0), r.source
		FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid = ?`, b.app.CorpID, msgID)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var total, read, badTime, badSource int
	for rows.Next() {
		var id string
		var isRead, source int
		var at float64
		if err := rows.Scan(&id, &isRead, &at, &source); err != nil {
			return []string{err.Error()}
		}
		total++
		if isRead != 1 {
			continue
		}
		read++
		i, ok := userIDs.Index(id)
		first, again := readTimes(b.sentAt, i)
		if !ok || (int64(at) != first && int64(at) != again) {
			badTime++
		}
		if source != 1 {
			badSource++
		}
	}
	if err := rows.Err(); err != nil {
		return []string{err.Error()}
	}
	R := b.cfg.Recipients
	if total != R {
		problems = append(problems, fmt.Sprintf("%d recipient rows; want %d", total, R))
	}
	if read != R {
		problems = append(problems, fmt.Sprintf("MySQL holds %d reads; want exactly %d", read, R))
	}
	if badTime > 0 {
		problems = append(problems, fmt.Sprintf("%d reads with a read_time no press had", badTime))
	}
	if badSource > 0 {
		problems = append(problems, fmt.Sprintf("%d reads with source ≠ 1", badSource))
	}
	return problems
}

// redisMemory returns MEMORY USAGE of the message's keys, the number of
// dedup keys and their estimated memory (a sample of up to 1000 keys).
func (b *bench) redisMemory(ctx context.Context, msgID string) (msgBytes, dedupKeys, dedupBytes int64) {
	sum := func(keys []string) int64 {
		p := b.rdb.Pipeline()
		cmds := make([]*redis.IntCmd, len(keys))
		for i, k := range keys {
			cmds[i] = p.MemoryUsage(ctx, k)
		}
		_, _ = p.Exec(ctx)
		var n int64
		for _, c := range cmds {
			n += c.Val()
		}
		return n
	}
	var keys []string
	iter := b.rdb.Scan(ctx, 0, b.prefix+":m:{"+b.app.CorpID+"/"+msgID+"}:*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	msgBytes = sum(keys)
	keys = keys[:0]
	iter = b.rdb.Scan(ctx, 0, b.prefix+":dd:*", 1000).Iterator()
	for iter.Next(ctx) {
		if len(keys) < 1000 {
			keys = append(keys, iter.Val())
		}
		dedupKeys++
	}
	if len(keys) > 0 {
		dedupBytes = sum(keys) * dedupKeys / int64(len(keys))
	}
	return msgBytes, dedupKeys, dedupBytes
}

// arm is what measure needs to know about one system under test.
type arm struct {
	name string
	host string // the receiver
	// dashboard and mysql return the reads shown and stored (nil: ceiling).
	dashboard, mysql func(ctx context.Context) (int64, error)
	// written is the arm's own count of the reads it has committed to
	// MySQL (no query): what poll reads during the load instead of mysql.
	written    func() int64
	statements func() (updates, txs int64)
	pids       []int  // child processes whose CPU counts (yidu-kfake)
	profile    string // CPU profile file
}

// poll calls f every interval until it returns want, and returns when
// that was first seen (zero when never).
//
// Until loaded is closed it polls every slow instead, and when the arm
// has a counter of its own (during, not nil) it reads that rather than
// calling f, and calls f only once the counter reaches want: a COUNT(*)
// over the notice's rows costs MySQL ~50 ms of CPU at R = 100k while most
// are unread, so ten a second during the storm charged the arm half a
// core of the bench's own making, and one a second still a fifth of
// mysqld's work in the storm (issue 16). Exactness is timed after the
// last 200, where f is called every interval, so this loses nothing but
// the timeline's source: during the load it is the arm's own count.
func poll(ctx context.Context, interval, slow time.Duration, loaded <-chan struct{}, want int64, last *atomic.Int64, f func(context.Context) (int64, error), during func() int64) time.Time {
	var at time.Time
	pprof.Do(ctx, pprof.Labels("role", "poller"), func(ctx context.Context) {
		t := time.NewTicker(slow)
		defer t.Stop()
		for {
			cheap := false
			if loaded != nil && during != nil {
				n := during()
				last.Store(n)
				cheap = n < want
			}
			if !cheap {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				n, err := f(qctx)
				cancel()
				if err == nil {
					last.Store(n)
				}
				if err == nil && n == want {
					at = time.Now()
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-loaded:
				loaded = nil
				t.Reset(interval)
			case <-t.C:
			}
		}
	})
	return at
}

// measure runs the storm against a and collects the figures.
func (b *bench) measure(ctx context.Context, a arm, w *workload) (ArmResult, error) {
	client := newClient(b.cfg.Conns)
	defer client.CloseIdleConnections()
	if err := warm(ctx, client, a.host, b.cfg.Conns); err != nil {
		return ArmResult{}, fmt.Errorf("warm up: %w", err)
	}
	runtime.GC()
	resetPeakRSS()
	r := ArmResult{Arm: a.name, StartRSSMB: float64(memKB("VmRSS")) / 1024}
	cpu0, ext0, my0, rd0 := selfCPU(), sumCPU(a.pids), sumCPU(b.mysqld), sumCPU(b.redisd)
	thr0 := threadsCPU(b.mysqld)
	var upd0, tx0 int64
	if a.statements != nil {
		upd0, tx0 = a.statements()
	}
	if a.profile != "" {
		f, err := os.Create(a.profile)
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
		defer pprof.StopCPUProfile()
	}

	want := int64(b.cfg.Recipients)
	pctx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	var dashAt, mysqlAt time.Time
	var dashN, mysqlN atomic.Int64
	var polls sync.WaitGroup
	var timeline [][3]int64
	var sampled chan struct{}
	loaded := make(chan struct{}) // closed when the load phase ends
	if a.dashboard != nil {
		// The dashboard is polled as the live page would, throughout;
		// MySQL's count is read from the arm's own counter once a second
		// per 100,000 recipients until the load ends (see poll): the
		// query scans the unread rows, ~0.5 µs of mysqld each, so at
		// R = 1M one a second was half a core.
		slow := time.Second * time.Duration(max(1, b.cfg.Recipients/100_000))
		polls.Go(func() {
			dashAt = poll(pctx, 100*time.Millisecond, 100*time.Millisecond, nil, want, &dashN, a.dashboard, nil)
		})
		polls.Go(func() { mysqlAt = poll(pctx, 100*time.Millisecond, slow, loaded, want, &mysqlN, a.mysql, a.written) })
		start := time.Now()
		sampled = make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case now := <-t.C:
					timeline = append(timeline, [3]int64{now.Sub(start).Milliseconds(), dashN.Load(), mysqlN.Load()})
				}
			}
		}()
	}

	b.logf("%s: storm of %d callbacks on %d connections", a.name, len(w.reqs), b.cfg.Conns)
	lctx, cancel := context.WithTimeout(ctx, b.cfg.ArmTimeout)
	lr := runLoad(lctx, client, a.host, callbackURL, w.reqs, b.cfg.Conns, b.cfg.Rate)
	cancel()
	close(loaded)
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	// Wait for exactness: one flush interval plus a generous margin. CPU
	// counts until then, so flushd's work is included.
	if a.dashboard != nil {
		deadline := time.AfterFunc(b.cfg.FlushInterval+30*time.Second, stopPolls)
		polls.Wait()
		deadline.Stop()
		stopPolls()
		<-sampled
		r.Timeline = append(timeline, [3]int64{time.Since(lr.Start).Milliseconds(), dashN.Load(), mysqlN.Load()})
	}
	ext := sumCPU(a.pids) - ext0
	cpu := selfCPU() - cpu0 + ext
	my, rd := sumCPU(b.mysqld)-my0, sumCPU(b.redisd)-rd0
	myDB, err := dbThreadsCPU(ctx, b.db, b.scratch.DBName, b.mysqld, thr0)
	if err != nil {
		return r, fmt.Errorf("mysqld threads of %s: %w", b.scratch.DBName, err)
	}

	r.Requests, r.Accepted, r.Errors, r.Failed, r.Status = lr.Requests, lr.OK, lr.Errors, lr.Failed, lr.Status
	r.Seconds = lr.Elapsed.Seconds()
	if r.Seconds > 0 {
		r.PerSecond = float64(lr.OK) / r.Seconds
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.P50ms, r.P99ms, r.P999ms = ms(rig.Percentile(lr.Lat, .50)), ms(rig.Percentile(lr.Lat, .99)), ms(rig.Percentile(lr.Lat, .999))
	if len(lr.Lat) > 0 {
		r.MaxMs = ms(lr.Lat[len(lr.Lat)-1])
	}
	after := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		v := ms(t.Sub(lr.LastOK))
		return &v
	}
	r.DashboardExactMs, r.MySQLExactMs = after(dashAt), after(mysqlAt)
	if a.statements != nil {
		upd, tx := a.statements()
		r.MySQLUpdates, r.MySQLTxs = upd-upd0, tx-tx0
	}
	r.PeakRSSMB = float64(memKB("VmHWM")) / 1024
	if lr.OK > 0 {
		r.CPUPer1000 = cpu.Seconds() * 1000 / float64(lr.OK)
		r.KafkaCPUPer1000 = ext.Seconds() * 1000 / float64(lr.OK)
		r.MySQLdCPUPer1000 = my.Seconds() * 1000 / float64(lr.OK)
		r.MySQLdDBCPUPer1000 = myDB.Seconds() * 1000 / float64(lr.OK)
		r.RedisCPUPer1000 = rd.Seconds() * 1000 / float64(lr.OK)
	}
	r.LoadAvg = rig.LoadAvg()
	return r, nil
}
