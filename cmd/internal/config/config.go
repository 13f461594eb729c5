// Package config is yidu's configuration: one YAML file (docs/configuration.md)
// with environment overrides for secrets and addresses. It reads no
// environment itself: cmd passes os.Getenv in.
//
// It parses, and checks what crosses libraries (an app a role names
// exists, the dashboard's queries leave half the MySQL pool, secrets come
// from where they must) and the domain's rules (package yidu). It imports
// none of the libraries it configures: each owns its defaults and its
// checks (their Options, zero meaning the default), and
// cmd/internal/process maps a Config onto them and runs those checks
// (process.Check) before anything starts.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu"
)

// Config is the whole configuration file.
type Config struct {
	Receiver  Receiver  `yaml:"receiver"`
	Dashboard Dashboard `yaml:"dashboard"`
	Redis     Redis     `yaml:"redis"`
	MySQL     MySQL     `yaml:"mysql"`
	Kafka     Kafka     `yaml:"kafka"`
	Flushd    Flushd    `yaml:"flushd"`
	WeCom     WeCom     `yaml:"wecom"`
	Apps      []App     `yaml:"apps"`
	Audit     Audit     `yaml:"audit"`
	// DataDir is where yidu keeps state on local disk (YIDU_DATA_DIR): the
	// receiver's spool, in <data_dir>/spool unless receiver.spool_dir
	// says otherwise. Default: $XDG_STATE_HOME/yidu, else
	// ~/.local/state/yidu (DefaultDataDir). Absolute; created 0700.
	DataDir string `yaml:"data_dir"`
}

// SpoolOff as receiver.spool_dir turns the spool off: a read Kafka does
// not acknowledge is then answered 503 (the receiver warns at start).
const SpoolOff = "off"

// DefaultDataDir returns data_dir's default through getenv: the XDG
// state directory, $XDG_STATE_HOME/yidu, else $HOME/.local/state/yidu.
// Not the working directory: a service manager or a shell may start the
// next receiver elsewhere, and the reads spooled by this one would stay
// behind.
func DefaultDataDir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_STATE_HOME"); filepath.IsAbs(x) {
		return filepath.Join(x, "yidu"), nil
	}
	if h := getenv("HOME"); filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "yidu"), nil
	}
	return "", errors.New("config: data_dir: no XDG_STATE_HOME or HOME to default it from; set data_dir or YIDU_DATA_DIR")
}

// Audit configures the audit trail (table audit_events, issue 31).
type Audit struct {
	// Retention is how long audit events are kept: `yidu archive purge`
	// deletes older ones. 0 keeps every event.
	Retention Duration `yaml:"retention"`
}

// DefaultAuditRetention keeps audit events 180 days: China's
// Cybersecurity Law (art. 21) asks network logs be kept at least six
// months.
const DefaultAuditRetention = 180 * 24 * time.Hour

// WeCom configures the WeCom server API yidu calls (sending, directory).
type WeCom struct {
	// APIBase is the API origin; tests and the demo point it at a fake.
	APIBase string `yaml:"api_base"`
	// OAuthBase is the origin of WeCom's OAuth2 web authorization
	// (/connect/oauth2/authorize, doc path 91022), and LoginBase that of
	// its web login (/wwlogin/sso/login, doc path 98152): sign-in with
	// WeCom (issue 31). WeCom's own by default; a fake, a proxy or a
	// test may stand in.
	OAuthBase string `yaml:"oauth_base"`
	LoginBase string `yaml:"login_base"`
	// VerifyFile is the domain verification file WeCom hands out for the
	// app's trusted domain (可信域名 → 申请校验域名: WW_verify_….txt).
	// The receiver and the dashboard serve it at their root, so nothing
	// need be put behind the ingress by hand. Empty: none served.
	VerifyFile string `yaml:"verify_file"`
}

// DefaultWeComAPI is WeCom's server API origin.
const DefaultWeComAPI = "https://qyapi.weixin.qq.com"

