package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/memory"
	"github.com/dolthub/go-mysql-server/server"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/analyzer"
	"github.com/dolthub/go-mysql-server/sql/memo"
	vmysql "github.com/dolthub/vitess/go/mysql"
	"github.com/go-sql-driver/mysql"
	"github.com/sirupsen/logrus"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Database is the name of the MySQL database the embedded server serves.
const Database = "yidu"

// DefaultTopic and DefaultPartitions describe the Kafka topic seeded when
// Options leaves them out: the deltas topic of config.Default, with a few
// partitions so consumer-group code sees more than one.
const (
	DefaultTopic      = "yidu.reads"
	DefaultPartitions = 4
)

// Options configures Start.
type Options struct {
	// Logger receives the servers' lifecycle messages; nil discards them.
	Logger *slog.Logger
	// KafkaTopic is seeded on the Kafka cluster (default DefaultTopic).
	KafkaTopic string
	// KafkaPartitions is the seeded topic's partition count (default
	// DefaultPartitions).
	KafkaPartitions int32
	// LockWait bounds how long a MySQL statement waits while another
	// connection holds the server (default DefaultLockWait); see the
	// package doc on serialization.
	LockWait time.Duration
}

// DefaultLockWait is the default Options.LockWait, shorter than InnoDB's
// 50 s so a client that deadlocks itself fails while a test still runs.
const DefaultLockWait = 10 * time.Second

// Servers are the running embedded servers. Close stops them all.
type Servers struct {
	// RedisAddr is the host:port of the Redis-protocol server.
	RedisAddr string
	// MySQLDSN is a go-sql-driver/mysql DSN for database Database, with
	// parseTime=true and loc=UTC as the production DSN should have.
	MySQLDSN string
	// KafkaBrokers are the seed brokers of the Kafka-protocol cluster.
	KafkaBrokers []string
	// Redis is the miniredis instance, for tests that need to move its
	// clock (FastForward) or inspect it directly.
	Redis *miniredis.Miniredis
	// Kafka is the kfake cluster, for tests that need to control it.
	Kafka *kfake.Cluster

	logger    *slog.Logger
	mysql     *server.Server
	mysqlDone chan struct{}
	closeOnce sync.Once
}

// Start starts a Redis-, a MySQL- and a Kafka-protocol server in this process,
// each on its own 127.0.0.1 port chosen by the kernel. They keep everything in
// memory: nothing survives Close. ctx bounds only the start-up.
func Start(ctx context.Context, opts Options) (*Servers, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "embedded")
	if opts.KafkaTopic == "" {
		opts.KafkaTopic = DefaultTopic
	}
	if opts.LockWait <= 0 {
		opts.LockWait = DefaultLockWait
	}
	if opts.KafkaPartitions <= 0 {
		opts.KafkaPartitions = DefaultPartitions
	}
	s := &Servers{logger: logger}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("embedded: start redis: %w", err)
	}
	s.Redis, s.RedisAddr = mr, mr.Addr()

	if err := s.startMySQL(ctx, opts.LockWait); err != nil {
		return nil, err
	}

	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(opts.KafkaPartitions, opts.KafkaTopic))
	if err != nil {
		return nil, fmt.Errorf("embedded: start kafka: %w", err)
	}
	s.Kafka, s.KafkaBrokers = kc, kc.ListenAddrs()

	logger.Info("embedded servers started", "redis", s.RedisAddr, "mysql", s.mysqlAddr(), "kafka", s.KafkaBrokers)
	ok = true
	return s, nil
}

// quietLogrus keeps go-mysql-server, which logs every connection and query
// through the process-wide logrus logger at info level (and warns about
// secure_file_priv on start), to errors.
var quietLogrus sync.Once

