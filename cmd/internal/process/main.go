// Package process builds yidu's parts from a configuration and runs them: the
// receiver, the dashboard and flushd, alone or together. cmd/yidu (the
// production binary) and cmd/yidu-demo share it; it never starts an
// embedded server itself.
//
// Shape (benbjohnson/wtf): NewMain, Run(ctx) that starts and returns, Close
// that stops in dependency order: HTTP servers first (with a fresh timeout
// context, so in-flight callbacks finish), then the read path they feed,
// then flushd (which drains and commits), then the connections.
package process

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/silenceper/wechat/v2/util"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/internal/probe"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/reconcile"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// The providers satisfy the interfaces their consumers declare; checked
// here so that no provider imports a consumer.
var (
	_ callback.ReadRecorder   = (*bitmap.Recorder)(nil)
	_ callback.Deduper        = (*callback.RedisDedup)(nil)
	_ callback.ContactApplier = (*idmap.Mapper)(nil)
	_ callback.OAuth          = (*wecom.OAuth)(nil)
	_ bitmap.UIDLookup        = (*idmap.Mapper)(nil)
	_ bitmap.MessageLoader    = (*tracker.Registry)(nil)
	_ bitmap.Publisher        = (*delta.Producer)(nil)
	_ bitmap.Publisher        = (*delta.Spool)(nil)
	_ tracker.Directory       = (*idmap.Mapper)(nil)
	_ tracker.Store           = (*bitmap.Store)(nil)
	_ tracker.Sender          = (*wecom.Sender)(nil)
	_ dashboard.Messages      = (*tracker.Registry)(nil)
	_ dashboard.Bitmaps       = (*bitmap.Store)(nil)
	_ dashboard.Directory     = (*idmap.Mapper)(nil)
	_ flushd.LiveView         = (*bitmap.Healer)(nil)
	_ flushd.Members          = (*idmap.Mapper)(nil)
	_ reconcile.Archive       = (*tracker.Registry)(nil)
	_ reconcile.Bitmaps       = (*bitmap.Store)(nil)
	_ reconcile.Publisher     = (*delta.Producer)(nil)
)

// The compose page's directory endpoints read idmap's Index and Expand.
var _ dashboard.AudienceDirectory = (*idmap.Mapper)(nil)

// campaign checks a notice's audience with the registration's expansion.
var _ campaign.Directory = (*idmap.Mapper)(nil)

// Roles says which parts Run starts.
type Roles struct {
	Receiver  bool
	Dashboard bool
	Flushd    bool
}

// All is every role: `yidu serve`.
var All = Roles{Receiver: true, Dashboard: true, Flushd: true}

// Main is one running yidu process.
type Main struct {
	Config config.Config
	Logger *slog.Logger
	// Registry collects every metric; /metrics serves it.
	Registry *prometheus.Registry
	// Sender overrides the WeCom sender (tests and the demo's fake WeCom);
	// nil builds one from the apps' secrets.
	Sender tracker.Sender

	// Set by Run.
	DB *sql.DB
	// ReceiverDB is the receiver's own pool when it runs beside other
	// roles (yidu serve); nil when the receiver uses DB.
	ReceiverDB *sql.DB
	Redis      redis.UniversalClient
	Store      *bitmap.Store
	Producer   *delta.Producer
	// Spool is the receiver's local spool in front of Producer, with
	// receiver.spool_dir.
	Spool    *delta.Spool
	Recorder *bitmap.Recorder
	Mapper   *idmap.Mapper
	// ReceiverMapper is the receiver's idmap: Mapper, or its own over the
	// receiver's pool (openReceiverPool); WarmReceiver fills its cache.
	ReceiverMapper *idmap.Mapper
	Tracker        *tracker.Registry
	Flusher        *flushd.Flusher
	Receiver       *callback.Receiver
	Dashboard      *dashboard.Server

	// ReceiverAddr and DashboardAddr are the bound addresses (":0" resolved).
	ReceiverAddr  string
	DashboardAddr string
	// FlushdAddr is flushd's probe and metrics address when it runs alone.
	FlushdAddr string

	dsn         string
	ready       *prometheus.GaugeVec
	servers     []*http.Server
	flushCancel context.CancelFunc
	flushDone   chan struct{}
	flushErr    error
	closeOnce   sync.Once
	closeErr    error

	// campaignCancel, campaignDone: the scheduled-notice Runner of the
	// dashboard role.
	campaignCancel context.CancelFunc
	campaignDone   chan struct{}
	// bg lives until Close: the receiver's background start work (Kafka
	// check, UserID warm-up) and, beside the receiver, flushd's start.
	bg       context.Context
	bgCancel context.CancelFunc
	warmDone chan struct{}
	// verifyName and verifyBody: wecom.verify_file, served at the root of
	// the receiver and the dashboard.
	verifyName string
	verifyBody []byte
	mu         sync.Mutex // guards closing, Flusher and flushCancel once Run returned
	closing    bool
}