// Receiver configures the WeCom callback receiver.
type Receiver struct {
	Listen string `yaml:"listen"`
	// TimestampWindow bounds |now - timestamp| of a callback's query.
	TimestampWindow Duration `yaml:"timestamp_window"`
	// MaxBody is the largest callback body accepted, in bytes.
	MaxBody int64 `yaml:"max_body"`
	// Timeout bounds the work for one callback, well inside WeCom's 5 s.
	Timeout Duration `yaml:"timeout"`
	// MemberRate and MemberBurst are the per-member token bucket: reads
	// beyond it are answered 200 but not processed.
	MemberRate  float64 `yaml:"member_rate"`
	MemberBurst int     `yaml:"member_burst"`
	// PublicURL is the receiver's origin as members' browsers reach it
	// (https://yidu.example.com, optionally with a path prefix): tracked
	// links and their OAuth2 redirect_uri are built on it. Configured, never
	// taken from Host or X-Forwarded-* headers, which a client controls.
	// Empty disables tracked links.
	PublicURL string `yaml:"public_url"`
	// TrustedProxies are the proxies (addresses or CIDRs, e.g. the
	// ingress) whose X-Forwarded-For names a tracked link visitor's
	// address for the exchange rate limits; empty: the peer is the visitor.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// SpoolDir, when set, is a directory on the receiver's own volume
	// where a delta Kafka did not acknowledge is written (fsync'd) before
	// the 200, and forwarded once Kafka is back (docs/reliability.md).
	// Load defaults it to <data_dir>/spool; "off" (SpoolOff): no spool, a
	// read Kafka does not acknowledge is answered 503. Empty in a Config
	// not built by Load: no spool either.
	SpoolDir string `yaml:"spool_dir"`
	// SpoolMaxBytes bounds the spool; beyond it such a read is answered
	// 503 again.
	SpoolMaxBytes int64 `yaml:"spool_max_bytes"`
	// Warm loads every member of the configured apps' corps into the
	// receiver's UserID cache before it listens (one query per corp,
	// bounded by 10 s): a receiver restarted just before a 9:00 notice
	// would otherwise ask MySQL once per member during the storm. false:
	// the cache fills on demand (docs/benchmarks.md, issue 16).
	Warm bool `yaml:"warm"`
	// SignInRate bounds the WeCom sign-ins the reading page starts a
	// second on one receiver (burst twice that): each writes a state to
	// Redis, so a flood of unsigned visits cannot fill it. Beyond it a
	// visit is answered 503 and retried by the reader.
	SignInRate float64 `yaml:"signin_rate"`
	// AttachmentCacheBytes bounds the reading page's cache of attachments
	// on disk (<data_dir>/attachments); past it the least recently opened
	// are removed and read again from MySQL when asked for.
	AttachmentCacheBytes int64 `yaml:"attachment_cache_bytes"`
}

// Reading page defaults (issue 39).
const (
	// DefaultSignInRate is receiver.signin_rate's default, the tracked
	// links' code-exchange budget.
	DefaultSignInRate = 100
	// DefaultAttachmentCacheBytes is receiver.attachment_cache_bytes'
	// default: 1 GiB, some fifty attachments of the largest size.
	DefaultAttachmentCacheBytes = 1 << 30
	// MinAttachmentCacheBytes holds the largest attachment (20 MiB).
	MinAttachmentCacheBytes = 20 << 20
)