func (s *Servers) startMySQL(ctx context.Context, lockWait time.Duration) error {
	quietLogrus.Do(func() { logrus.SetLevel(logrus.ErrorLevel) })

	// No EnablePrimaryKeyIndexes: on a memory table an index lookup scans
	// every row, tests it against each range and sorts the matches, so a
	// primary-key IN list of k uids cost rows × k range tests (flushd's
	// old UPDATE … IN of 500 uids on a 2,000-row message: 10 s with the
	// index, 1.8 s without, BenchmarkFlushUpdate). Unique keys are
	// enforced all the same: the table editor checks them itself.
	db := memory.NewDatabase(Database)
	pro := memory.NewDBProvider(db)
	engine := sqle.New(analyzer.NewBuilder(pro).AddPreAnalyzeRule(unionTimesRule, unionTimes).Build(), nil)
	engine.Analyzer.Coster = scanCoster{engine.Analyzer.Coster}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("embedded: listen mysql: %w", err)
	}
	cfg := server.Config{Protocol: "tcp", Address: ln.Addr().String(), Listener: ln}
	serial := func(h vmysql.Handler) (vmysql.Handler, error) { return newSerialHandler(h, lockWait), nil }
	srv, err := server.NewServerWithHandler(cfg, engine, gmssql.NewContext, memory.NewSessionBuilder(pro), nil, serial)
	if err != nil {
		ln.Close()
		return fmt.Errorf("embedded: mysql server: %w", err)
	}
	s.mysql = srv
	s.mysqlDone = make(chan struct{})
	go func() {
		defer close(s.mysqlDone)
		if err := srv.Start(); err != nil {
			s.logger.Error("embedded mysql stopped", "err", err)
		}
	}()

	dc := mysql.NewConfig()
	dc.User = "root"
	dc.Net = "tcp"
	dc.Addr = ln.Addr().String()
	dc.DBName = Database
	dc.ParseTime = true
	dc.Loc = time.UTC
	s.MySQLDSN = dc.FormatDSN()
	return waitDial(ctx, dc.Addr)
}

func waitDial(ctx context.Context, addr string) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("embedded: mysql not reachable: %w", err)
	}
	return c.Close()
}

func (s *Servers) mysqlAddr() string {
	if c, err := mysql.ParseDSN(s.MySQLDSN); err == nil {
		return c.Addr
	}
	return ""
}

// Close stops every server; it is safe to call more than once.
func (s *Servers) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.Kafka != nil {
			s.Kafka.Close()
		}
		if s.mysql != nil {
			if err := s.mysql.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				errs = append(errs, fmt.Errorf("embedded: close mysql: %w", err))
			}
			<-s.mysqlDone
		}
		if s.Redis != nil {
			s.Redis.Close()
		}
		s.logger.Info("embedded servers stopped")
	})
	return errors.Join(errs...)
}

var _ io.Closer = (*Servers)(nil)

// scanCoster makes the planner never choose a lookup or a merge join on
// the memory tables. Their index lookup scans the whole table, so a join
// that looks up once per row of its other side costs rows × table; a merge
// join on a key prefix every row shares (corp_id) compares every pair. A
// hash join reads each side once. Measured on 2 loaded cores: flushd's
// batch UPDATE of 400 uids on a 2,000-row message, 5.7-11 s as a lookup
// join, 0.3-0.6 s hashed (BenchmarkFlushdWrite); the directory's
// department memberships (user_departments JOIN users, 2,000 rows), 2.5 s
// merged, 29 ms hashed (TestHashJoin).
type scanCoster struct{ memo.Coster }

// lookupPenalty is a cost no hash or merge join reaches.
const lookupPenalty = 1e15

func (c scanCoster) EstimateCost(ctx *gmssql.Context, n memo.RelExpr, s gmssql.StatsProvider) (float64, error) {
	switch n.(type) {
	case *memo.LookupJoin, *memo.ConcatJoin, *memo.MergeJoin:
		return lookupPenalty, nil
	}
	return c.Coster.EstimateCost(ctx, n, s)
}