// NewMain returns a Main for cfg logging to logger.
func NewMain(cfg config.Config, logger *slog.Logger) *Main {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge())
	ready, _ := probe.NewStatus(reg) // a fresh registry: cannot collide
	return &Main{Config: cfg, Logger: logger, Registry: reg, ready: ready}
}

// PointWeCom sets up silenceper/wechat/v2's process-wide HTTP settings:
// a timeout (it has none by default, and a hung WeCom call must not hang a
// directory sync or a send forever) and, when wecom.api_base is not WeCom's
// own host, a URI rewrite to it (a fake WeCom in the demo and tests).
// Process-wide, which is why only cmd calls it.
func PointWeCom(c config.WeCom) {
	util.DefaultHTTPClient = &http.Client{Timeout: 30 * time.Second}
	base := strings.TrimRight(c.APIBase, "/")
	if base == "" || base == config.DefaultWeComAPI {
		return
	}
	util.SetURIModifier(func(uri string) string {
		if rest, ok := strings.CutPrefix(uri, config.DefaultWeComAPI); ok {
			return base + rest
		}
		return uri
	})
}

// OpenDB opens the MySQL pool for dsn with the settings yidu relies on:
// parseTime, UTC, and no multi-statements; config.DefaultMySQLConns
// connections (SetMaxOpenConns changes it).
func OpenDB(dsn string) (*sql.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: parse dsn: %w", err)
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.MultiStatements = false
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["time_zone"] = "'+00:00'"
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("mysql: open: %w", err)
	}
	db.SetMaxOpenConns(config.DefaultMySQLConns)
	db.SetMaxIdleConns(config.DefaultMySQLConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	return db, nil
}

// CreateDatabase creates the DSN's database when it does not exist, so a
// first `yidu migrate up` works on an empty server.
func CreateDatabase(ctx context.Context, dsn string) error {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("mysql: parse dsn: %w", err)
	}
	name := c.DBName
	if name == "" {
		return errors.New("mysql: dsn names no database")
	}
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return fmt.Errorf("mysql: open: %w", err)
	}
	defer db.Close()
	q := "CREATE DATABASE IF NOT EXISTS `" + strings.ReplaceAll(name, "`", "``") + "` CHARACTER SET utf8mb4"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("mysql: create database %s: %w", name, err)
	}
	return nil
}

// Open connects MySQL and Redis and builds the parts every role shares.
// It pings both: a command run (yidu doctor, yidu send) stops at once
// with the reason when one is down. Run does not ping: a receiver must
// listen whatever is down (docs/reliability.md, Starting in an outage).
func (m *Main) Open(ctx context.Context) error {
	if err := m.open(); err != nil {
		return err
	}
	return m.ping(ctx)
}

// ping checks MySQL and Redis within 10 s.
func (m *Main) ping(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.DB.PingContext(pctx); err != nil {
		return fmt.Errorf("mysql: ping: %w", err)
	}
	if err := m.Redis.Ping(pctx).Err(); err != nil {
		return fmt.Errorf("redis: ping %s: %w", redisWhere(m.Config.Redis), err)
	}
	return nil
}

// open builds the clients and the shared parts without talking to any
// server: database/sql and go-redis connect on first use.
func (m *Main) open() error {
	cfg := m.Config
	dsn, err := MySQLDSN(cfg.MySQL)
	if err != nil {
		return err
	}
	m.dsn = dsn
	db, err := OpenDB(dsn)
	if err != nil {
		return err
	}
	m.DB = db
	if n := cfg.MySQL.MaxOpenConns; n > 0 {
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
	}
	if err := m.Registry.Register(collectors.NewDBStatsCollector(db, "yidu")); err != nil {
		return fmt.Errorf("mysql: metrics: %w", err)
	}
	if m.Redis, err = NewRedis(cfg.Redis); err != nil {
		return err
	}
	if err := m.Registry.Register(newRedisPoolCollector(m.Redis)); err != nil {
		return fmt.Errorf("redis: metrics: %w", err)
	}
	log := m.Logger
	PointWeCom(cfg.WeCom)
	if m.Store, err = bitmap.New(m.Redis, bitmap.Options{
		Prefix:     cfg.Redis.Prefix,
		TTL:        cfg.Redis.TTL.D(),
		Logger:     log,
		Registerer: m.Registry,
	}); err != nil {
		return err
	}
	if m.Mapper, err = idmap.New(db, idmap.Options{Logger: log, Registerer: m.Registry}); err != nil {
		return err
	}
	sender := m.Sender
	if sender == nil {
		sender = wecom.NewSender(WeComApps(cfg.Apps), wecom.SenderOptions{})
	}
	m.Tracker, err = tracker.New(db, m.Mapper, m.Store, tracker.Options{
		Logger:        log,
		Registerer:    m.Registry,
		Sender:        sender,
		OrphanApplier: orphanApplier{db},
		Apps:          DomainApps(cfg.Apps),
		Links:         CardLinks(cfg),
	})
	return err
}