// Dashboard configures the dashboard and the /api/v1 API.
type Dashboard struct {
	Listen string `yaml:"listen"`
	// Tokens are the API bearer tokens.
	Tokens []Token `yaml:"tokens"`
	// Users may sign in to the page.
	Users []User `yaml:"users"`
	// UsersFile is a YAML file holding more users (a list of the same
	// shape as Users): a Kubernetes Secret mounted as a file, so password
	// hashes stay out of the ConfigMap.
	UsersFile  string   `yaml:"users_file"`
	SessionTTL Duration `yaml:"session_ttl"`
	// TrustedProxies are the networks (CIDR) of the reverse proxies in
	// front of the dashboard, an ingress controller's pods: only their
	// X-Forwarded-For and X-Forwarded-Proto are believed (sign-in rate
	// limits per client address, the Secure cookie behind TLS
	// termination).
	TrustedProxies []string `yaml:"trusted_proxies"`
	// PublicURL is the dashboard as browsers reach it: https makes the
	// session cookie Secure even when TLS ends at an ingress.
	PublicURL string `yaml:"public_url"`
	// RemindInterval is the least time between two reminders of a message.
	RemindInterval Duration `yaml:"remind_interval"`
	// MinReminderDelay is the least time between a send and a follow-up
	// round, and between two rounds (yidu.Policy.Validate).
	MinReminderDelay Duration `yaml:"min_reminder_delay"`
	// MaxStreams bounds the live /events streams of the dashboard (503
	// beyond); MaxStreamsPerPrincipal those of one token or one person
	// (429 beyond). StreamWriteTimeout drops a stream whose event does not
	// reach its client in time (a reader that stopped reading).
	MaxStreams             int      `yaml:"max_streams"`
	MaxStreamsPerPrincipal int      `yaml:"max_streams_per_principal"`
	StreamWriteTimeout     Duration `yaml:"stream_write_timeout"`
	// MaxQueries bounds the heavy queries (recipients, departments,
	// export) running at once, so that flushd keeps MySQL connections of
	// the pool it shares with the dashboard; MaxQueriesPerPrincipal those
	// of one token or person (429 beyond).
	MaxQueries             int `yaml:"max_queries"`
	MaxQueriesPerPrincipal int `yaml:"max_queries_per_principal"`
	// ConfirmOver: above this many recipients the page asks the person
	// to type the count before sending (default 1000).
	ConfirmOver int `yaml:"confirm_over"`
	// MaxLateness: a scheduled notice whose time passed by more than this
	// while yidu was down is held for a person to send or cancel (default
	// 2h); a later one is sent on start and marked late.
	MaxLateness Duration `yaml:"max_lateness"`

	// LoginApp names the app (apps[].name) people sign in to the
	// dashboard through with WeCom (issue 31): its corp's members, as
	// the synced directory has them. Empty: the first app with a secret,
	// when public_url is set; "off": password sign-in only.
	LoginApp string `yaml:"login_app"`
	// Roles grant roles to WeCom members; RolesFile is a YAML file
	// holding more (a list of the same shape), as users_file is.
	Roles     []RoleGrant `yaml:"roles"`
	RolesFile string      `yaml:"roles_file"`
	// LeadersSee makes each department leader, as the synced directory
	// names them (department_leader), a viewer of the subtrees they lead
	// for every notice of their corp, and lets them remind their own
	// unread people. Default true; false: only roles count.
	LeadersSee *bool `yaml:"leaders_see"`
}

// LoginOff as dashboard.login_app turns sign-in with WeCom off.
const LoginOff = "off"

// RoleGrant is one role of a WeCom member (dashboard.roles[]): admin of
// corp, sender of apps (apps[].name) in corp, or viewer of departments'
// subtrees in corp.
type RoleGrant struct {
	UserID      string   `yaml:"userid"`
	Role        string   `yaml:"role"`
	Corp        string   `yaml:"corp"`
	Apps        []string `yaml:"apps"`
	Departments []int64  `yaml:"departments"`
	// Audience keeps a sender to part of the directory (issue 41):
	// {departments: [4], tags: [7]} allows those departments' subtrees
	// and those tags, never 全员.
	Audience SenderAudience `yaml:"audience"`
}

// SenderAudience is dashboard.roles[].audience.
type SenderAudience struct {
	Departments []int64 `yaml:"departments"`
	Tags        []int64 `yaml:"tags"`
}

// SeeLeaders is LeadersSee with its default.
func (d Dashboard) SeeLeaders() bool { return d.LeadersSee == nil || *d.LeadersSee }

// WeComLoginApp returns the app people sign in through with WeCom, and
// false when sign-in with WeCom is off: login_app "off", no public_url
// (the redirect must be the configured one), or no app with a secret.
func (c Config) WeComLoginApp() (App, bool) {
	if c.Dashboard.LoginApp == LoginOff || c.Dashboard.PublicURL == "" {
		return App{}, false
	}
	for _, a := range c.Apps {
		if (c.Dashboard.LoginApp == "" || a.Name == c.Dashboard.LoginApp) && a.Secret != "" {
			return a, true
		}
	}
	return App{}, false
}

