package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/kafkatest"
	"github.com/yidu-io/yidu/internal/opt"
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
	// PageSignIn is the page arm's share of readers without a session.
	PageSignIn float64
	// NoLedger runs the yidu arm's flushd without the evidence ledger
	// (process.Main.FlushdWithoutLedger): the comparison arm of what the
	// ledger costs.
	NoLedger bool
	// AttachmentReaders is how many of the page arm's readers fetch its
	// PDF in the attachment phase (0: no phase; negative: all).
	AttachmentReaders int
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
	// Attachment is the page arm's attachment phase (attachment.go).
	Attachment *attachmentFigures `json:"attachment,omitempty"`
}

// Report is the whole run.
type Report struct {
	When       time.Time `json:"when"`
	GoVersion  string    `json:"go_version"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	// GOGC and MemoryLimit are the collector's target percent and memory
	// limit (bytes) the arms ran under (process.TuneCollector).
	GOGC          int                `json:"gogc"`
	MemoryLimit   int64              `json:"memory_limit"`
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
	opt.Logger(&cfg.Logger)
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
	// Every arm runs under the collector the receiver sets itself
	// (receiver.gogc unless GOGC is set): the yidu and page arms' receiver
	// would set it for the rest of the run anyway, and the ceiling is the
	// receiver's HTTP stack.
	b.report.GOGC, b.report.MemoryLimit = process.TuneCollector(config.Default().Receiver.GOGC, cfg.Logger)
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