// CardLinks returns how the tracker turns a message's url into the card's
// tracked link (docs/api.md, Tracked links): signed with the app's link
// key on receiver.public_url, so opening the notice from the card records
// a link read. nil without a public URL: the card opens the url itself,
// and the opening is not recorded. An app without a secret cannot sign:
// its cards open the url itself too.
func CardLinks(cfg config.Config) tracker.LinkFunc {
	public := cfg.Receiver.PublicURL
	if public == "" {
		return nil
	}
	keys := map[string][]byte{}
	for _, a := range cfg.Apps {
		keys[a.Name] = callback.LinkKey(a.Name, a.Secret)
	}
	return func(app yidu.App, msgID, target string) (string, error) {
		key := keys[app.Name]
		if key == nil {
			return target, nil
		}
		return callback.LinkURL(public, app.Name, key, msgID, target)
	}
}

// DomainApps returns the apps as the domain sees them: no secrets.
func DomainApps(apps []config.App) []yidu.App { return each(apps, domainApp) }

func domainApp(a config.App) yidu.App {
	return yidu.App{Name: a.Name, CorpID: a.CorpID, AgentID: a.AgentID, ReadButtonKey: a.ReadButtonKey, ReadSignals: a.Signals(),
		Timezone: a.Timezone, FollowUp: a.FollowUp}
}

// WeComApps returns what the WeCom API clients need of the apps: their
// secrets, which reach no other package.
func WeComApps(apps []config.App) []wecom.App {
	return each(apps, func(a config.App) wecom.App { return wecom.App{CorpID: a.CorpID, AgentID: a.AgentID, Secret: a.Secret} })
}

// CallbackApps returns what the receiver needs of the apps: the callback
// Token and EncodingAESKey, and the tracked-link key derived from the
// secret (never the secret itself).
func CallbackApps(apps []config.App) []callback.App {
	return each(apps, func(a config.App) callback.App {
		if a.ReadReply == "" {
			a.ReadReply = config.DefaultReadReply
		}
		return callback.App{App: domainApp(a), Token: a.Token, EncodingAESKey: a.EncodingAESKey,
			LinkKey: callback.LinkKey(a.Name, a.Secret), ReadReply: a.ReadReply}
	})
}

// each maps f over in.
func each[S, T any](in []S, f func(S) T) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// flushStatement picks the form of flushd's batch UPDATE: mysql.dialect
// names the server, or with "auto" its VERSION() does (flushd.StatementFor).
func flushStatement(ctx context.Context, db *sql.DB, dialect string, log *slog.Logger) (flushd.Statement, error) {
	d, version := flushd.Dialect(dialect), ""
	if dialect == config.DialectAuto {
		vctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		v, err := flushd.ServerVersion(vctx, db)
		if err != nil {
			return 0, fmt.Errorf("flushd: mysql.dialect auto: %w", err)
		}
		d, version = flushd.DialectOf(v), v
	}
	st := flushd.StatementFor(d, version)
	log.Info("flushd statement", "dialect", d, "version", version, "statement", st.String())
	return st, nil
}

// orphanApplier adapts flushd.ApplyOrphans to tracker.OrphanApplier.
type orphanApplier struct{ db *sql.DB }

func (o orphanApplier) ApplyOrphans(ctx context.Context, corpID, msgID string) (int, error) {
	return flushd.ApplyOrphans(ctx, o.db, corpID, msgID)
}