// Token is an API bearer token and the corps it may see ("*" for all).
type Token struct {
	Name  string   `yaml:"name"`
	Token string   `yaml:"token"`
	Corps []string `yaml:"corps"`

	// Role, Corp, Apps and Departments grant one role instead of Corps
	// (issue 31): {role: viewer, corp: ww…, departments: [4]}. Corps
	// alone stays an admin of those corps.
	Role        string   `yaml:"role"`
	Corp        string   `yaml:"corp"`
	Apps        []string `yaml:"apps"`
	Departments []int64  `yaml:"departments"`
	// Audience keeps a sender to part of the directory (issue 41).
	Audience SenderAudience `yaml:"audience"`
}

// User is a person who may sign in to the dashboard.
type User struct {
	Name string `yaml:"name"`
	// PasswordHash is a bcrypt hash (yidu hash-password prints one).
	PasswordHash string   `yaml:"password_hash"`
	Corps        []string `yaml:"corps"`

	// Role, Corp, Apps and Departments grant one role instead of Corps
	// (issue 31): {role: viewer, corp: ww…, departments: [4]}. Corps
	// alone stays an admin of those corps.
	Role        string   `yaml:"role"`
	Corp        string   `yaml:"corp"`
	Apps        []string `yaml:"apps"`
	Departments []int64  `yaml:"departments"`
	// Audience keeps a sender to part of the directory (issue 41).
	Audience SenderAudience `yaml:"audience"`

	// from says where the user came from in errors (default
	// dashboard.users[i]).
	from string
}

// Redis configures the bitmap store (and the dashboard's sessions): one
// node, a Cluster (Addr lists several seeds) or a Sentinel-managed primary
// (Sentinel set; Addr is then ignored).
type Redis struct {
	Addr string `yaml:"addr"`
	// Username is the Redis 6+ ACL user (empty: "default").
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	DB       int    `yaml:"db"`
	// TLS connects over TLS (managed Redis services require it).
	TLS TLS `yaml:"tls"`
	// Sentinel finds the primary through Redis Sentinel.
	Sentinel Sentinel `yaml:"sentinel"`
	// Prefix starts every key yidu writes.
	Prefix string `yaml:"prefix"`
	// TTL keeps a message's keys this long after its last activity.
	TTL Duration `yaml:"ttl"`
}

// Sentinel names a Sentinel-managed primary and the sentinels that know it.
type Sentinel struct {
	// Master is the primary's name in the sentinels' configuration.
	Master string   `yaml:"master"`
	Addrs  []string `yaml:"addrs"`
	// Username and Password authenticate to the sentinels themselves
	// when they require it (the password only from
	// YIDU_REDIS_SENTINEL_PASSWORD); the data nodes take redis.username
	// and redis.password.
	Username string `yaml:"username"`
	Password string `yaml:"-"`
}

// TLS configures a TLS client connection. The server's certificate is
// verified (against CAFile, or the system roots) unless
// InsecureSkipVerify is set explicitly.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the server's
	// certificate (empty: the system roots).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that authenticate clients by certificate (mutual TLS).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the server's certificate must carry (empty:
	// the host of the address dialled).
	ServerName string `yaml:"server_name"`
	// InsecureSkipVerify turns certificate verification off: encrypted,
	// but anyone on the path can impersonate the server. Tests only.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// MySQL configures the archive.
type MySQL struct {
	DSN string `yaml:"dsn"`
	// TLS is registered with the driver under the name "yidu": the DSN
	// selects it with tls=yidu (added when the DSN names no TLS mode).
	// tls=true (system roots) or tls=skip-verify in the DSN need none.
	TLS TLS `yaml:"tls"`
	// Dialect is the server family, which picks the form of flushd's
	// batch UPDATE (flushd.StatementFor): "auto" (the default) asks the
	// server's VERSION() at start, "mariadb", "mysql" or "tidb" say it.
	Dialect string `yaml:"dialect"`
	// MaxOpenConns is the size of the process's MySQL pool: the
	// dashboard's and flushd's (dashboard.max_queries must leave room),
	// and the receiver's when it runs alone.
	MaxOpenConns int `yaml:"max_open_conns"`
	// ReceiverConns is the receiver's own pool when it runs beside other
	// roles (yidu serve), so that no dashboard work can take the
	// connections a WeCom callback needs.
	ReceiverConns int `yaml:"receiver_conns"`
}

