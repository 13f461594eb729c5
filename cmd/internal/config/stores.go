package config

import "time"

// Attachments configures where notices' attachments are kept. MySQL
// keeps their rows always, and their bytes unless S3 is set.
type Attachments struct {
	S3 S3 `yaml:"s3"`
}

// S3 is an S3-compatible bucket (Amazon S3, Aliyun OSS, Tencent COS,
// MinIO) for attachments' bytes: uploads go there, and the reading page
// sends recipients to short-lived presigned URLs of it, so the bytes of
// a storm of readers leave from object storage, not from the receivers.
// Off unless endpoint is set. The keys may come from the environment
// (YIDU_ATTACHMENTS_S3_ACCESS_KEY, YIDU_ATTACHMENTS_S3_SECRET_KEY), which
// wins over the file; they are never logged.
type S3 struct {
	// Endpoint is the server's host[:port], no scheme
	// (oss-cn-hangzhou.aliyuncs.com).
	Endpoint string `yaml:"endpoint"`
	Bucket   string `yaml:"bucket"`
	// Region is the bucket's region (default us-east-1).
	Region    string `yaml:"region"`
	AccessKey string `yaml:"access_key"`
	SecretKey string `yaml:"secret_key"`
	// UseSSL speaks https to the endpoint, and makes the links https
	// (default true).
	UseSSL *bool `yaml:"use_ssl"`
	// Prefix starts every key (default "attachments/").
	Prefix string `yaml:"prefix"`
	// Addressing is how the bucket is named in URLs: auto (default),
	// path or virtual (bucket.endpoint: Tencent COS).
	Addressing string `yaml:"addressing"`
	// PresignTTL is how long a link to an attachment lives (default
	// 15m, 1m to 7 days).
	PresignTTL Duration `yaml:"presign_ttl"`
}

// Enabled reports whether attachments go to the bucket.
func (s S3) Enabled() bool { return s.Endpoint != "" }

// SSL is UseSSL with its default.
func (s S3) SSL() bool { return s.UseSSL == nil || *s.UseSSL }

// Ledger configures the evidence log's checkpoints (issue 48,
// docs/evidence.md).
type Ledger struct {
	// SigningKey signs the log's checkpoints: a note signing key
	// (PRIVATE+KEY+name+hash+…; `yidu evidence key generate NAME` makes
	// one, YIDU_LEDGER_SIGNING_KEY overrides). Whoever holds it can sign
	// checkpoints: keep it out of yidu's database and its DBA's reach.
	// Empty (and no SigningKeyFile): checkpoints are kept unsigned and
	// prove nothing a DBA could not rewrite (yidu warns at start).
	SigningKey string `yaml:"signing_key"`
	// SigningKeyFile is a file holding SigningKey (a mounted secret).
	SigningKeyFile string `yaml:"signing_key_file"`
	// TSAURL is an RFC 3161 time-stamping authority (可信时间戳) that
	// stamps each day's checkpoint; empty: none.
	TSAURL string `yaml:"tsa_url"`
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