// Run opens the connections and starts the roles; it returns once they
// are listening. Close stops them.
//
// With the receiver role nothing waits for a server before the receiver
// listens (docs/reliability.md, Starting in an outage): WeCom gives a
// callback three tries 5 s apart, and a receiver that exits or waits
// while Redis, MySQL or Kafka is down loses the reads of those 15 s. The
// reads go through the degraded paths meanwhile (unmarked without Redis,
// by UserID without MySQL, to the spool without Kafka); the Kafka
// credential check and the UserID warm-up run in the background with
// retries, and so does flushd's start beside it (yidu serve). flushd or
// the dashboard alone wait for their servers as before.
func (m *Main) Run(ctx context.Context, roles Roles) error {
	m.bg, m.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := m.open(); err != nil {
		return err
	}
	cfg := m.Config
	log := m.Logger
	var err error
	if m.verifyName, m.verifyBody, err = cfg.WeCom.ReadVerifyFile(); err != nil {
		return err
	}
	if !roles.Receiver {
		if err := m.ping(ctx); err != nil {
			return err
		}
	}
	if roles.Receiver {
		go func() {
			// A refused credential cannot heal by itself: say so loudly,
			// but keep spooling (the spool forwards once it is fixed).
			if err := CheckKafka(m.bg, cfg.Kafka, 10*time.Second); err != nil {
				log.Error("receiver: kafka check failed; reads are spooled until it passes", "err", err)
			}
		}()
	} else if roles.Flushd {
		if err := CheckKafka(ctx, cfg.Kafka, 10*time.Second); err != nil {
			return err
		}
	}
	if roles.Receiver {
		kopts, err := KafkaOpts(cfg.Kafka, m.Registry, "producer")
		if err != nil {
			return err
		}
		p, err := delta.NewProducer(cfg.Kafka.Brokers, cfg.Kafka.Topic, delta.ProducerOptions{Logger: log, Extra: kopts})
		if err != nil {
			return fmt.Errorf("kafka producer: %w", err)
		}
		m.Producer = p
		ids, loader := m.Mapper, m.Tracker
		if roles.Dashboard || roles.Flushd {
			if ids, loader, err = m.openReceiverPool(); err != nil {
				return err
			}
		}
		m.ReceiverMapper = ids
		var pub bitmap.Publisher = p
		if dir := cfg.Receiver.SpoolDir; dir == config.SpoolOff || dir == "" {
			log.Warn("receiver: no spool (receiver.spool_dir off, or no data_dir): a read Kafka does not acknowledge is answered 503, and WeCom gives up after 3 tries")
		} else if dir := cfg.Receiver.SpoolDir; dir != "" {
			if m.Spool, err = delta.NewSpool(p, delta.SpoolOptions{
				Dir: dir, MaxBytes: cfg.Receiver.SpoolMaxBytes, Logger: log, Registerer: m.Registry,
			}); err != nil {
				return fmt.Errorf("receiver: %w", err)
			}
			pub = m.Spool
			log.Info("receiver spool", "dir", dir, "max_bytes", cfg.Receiver.SpoolMaxBytes)
		}
		if m.Recorder, err = bitmap.NewRecorder(m.Store, ids, pub, loader, bitmap.RecorderOptions{
			Apps: DomainApps(cfg.Apps), Logger: log, Registerer: m.Registry,
		}); err != nil {
			return err
		}
		var oauth callback.OAuth // tracked links: only with receiver.public_url
		if cfg.Receiver.PublicURL != "" {
			oauth = wecom.NewOAuth(WeComApps(cfg.Apps))
			for _, a := range cfg.Apps {
				if a.Secret == "" {
					log.Warn("tracked links of this app are refused: it has no secret", "app", a.Name)
				}
			}
		}
		proxies, err := clientip.ParseProxies(cfg.Receiver.TrustedProxies)
		if err != nil {
			return fmt.Errorf("receiver: %w", err)
		}
		rcv, err := callback.New(m.Recorder, callback.Options{
			TrustedProxies:  proxies,
			Apps:            CallbackApps(cfg.Apps),
			Contacts:        ids,
			Dedup:           callback.NewRedisDedup(m.Redis, cfg.Redis.Prefix),
			Logger:          log,
			Registerer:      m.Registry,
			TimestampWindow: cfg.Receiver.TimestampWindow.D(),
			MaxBody:         cfg.Receiver.MaxBody,
			Timeout:         cfg.Receiver.Timeout.D(),
			MemberRate:      cfg.Receiver.MemberRate,
			MemberBurst:     cfg.Receiver.MemberBurst,
			PublicURL:       cfg.Receiver.PublicURL,
			OAuth:           oauth,
		})
		if err != nil {
			return fmt.Errorf("receiver: %w", err)
		}
		m.Receiver = rcv
		routes := rcv.Routes()
		// The reading page of notices with content (issue 39) beside the
		// tracked links, on receiver.public_url.
		if oauth != nil {
			pages, err := m.readingPage(cfg, ids, loader, oauth, log)
			if err != nil {
				return fmt.Errorf("receiver: reading page: %w", err)
			}
			if pages != nil {
				routes = pageFront(pages.Routes(), routes)
			}
		}
		if m.ReceiverAddr, err = m.serveRole("receiver", ReceiverServer(), cfg.Receiver.Listen, routes, m.readiness(cmp.Or(m.ReceiverDB, m.DB), true)); err != nil {
			return err
		}
		m.warmDone = make(chan struct{})
		if cfg.Receiver.Warm {
			go func() {
				defer close(m.warmDone)
				m.warmRetrying(m.bg)
			}()
		} else {
			close(m.warmDone)
		}
	}
	if roles.Dashboard {
		proxies, err := cfg.Dashboard.Proxies()
		if err != nil {
			return err
		}
		camps, err := campaign.NewStore(m.DB, campaign.Options{Directory: m.Mapper, Apps: DomainApps(cfg.Apps), Logger: log, Registerer: m.Registry})
		if err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
		runner, err := campaign.NewRunner(camps, m.Tracker, campaign.RunnerOptions{MaxLateness: cfg.Dashboard.MaxLateness.D()})
		if err != nil {
			return fmt.Errorf("campaign: %w", err)
		}
		cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
		m.campaignCancel, m.campaignDone = ccancel, make(chan struct{})
		rounds := followUpRounds(m, cfg, log)
		go func() {
			defer close(m.campaignDone)
			roundsDone := make(chan struct{})
			go func() { defer close(roundsDone); _ = rounds.Run(cctx, 2*time.Second) }()
			_ = runner.Run(cctx)
			<-roundsDone
		}()
		acc, err := access.New(access.Config{Roles: accessRoles(cfg.Dashboard.Roles), LeadersSee: cfg.Dashboard.SeeLeaders()}, m.Mapper, time.Now)
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		atts, err := attachment.New(m.DB, attachment.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		notices, err := notice.New(m.DB, atts, notice.Options{Logger: log})
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		d, err := dashboard.New(m.Tracker, m.Store, m.Mapper, dashboard.Options{
			Access:     acc,
			WeCom:      weComLogin(cfg, acc, m),
			Tokens:     dashboardTokens(cfg.Dashboard.Tokens),
			Users:      dashboardUsers(cfg.Dashboard.Users),
			Audit:      audit.NewMySQL(m.DB),
			AuditLog:   audit.NewMySQL(m.DB),
			SessionTTL: cfg.Dashboard.SessionTTL.D(),
			// Shared by every replica, kept across restarts.
			Sessions:       dashboard.NewRedisSessions(m.Redis, cfg.Redis.Prefix),
			TrustedProxies: proxies,
			PublicURL:      cfg.Dashboard.PublicURL,
			RemindInterval: cfg.Dashboard.RemindInterval.D(),
			// One principal's share of the streams and of the heavy
			// queries; the queries leave most of the MySQL pool to the
			// receiver and flushd (docs/reliability.md, Hostile use).
			MaxStreams:             cfg.Dashboard.MaxStreams,
			MaxStreamsPerPrincipal: cfg.Dashboard.MaxStreamsPerPrincipal,
			StreamWriteTimeout:     cfg.Dashboard.StreamWriteTimeout.D(),
			MaxQueries:             cfg.Dashboard.MaxQueries,
			MaxQueriesPerPrincipal: cfg.Dashboard.MaxQueriesPerPrincipal,
			Apps:                   DomainApps(cfg.Apps),
			Logger:                 log,
			Registerer:             m.Registry,
			Campaigns:              camps,
			ConfirmOver:            cfg.Dashboard.ConfirmOver,
			FollowUps:              rounds,
			Attachments:            atts,
			Notices:                notices,
			ReadingPage:            readingPageURL(cfg.Receiver.PublicURL),
		})
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		m.Dashboard = d
		// Roles are configuration: a start with other grants than the last
		// one is recorded as role_change events (access.RecordRoleChanges).
		if n, err := access.RecordRoleChanges(ctx, m.DB, audit.NewMySQL(m.DB), roleHolders(cfg.Dashboard), time.Now()); err != nil {
			log.Error("dashboard: role changes not audited", "err", err)
		} else if n > 0 {
			log.Info("dashboard: role changes audited", "changes", n)
		}
		if m.DashboardAddr, err = m.serveRole("dashboard", dashboardServer(), cfg.Dashboard.Listen, d.Routes(), m.readiness(m.DB, false)); err != nil {
			return err
		}
	}
	if roles.Flushd {
		if roles.Receiver {
			// Beside the receiver: flushd waits for MySQL in the
			// background, the receiver is already listening.
			m.flushDone = make(chan struct{})
			go func() {
				if err := m.waitFor(m.bg, "mysql", func(ctx context.Context) error { return m.DB.PingContext(ctx) }); err != nil {
					close(m.flushDone) // Close came first: nothing started
					return
				}
				if err := m.startFlushd(m.bg, roles, true); err != nil {
					m.flushErr = err
					close(m.flushDone)
				}
			}()
			return nil
		}
		return m.startFlushd(ctx, roles, false)
	}
	return nil
}

// waitFor retries check (each try bounded by 10 s) with jittered
// exponential backoff from 250 ms to 10 s until it passes; it returns
// ctx's error if ctx ends first. what names the dependency in the log.
func (m *Main) waitFor(ctx context.Context, what string, check func(context.Context) error) error {
	backoff := 250 * time.Millisecond
	for warned := false; ; {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			if warned {
				m.Logger.Info("dependency is back", "dependency", what)
			}
			return nil
		}
		if !warned {
			m.Logger.Warn("dependency is down; retrying in the background", "dependency", what, "err", err)
			warned = true
		}
		if err := jitter.Sleep(ctx, jitter.Apply(backoff)); err != nil {
			return err
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// startFlushd builds flushd and starts its loop. async: flushDone was
// made by the caller (flushd starting in the background).
func (m *Main) startFlushd(ctx context.Context, roles Roles, async bool) error {
	cfg := m.Config
	log := m.Logger
	{
		kopts, err := KafkaOpts(cfg.Kafka, m.Registry, "consumer")
		if err != nil {
			return err
		}
		stmt, err := flushStatement(ctx, m.DB, cfg.MySQL.Dialect, log)
		if err != nil {
			return err
		}
		healer, err := bitmap.NewHealer(m.Store, m.Tracker, log)
		if err != nil {
			return fmt.Errorf("flushd: %w", err)
		}
		f, err := flushd.New(m.DB, flushd.Options{
			Statement:      stmt,
			Live:           healer,
			Members:        m.Mapper,
			KafkaOpts:      kopts,
			Brokers:        cfg.Kafka.Brokers,
			Topic:          cfg.Kafka.Topic,
			Group:          cfg.Kafka.Group,
			Interval:       cfg.Flushd.Interval.D(),
			BatchSize:      cfg.Flushd.BatchSize,
			MaxPending:     cfg.Flushd.MaxPending,
			DrainTimeout:   cfg.Flushd.DrainTimeout.D(),
			SessionTimeout: cfg.Kafka.SessionTimeout.D(),
			InstanceID:     cfg.Flushd.InstanceID,
			Logger:         log,
			Registerer:     m.Registry,
		})
		if err != nil {
			return fmt.Errorf("flushd: %w", err)
		}
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			cancel()
			return errors.New("flushd: closed before it started")
		}
		m.Flusher = f
		m.flushCancel = cancel
		m.mu.Unlock()
		if !async {
			m.flushDone = make(chan struct{})
		}
		go func() {
			defer close(m.flushDone)
			m.flushErr = f.Run(fctx)
		}()
		log.Info("flushd consuming", "topic", cfg.Kafka.Topic, "group", cfg.Kafka.Group)
		if !roles.Receiver && !roles.Dashboard && cfg.Flushd.Listen != "" {
			// flushd alone has no HTTP of its own: serve its probes and
			// metrics (lag, pending, retries) for the orchestrator.
			alive := func() error {
				select {
				case <-m.flushDone:
					return errors.New("flushd stopped")
				default:
					return nil
				}
			}
			addr, err := m.serve(opsServer(), cfg.Flushd.Listen, m.withProbes(http.NotFoundHandler(), probe.Options{}, alive))
			if err != nil {
				return fmt.Errorf("flushd: %w", err)
			}
			m.FlushdAddr = addr
			log.Info("flushd metrics listening", "addr", addr)
		}
	}
	return nil
}

// openReceiverPool gives the receiver its own MySQL pool
// (mysql.receiver_conns) with its own idmap and message loader over it,
// when other roles share the process (yidu serve): however much work the
// dashboard and flushd give the main pool, the connections a WeCom
// callback needs stay free (docs/reliability.md, Hostile use, item 5).
// Their metrics count into the main ones' series (metric.Shared).
func (m *Main) openReceiverPool() (*idmap.Mapper, *tracker.Registry, error) {
	cfg := m.Config
	db, err := OpenDB(m.dsn)
	if err != nil {
		return nil, nil, err
	}
	m.ReceiverDB = db
	n := cmp.Or(cfg.MySQL.ReceiverConns, config.DefaultReceiverConns)
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	if err := m.Registry.Register(collectors.NewDBStatsCollector(db, "yidu_receiver")); err != nil {
		return nil, nil, fmt.Errorf("mysql: receiver pool metrics: %w", err)
	}
	reg := metric.Shared(m.Registry)
	ids, err := idmap.New(db, idmap.Options{Logger: m.Logger, Registerer: reg})
	if err != nil {
		return nil, nil, err
	}
	// Only loads messages: it sends nothing.
	loader, err := tracker.New(db, ids, m.Store, tracker.Options{
		Logger: m.Logger, Registerer: reg, Apps: DomainApps(cfg.Apps), Links: CardLinks(cfg),
	})
	if err != nil {
		return nil, nil, err
	}
	return ids, loader, nil
}

// WarmReceiver loads every member of the configured apps' corps into the
// receiver's idmap cache (one query per corp), so a storm right after a
// directory sync in this process (the demo's) does not pay one MySQL
// lookup per member inside WeCom's 5 s (each bounded by the recorder's
// 1 s mark timeout). A failure only leaves the cache to fill on demand:
// it is logged, never fatal. No-op without the receiver role. Run warms
// in the background once the receiver listens (warmRetrying) unless
// receiver.warm is false; members it has not met meanwhile are looked up
// on demand, and while MySQL is down they are what the outage path
// publishes by UserID.
func (m *Main) WarmReceiver(ctx context.Context) {
	if m.ReceiverMapper == nil {
		return
	}
	for _, corp := range m.corpIDs() {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // as the start's ping
		n, err := m.ReceiverMapper.Warm(wctx, corp)
		cancel()
		if err != nil {
			m.Logger.Warn("receiver: idmap warm failed; the cache fills on demand", "corp", corp, "err", err)
			continue
		}
		m.Logger.Debug("receiver: idmap warmed", "corp", corp, "members", n)
	}
}

// corpIDs returns the configured apps' corps, each once, in order.
func (m *Main) corpIDs() []string {
	var out []string
	for _, a := range m.Config.Apps {
		if !slices.Contains(out, a.CorpID) {
			out = append(out, a.CorpID)
		}
	}
	return out
}

// warmRetrying is WarmReceiver in the background, each corp retried
// with backoff (waitFor) until MySQL answers or Close.
func (m *Main) warmRetrying(ctx context.Context) {
	if m.ReceiverMapper == nil {
		return
	}
	for _, corp := range m.corpIDs() {
		n := 0
		err := m.waitFor(ctx, "mysql (receiver warm-up)", func(ctx context.Context) (err error) {
			n, err = m.ReceiverMapper.Warm(ctx, corp)
			return err
		})
		if err != nil {
			return // closing
		}
		m.Logger.Debug("receiver: idmap warmed", "corp", corp, "members", n)
	}
}

// WarmDone is closed once the receiver's background warm-up has loaded
// every corp (or Close stopped it); nil without the receiver role.
func (m *Main) WarmDone() <-chan struct{} { return m.warmDone }

// FlushdDone is closed when flushd's Run returns (nil without the flushd
// role); FlushdErr then says why. cmd watches it: flushd stopping on its
// own is a failure.
func (m *Main) FlushdDone() <-chan struct{} { return m.flushDone }

// FlushdErr is what flushd's Run returned, once FlushdDone is closed.
func (m *Main) FlushdErr() error { return m.flushErr }

// readiness is what a role needs to answer: its MySQL pool (db) and Redis
// for the dashboard. The receiver is ready while a read can be made
// durable: Kafka answers, or the spool has room (docs/reliability.md);
// Redis, MySQL and Kafka are only named when down (probe.Options.Degraded),
// since the receiver records reads without each of them.
func (m *Main) readiness(db *sql.DB, receiver bool) probe.Options {
	mysqlUp := func(ctx context.Context) error { return db.PingContext(ctx) }
	redisUp := func(ctx context.Context) error { return m.Redis.Ping(ctx).Err() }
	kafkaUp := func(ctx context.Context) error {
		if m.Producer == nil {
			return errors.New("no producer")
		}
		return m.Producer.Ping(ctx)
	}
	if !receiver {
		return probe.Options{Ready: map[string]probe.Check{"mysql": mysqlUp, "redis": redisUp}}
	}
	// Without Redis button and link reads go to Kafka unmarked, without
	// MySQL by UserID (bitmap.Recorder): neither is a reason to take the
	// receiver out of WeCom's reach.
	o := probe.Options{Degraded: map[string]probe.Check{"mysql": mysqlUp, "redis": redisUp}}
	if m.Spool == nil {
		// Without a spool every read Kafka does not take is a 503.
		o.Ready = map[string]probe.Check{"kafka": kafkaUp}
		return o
	}
	// Kafka down is no reason to stop taking callbacks: the spool holds
	// their deltas. A full spool with Kafka down is.
	o.Degraded["kafka"] = kafkaUp
	o.Ready = map[string]probe.Check{"spool": func(ctx context.Context) error {
		err := m.Spool.Ready(ctx)
		if err == nil {
			return nil
		}
		if kafkaUp(ctx) == nil {
			return nil
		}
		return err
	}}
	return o
}

// withProbes puts /healthz, /readyz and /metrics in front of a role's
// routes; o carries the role's checks.
func (m *Main) withProbes(h http.Handler, o probe.Options, alive func() error) http.Handler {
	o.Alive, o.Gatherer, o.Logger, o.Status = alive, m.Registry, m.Logger, m.ready
	return probe.Wrap(h, o)
}

// Per-role HTTP server settings. All bound slow clients (slow-loris):
// headers within 5 s, at most 16 KiB of them, idle keep-alives closed.
func newServer(read, write, idle time.Duration) *http.Server {
	return &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       read,
		WriteTimeout:      write,
		IdleTimeout:       idle,
		MaxHeaderBytes:    16 << 10,
	}
}

// ReceiverServer returns the receiver's settings: it answers WeCom within
// its 5 s (doc path 90238), the whole request in 10 s, the answer written
// within 15 s.
func ReceiverServer() *http.Server { return newServer(10*time.Second, 15*time.Second, time.Minute) }

// dashboardServer has no WriteTimeout: live streams and exports outlive
// any fixed one, so the dashboard sets a deadline per request
// (dashboard.DefaultWriteTimeout) and the long routes extend theirs. A
// registration body of 8 MiB gets 60 s to arrive.
func dashboardServer() *http.Server { return newServer(time.Minute, 0, 2*time.Minute) }

// opsServer serves flushd's probes and metrics.
func opsServer() *http.Server { return newServer(10*time.Second, 30*time.Second, time.Minute) }

// serveRole serves role's routes behind the probes (ready its readiness
// checks) on listen and logs "<role> listening" with the address, which
// the harnesses read (internal/rig).
func (m *Main) serveRole(role string, srv *http.Server, listen string, routes http.Handler, ready probe.Options) (string, error) {
	if m.verifyName != "" {
		routes = verifyFile(m.verifyName, m.verifyBody, routes)
	}
	addr, err := m.serve(srv, listen, m.withProbes(routes, ready, nil))
	if err != nil {
		return "", fmt.Errorf("%s: %w", role, err)
	}
	m.Logger.Info(role+" listening", "addr", addr)
	return addr, nil
}

func (m *Main) serve(srv *http.Server, addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	srv.Addr, srv.Handler = ln.Addr().String(), h
	m.servers = append(m.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("http server stopped", "addr", addr, "err", err)
		}
	}()
	return ln.Addr().String(), nil
}