// DialectAuto is MySQL.Dialect when the server's VERSION() decides.
const DialectAuto = "auto"

// Kafka configures the deltas topic.
type Kafka struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	Group   string   `yaml:"group"`
	// Partitions, ReplicationFactor and MinInsyncReplicas are what
	// `yidu kafka topic` creates the topic with and what it and `yidu
	// doctor` check an existing one against (0: delta's defaults, 12, 3
	// and 2). A managed Kafka auto-creates no topic.
	Partitions        int32 `yaml:"partitions"`
	ReplicationFactor int16 `yaml:"replication_factor"`
	MinInsyncReplicas int   `yaml:"min_insync_replicas"`
	// SessionTimeout is how long flushd's consumer group waits for a
	// member that went silent (killed, host lost) before giving its
	// partitions to the others; the broker bounds it
	// (group.min.session.timeout.ms, 6 s by default).
	SessionTimeout Duration `yaml:"session_timeout"`
	// TLS connects to the brokers over TLS.
	TLS TLS `yaml:"tls"`
	// SASL authenticates to the brokers; the password comes only from
	// YIDU_KAFKA_SASL_PASSWORD.
	SASL SASL `yaml:"sasl"`
}

// SASL is a Kafka SASL login.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL).
	Mechanism string `yaml:"mechanism"`
	Username  string `yaml:"username"`
	// Password is never read from the file: YIDU_KAFKA_SASL_PASSWORD.
	Password string `yaml:"-"`
}

// SASL mechanisms yidu speaks to Kafka.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Flushd configures the Kafka → MySQL micro-batcher.
type Flushd struct {
	// Listen serves /healthz and /metrics when flushd runs alone
	// (yidu flushd); empty serves nothing.
	Listen string `yaml:"listen"`
	// Interval flushes a message's pending reads at least this often.
	Interval Duration `yaml:"interval"`
	// BatchSize is the most uids in one UPDATE … IN (…) statement.
	BatchSize int `yaml:"batch_size"`
	// MaxPending stops fetching while this many reads await a flush.
	MaxPending int `yaml:"max_pending"`
	// DrainTimeout bounds the final flush on shutdown.
	DrainTimeout Duration `yaml:"drain_timeout"`
	// InstanceID makes this flushd a static consumer group member: a
	// restart with the same ID takes its partitions back at once. Each
	// running flushd needs its own (a StatefulSet pod name); empty keeps
	// dynamic membership.
	InstanceID string `yaml:"instance_id"`
}

