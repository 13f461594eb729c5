package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/ledger"
	"github.com/yidu-io/yidu/page"
	"net/http"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/silenceper/wechat/v2/util"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/callback"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// PointWeCom sets up silenceper/wechat/v2's process-wide HTTP settings:
// a timeout (it has none by default, and a hung WeCom call must not hang a
// directory sync or a send forever) and, when wecom.api_base is not WeCom's
// own host, a URI rewrite to it (a fake WeCom in the demo and tests).
// Process-wide, which is why only cmd calls it.
func PointWeCom(c config.WeCom) {
	util.DefaultHTTPClient = wecomClient()
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

// wecomIdleConns is how many idle connections to WeCom's API the
// process keeps: as many as the sign-ins a storm exchanges at once.
const wecomIdleConns = 64

// wecomClient is the HTTP client of every WeCom call: 30 s at most, and
// its connections kept for the next call. Go's default keeps 2 idle
// connections a host, so 64 readers signing in at once dialled (and, on
// WeCom's HTTPS, shook hands) for nearly every code exchanged (issue 50).
func wecomClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = wecomIdleConns
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// OpenDB opens the MySQL pool for dsn with the settings yidu relies on:
// parseTime, UTC, no multi-statements, and parameters interpolated by
// the driver (interpolate); config.DefaultMySQLConns connections
// (SetMaxOpenConns changes it).
func OpenDB(dsn string) (*sql.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: parse dsn: %w", err)
	}
	c.ParseTime = true
	c.Loc = time.UTC
	c.MultiStatements = false
	interpolate(dsn, c)
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
	// Members who leave lose their reading page sessions (issue 50).
	m.PageSessions = page.NewSessions(m.Redis, cfg.Redis.Prefix, cfg.Receiver.SessionTTL.D())
	if m.Mapper, err = idmap.New(db, idmap.Options{Logger: log, Registerer: m.Registry, Revoker: m.PageSessions}); err != nil {
		return err
	}
	lopts, err := LedgerOptions(cfg.Ledger, log)
	if err != nil {
		return err
	}
	lopts.Audit = audit.NewMySQL(db)
	if m.Ledger, err = ledger.New(db, lopts); err != nil {
		return err
	}
	sender := m.Sender
	if sender == nil {
		sender = wecom.NewSender(WeComApps(cfg.Apps), wecom.SenderOptions{})
	}
	m.wecomSender = sender
	m.Tracker, err = tracker.New(db, m.Mapper, m.Store, tracker.Options{
		Logger:        log,
		Registerer:    m.Registry,
		Sender:        sender,
		OrphanApplier: orphanApplier{db, m.Ledger},
		Ledger:        m.Ledger,
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
		Timezone: a.Timezone, FollowUp: a.FollowUp, Approval: a.Approval.Rule(), NoReceipts: !a.ReceiptsOn()}
}

// WeComApps returns what the WeCom API clients need of the apps: their
// secrets, which reach no other package.
func WeComApps(apps []config.App) []wecom.App {
	return each(apps, func(a config.App) wecom.App { return wecom.App{CorpID: a.CorpID, AgentID: a.AgentID, Secret: a.Secret} })
}

// each maps f over in.
func each[S, T any](in []S, f func(S) T) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}

// interpolate turns on go-sql-driver's interpolateParams for the DSN
// parsed into c, unless dsn says interpolateParams itself or names a
// charset other than utf8mb4/utf8 (the driver's escaping is safe only
// there). A statement with arguments is then one round trip, not three
// (prepare, execute, close): a third of mysqld's CPU per sign-in and per
// flushd batch (issue 50, docs/benchmarks.md). The driver falls back to a
// prepared statement for a statement too large to send interpolated.
func interpolate(dsn string, c *mysql.Config) {
	if strings.Contains(dsn, "interpolateParams=") {
		return
	}
	if cs, ok := dsnParam(dsn, "charset"); ok {
		for _, name := range strings.Split(cs, ",") {
			if name != "utf8mb4" && name != "utf8" && name != "utf8mb3" {
				return
			}
		}
	}
	c.InterpolateParams = true
	if _, err := mysql.ParseDSN(c.FormatDSN()); err != nil {
		// A collation the driver will not interpolate for.
		c.InterpolateParams = false
	}
}

// dsnParam is the value of the DSN's query parameter name.
func dsnParam(dsn, name string) (string, bool) {
	_, query, ok := strings.Cut(dsn, "?")
	if !ok {
		return "", false
	}
	for _, kv := range strings.Split(query, "&") {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}