// Close stops everything Run started, in dependency order, within about
// the flush drain timeout plus ten seconds.
func (m *Main) Close() error {
	m.closeOnce.Do(func() { m.closeErr = m.close() })
	return m.closeErr
}

func (m *Main) close() error {
	var errs []error
	m.mu.Lock()
	m.closing = true
	flushCancel := m.flushCancel
	m.mu.Unlock()
	if m.bgCancel != nil {
		m.bgCancel()
	}
	// A fresh context: the signal context is already cancelled, and
	// in-flight callbacks must finish (STYLE anti-pattern 1).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.Dashboard != nil {
		// Ends the SSE streams, which Shutdown would otherwise wait for.
		m.Dashboard.Close()
	}
	for _, s := range m.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	if m.Store != nil {
		m.Store.Close()
	}
	if m.Spool != nil {
		if err := m.Spool.Close(); err != nil {
			errs = append(errs, fmt.Errorf("spool: %w", err))
		}
	}
	if m.Producer != nil {
		m.Producer.Close()
	}
	if m.campaignCancel != nil {
		// Sends in flight stop and release their lease: another replica
		// resumes them (campaign.Runner.Run).
		m.campaignCancel()
		<-m.campaignDone
	}
	if flushCancel != nil {
		flushCancel()
	}
	if m.flushDone != nil {
		<-m.flushDone
		if err := m.flushErr; err != nil && flushCancel != nil {
			errs = append(errs, fmt.Errorf("flushd: %w", err))
		}
	}
	if m.Redis != nil {
		m.Redis.Close()
	}
	if m.ReceiverDB != nil {
		m.ReceiverDB.Close()
	}
	if m.DB != nil {
		m.DB.Close()
	}
	return errors.Join(errs...)
}