// App is one WeCom application whose callbacks yidu receives.
type App struct {
	Name           string `yaml:"name"`
	CorpID         string `yaml:"corp_id"`
	AgentID        int64  `yaml:"agent_id"`
	Token          string `yaml:"token"`
	EncodingAESKey string `yaml:"encoding_aes_key"`
	Secret         string `yaml:"secret"`
	// ContactsSecret is the corp's contacts-sync secret (通讯录同步
	// Secret), for `yidu directory sync` only: with it the sync lists the
	// whole corp (user/list_id, doc path 96067) instead of the app's
	// visible range. Empty: the app's secret alone.
	ContactsSecret string `yaml:"contacts_secret"`
	// ReadButtonKey is the template card button key that means "read";
	// empty accepts any button of a tracked card.
	ReadButtonKey string `yaml:"read_button_key"`
	// ReadReply is what the read button says to the member once their
	// press is recorded (a passive reply, doc path 90241; default
	// DefaultReadReply).
	ReadReply string `yaml:"read_reply"`
	// ReadSignals are the signals that make the app's messages read:
	// button, link, enter_agent (yidu.ParseReadSignals); left out: button
	// and link. Every signal is recorded either way.
	ReadSignals []string `yaml:"read_signals,omitempty"`
	// Retention is how long the app's notices keep personal data after
	// they were sent ("3y", "18m", "90d"; yidu.ParseRetention) when a
	// notice names none; `yidu archive purge` anonymises them after it
	// (issue 40). Empty: kept until a purge by date.
	Retention string `yaml:"retention,omitempty"`
	// EscalationFallback are the UserIDs that get the follow-up digest of
	// the people no department leader sits above (issue 30).
	EscalationFallback []string `yaml:"escalation_fallback,omitempty"`
	// FollowUp is the follow-up policy a notice of the app gets when it
	// names none (the compose page's default); nil: none.
	FollowUp *yidu.Policy `yaml:"follow_up,omitempty"`
	// Approval makes a notice to more than over people, to 全员 or
	// (acknowledged) asking for an acknowledgement wait for another
	// person's approval (issue 41): {over: 1000, approvers: [userid…],
	// role: admin|sender, acknowledged: true}. nil: none.
	Approval *Approval `yaml:"approval,omitempty"`
	// DailyQuota is how many recipient-sends the app may make a day in
	// its zone (WeCom: seats × 200 per app, doc path 90454). Follow-up
	// rounds larger than what is left are spread over the next working
	// days. 0: the synced directory's active members × 200.
	DailyQuota int `yaml:"daily_quota,omitempty"`
	// Timezone is the app's IANA time zone, in which scheduled notices
	// are entered and shown (default Asia/Shanghai).
	Timezone string `yaml:"timezone"`
}

// Signals returns the app's read signals; nil (the defaults) for a list
// Validate refuses.
func (a App) Signals() []yidu.Signal {
	s, err := yidu.ParseReadSignals(a.ReadSignals)
	if err != nil {
		return nil
	}
	return s
}

// DefaultReadReply is apps[].read_reply when left out.
const DefaultReadReply = "已读 ✓"

// maxReadReply bounds apps[].read_reply: it replaces the card's button
// text, so it is yidu.MaxButtonText's rule (button_list, doc path 90236).
const maxReadReply = yidu.MaxButtonText

// Duration is a time.Duration written as "10m", "1s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("duration %q: %w", n.Value, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DefaultMySQLConns is the MySQL pool of one process; DefaultReceiverConns
// the receiver's own beside it in yidu serve.
const (
	DefaultMySQLConns    = 64
	DefaultReceiverConns = 32
)

// Default returns the configuration used for anything the file leaves out.
func Default() Config {
	return Config{
		Audit: Audit{Retention: Duration(DefaultAuditRetention)},
		Receiver: Receiver{
			Listen:        "127.0.0.1:8080",
			MemberRate:    20,
			MemberBurst:   100,
			SpoolMaxBytes: 1 << 30,
			Warm:          true,

			SignInRate:           DefaultSignInRate,
			AttachmentCacheBytes: DefaultAttachmentCacheBytes,
		},
		Dashboard: Dashboard{
			Listen:           "127.0.0.1:8081",
			MinReminderDelay: Duration(yidu.DefaultMinReminderDelay),
		},
		Redis: Redis{Addr: "127.0.0.1:6379", Prefix: "yidu", TTL: Duration(30 * 24 * time.Hour)},
		MySQL: MySQL{DSN: "root@tcp(127.0.0.1:3306)/yidu", Dialect: DialectAuto, MaxOpenConns: DefaultMySQLConns, ReceiverConns: DefaultReceiverConns},
		WeCom: WeCom{APIBase: DefaultWeComAPI},
		Kafka: Kafka{
			Brokers: []string{"127.0.0.1:9092"},
			Topic:   "yidu.reads",
			Group:   "yidu-flushd",
		},
		Flushd: Flushd{Listen: "127.0.0.1:8082"},
	}
}

