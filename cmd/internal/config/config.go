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
	// Attachments says where attachments' bytes are kept (MySQL unless
	// attachments.s3 is set).
	Attachments Attachments `yaml:"attachments"`
	Ledger      Ledger      `yaml:"ledger"`
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
			SignInClientRate:     DefaultSignInClientRate,
			SignInFailureRate:    DefaultSignInFailureRate,
			SessionTTL:           Duration(DefaultSessionTTL),
			AttachmentCacheBytes: DefaultAttachmentCacheBytes,
			GOGC:                 DefaultGOGC,
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
	cfg.TypeApprovers()
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
	set(&cfg.Ledger.SigningKey, "YIDU_LEDGER_SIGNING_KEY")
	set(&cfg.Ledger.SigningKeyFile, "YIDU_LEDGER_SIGNING_KEY_FILE")
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
	set(&cfg.Attachments.S3.AccessKey, "YIDU_ATTACHMENTS_S3_ACCESS_KEY")
	set(&cfg.Attachments.S3.SecretKey, "YIDU_ATTACHMENTS_S3_SECRET_KEY")
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

// App returns the app named name.
func (c Config) App(name string) (App, bool) {
	for _, a := range c.Apps {
		if a.Name == name {
			return a, true
		}
	}
	return App{}, false
}