// roleHolders are every grant the dashboard configuration makes: users',
// tokens' and dashboard.roles[]'s (an entry dashboard.New would refuse
// holds none).
func roleHolders(d config.Dashboard) []access.Holder {
	var out []access.Holder
	add := func(kind access.Kind, name string, corps []string, role, corp string, apps []string, depts []int64) {
		gs, all, err := access.ConfigGrants(corps, yidu.Role(role), corp, apps, depts)
		if err != nil {
			return
		}
		if all {
			out = append(out, access.Holder{Kind: kind, Name: name, AllCorps: true})
		}
		for _, g := range gs {
			out = append(out, access.Holder{Kind: kind, Name: name, Grant: g})
		}
	}
	for _, u := range d.Users {
		add(access.KindUser, u.Name, u.Corps, u.Role, u.Corp, u.Apps, u.Departments)
	}
	for _, t := range d.Tokens {
		add(access.KindToken, t.Name, t.Corps, t.Role, t.Corp, t.Apps, t.Departments)
	}
	for _, r := range accessRoles(d.Roles) {
		out = append(out, access.Holder{Kind: access.KindWeCom, Name: r.UserID, Grant: r.Grant})
	}
	return out
}

// accessRoles are dashboard.roles[] as package access takes them.
func accessRoles(rs []config.RoleGrant) []access.RoleGrant {
	return each(rs, func(r config.RoleGrant) access.RoleGrant {
		return access.RoleGrant{UserID: r.UserID, Grant: access.Grant{Role: yidu.Role(r.Role),
			Scope: yidu.Scope{Corp: r.Corp, Apps: r.Apps, Departments: r.Departments}}}
	})
}