// Load reads the file at path (empty: defaults only), applies environment
// overrides through getenv and validates the result.
func Load(path string, getenv func(string) string) (Config, error) {
	cfg := Default()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return cfg, fmt.Errorf("config: %w", err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if getenv != nil {
		applyEnv(&cfg, getenv)
		if v := getenv("YIDU_DASHBOARD_USERS"); v != "" {
			us, err := parseUsers("YIDU_DASHBOARD_USERS", []byte(v))
			if err != nil {
				return cfg, err
			}
			cfg.Dashboard.Users = append(cfg.Dashboard.Users, us...)
		}
	}
	if f := cfg.Dashboard.RolesFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cfg, fmt.Errorf("config: dashboard.roles_file: %w", err)
		}
		var rs []RoleGrant
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(&rs); err != nil && !errors.Is(err, io.EOF) {
			return cfg, fmt.Errorf("config: dashboard.roles_file %s: a list of {userid, role, corp, apps, departments}: %w", f, err)
		}
		cfg.Dashboard.Roles = append(cfg.Dashboard.Roles, rs...)
	}
	if f := cfg.Dashboard.UsersFile; f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return cfg, fmt.Errorf("config: dashboard.users_file: %w", err)
		}
		us, err := parseUsers("dashboard.users_file "+f, b)
		if err != nil {
			return cfg, err
		}
		cfg.Dashboard.Users = append(cfg.Dashboard.Users, us...)
	}

	if cfg.Receiver.SpoolDir == "" {
		// Spool on by default (docs/reliability.md, Kafka down): a Kafka
		// election longer than WeCom's three tries loses no read.
		if cfg.DataDir == "" {
			env := getenv
			if env == nil {
				env = os.Getenv
			}
			// No home to default from (a bare environment): the receiver
			// then runs without a spool and says so at start.
			cfg.DataDir, _ = DefaultDataDir(env)
		}
		if cfg.DataDir != "" {
			if err := checkSpoolDir(cfg.DataDir); err != nil {
				return cfg, fmt.Errorf("config: data_dir (or YIDU_DATA_DIR) %q: %w", cfg.DataDir, err)
			}
			cfg.Receiver.SpoolDir = filepath.Join(cfg.DataDir, "spool")
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// parseUsers reads a YAML (or JSON) list of dashboard users, strictly.
func parseUsers(where string, b []byte) ([]User, error) {
	var us []User
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&us); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s: a list of {name, password_hash, corps}: %w", where, err)
	}
	for i := range us {
		us[i].from = fmt.Sprintf("%s[%d]", where, i)
	}
	return us, nil
}

// EnvName returns the environment variable that overrides field of app,
// e.g. EnvName("hr", "token") = "YIDU_APP_HR_TOKEN".
func EnvName(app, field string) string {
	up := strings.ToUpper(nonAlnum.ReplaceAllString(app, "_"))
	return "YIDU_APP_" + up + "_" + strings.ToUpper(field)
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]`)

func applyEnv(cfg *Config, getenv func(string) string) {
	set := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	set(&cfg.Receiver.Listen, "YIDU_RECEIVER_LISTEN")
	set(&cfg.Receiver.PublicURL, "YIDU_RECEIVER_PUBLIC_URL")
	set(&cfg.Dashboard.PublicURL, "YIDU_DASHBOARD_PUBLIC_URL")
	set(&cfg.Receiver.SpoolDir, "YIDU_RECEIVER_SPOOL_DIR")
	set(&cfg.DataDir, "YIDU_DATA_DIR")
	set(&cfg.Dashboard.Listen, "YIDU_DASHBOARD_LISTEN")
	set(&cfg.Flushd.Listen, "YIDU_FLUSHD_LISTEN")
	set(&cfg.Flushd.InstanceID, "YIDU_FLUSHD_INSTANCE_ID")
	set(&cfg.Redis.Addr, "YIDU_REDIS_ADDR")
	set(&cfg.Redis.Username, "YIDU_REDIS_USERNAME")
	set(&cfg.Redis.Password, "YIDU_REDIS_PASSWORD")
	set(&cfg.Redis.Sentinel.Password, "YIDU_REDIS_SENTINEL_PASSWORD")
	set(&cfg.Redis.Prefix, "YIDU_REDIS_PREFIX")
	set(&cfg.MySQL.DSN, "YIDU_MYSQL_DSN")
	set(&cfg.MySQL.Dialect, "YIDU_MYSQL_DIALECT")
	set(&cfg.Kafka.Topic, "YIDU_KAFKA_TOPIC")
	set(&cfg.Kafka.Group, "YIDU_KAFKA_GROUP")
	if v, err := strconv.Atoi(getenv("YIDU_KAFKA_PARTITIONS")); err == nil && v > 0 && v < 1<<31-1 {
		cfg.Kafka.Partitions = int32(v)
	}
	if v, err := strconv.Atoi(getenv("YIDU_KAFKA_REPLICATION_FACTOR")); err == nil && v > 0 && v < 1<<15 {
		cfg.Kafka.ReplicationFactor = int16(v)
	}
	if v, err := strconv.Atoi(getenv("YIDU_KAFKA_MIN_INSYNC_REPLICAS")); err == nil && v > 0 {
		cfg.Kafka.MinInsyncReplicas = v
	}
	set(&cfg.Kafka.SASL.Username, "YIDU_KAFKA_SASL_USERNAME")
	set(&cfg.Kafka.SASL.Password, "YIDU_KAFKA_SASL_PASSWORD")
	set(&cfg.Dashboard.UsersFile, "YIDU_DASHBOARD_USERS_FILE")
	set(&cfg.WeCom.APIBase, "YIDU_WECOM_API_BASE")
	set(&cfg.WeCom.OAuthBase, "YIDU_WECOM_OAUTH_BASE")
	set(&cfg.WeCom.LoginBase, "YIDU_WECOM_LOGIN_BASE")
	if v := getenv("YIDU_KAFKA_BROKERS"); v != "" {
		cfg.Kafka.Brokers = strings.Split(v, ",")
	}
	if v := getenv("YIDU_API_TOKEN"); v != "" {
		cfg.Dashboard.Tokens = append(cfg.Dashboard.Tokens, Token{Name: "env", Token: v, Corps: []string{"*"}})
	}
	for i := range cfg.Apps {
		a := &cfg.Apps[i]
		set(&a.Token, EnvName(a.Name, "token"))
		set(&a.EncodingAESKey, EnvName(a.Name, "encoding_aes_key"))
		set(&a.Secret, EnvName(a.Name, "secret"))
		set(&a.ContactsSecret, EnvName(a.Name, "contacts_secret"))
	}
}

// Proxies parses TrustedProxies.
func (d Dashboard) Proxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, p := range d.TrustedProxies {
		pp, err := netip.ParsePrefix(p)
		if err != nil {
			if a, aerr := netip.ParseAddr(p); aerr == nil {
				pp, err = a.Prefix(a.BitLen())
			}
		}
		if err != nil {
			return nil, fmt.Errorf("config: dashboard.trusted_proxies[%d] %q: want a CIDR (10.0.0.0/8) or an address", i, p)
		}
		out = append(out, pp.Masked())
	}
	return out, nil
}

// App returns the app named name.
func (c Config) App(name string) (App, bool) {
	for _, a := range c.Apps {
		if a.Name == name {
			return a, true
		}
	}
	return App{}, false
}

// ReminderDelay is dashboard.min_reminder_delay, 0 being its default.
func (d Dashboard) ReminderDelay() time.Duration {
	if d.MinReminderDelay == 0 {
		return yidu.DefaultMinReminderDelay
	}
	return time.Duration(d.MinReminderDelay)
}

// Approval is apps[].approval (yidu.Approval).
type Approval struct {
	Over         int      `yaml:"over"`
	Approvers    []string `yaml:"approvers"`
	Role         string   `yaml:"role"`
	Acknowledged bool     `yaml:"acknowledged"`
}

// Rule is a as yidu takes it; nil for nil.
func (a *Approval) Rule() *yidu.Approval {
	if a == nil {
		return nil
	}
	return &yidu.Approval{Over: a.Over, Approvers: a.Approvers, Role: yidu.Role(a.Role), Acknowledged: a.Acknowledged}
}