// weComLogin is sign-in with WeCom through dashboard.login_app (issue
// 31); nil when it is off (config.WeComLoginApp).
func weComLogin(cfg config.Config, acc *access.Access, m *Main) *dashboard.WeComLogin {
	app, ok := cfg.WeComLoginApp()
	if !ok {
		return nil
	}
	return &dashboard.WeComLogin{
		CorpID: app.CorpID, AgentID: app.AgentID,
		Endpoints: access.Endpoints{
			OAuthBase: cmp.Or(cfg.WeCom.OAuthBase, access.DefaultEndpoints.OAuthBase),
			LoginBase: cmp.Or(cfg.WeCom.LoginBase, access.DefaultEndpoints.LoginBase),
		},
		Access: acc,
		States: access.NewStates(m.Redis, cfg.Redis.Prefix),
		OAuth:  wecom.NewOAuth(WeComApps([]config.App{app})),
	}
}

// verifyFile serves WeCom's domain verification file (wecom.verify_file,
// 可信域名 → 申请校验域名) at /name, in front of next: WeCom fetches it
// from the root of the trusted domain, which is the receiver's or the
// dashboard's host.
func verifyFile(name string, body []byte, next http.Handler) http.Handler {
	path := "/" + name
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	})
}

func dashboardTokens(ts []config.Token) []dashboard.Token {
	return each(ts, func(t config.Token) dashboard.Token {
		return dashboard.Token{Name: t.Name, Token: t.Token, Corps: t.Corps,
			Role: yidu.Role(t.Role), Corp: t.Corp, Apps: t.Apps, Departments: t.Departments}
	})
}

func dashboardUsers(us []config.User) []dashboard.User {
	return each(us, func(u config.User) dashboard.User {
		return dashboard.User{Name: u.Name, PasswordHash: u.PasswordHash, Corps: u.Corps,
			Role: yidu.Role(u.Role), Corp: u.Corp, Apps: u.Apps, Departments: u.Departments}
	})
}
