package config

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/clientip"
)

// verifyFileName is the name WeCom gives its domain verification file.
var verifyFileName = regexp.MustCompile(`^WW_verify_[A-Za-z0-9]{1,64}\.txt$`)

// maxVerifyFile bounds wecom.verify_file: WeCom's holds a short token.
const maxVerifyFile = 1 << 10

// ReadVerifyFile returns wecom.verify_file's name and content ("" and
// nil when none is configured).
func (w WeCom) ReadVerifyFile() (name string, content []byte, err error) {
	if w.VerifyFile == "" {
		return "", nil, nil
	}
	name = filepath.Base(w.VerifyFile)
	if !verifyFileName.MatchString(name) {
		return "", nil, fmt.Errorf("config: wecom.verify_file %q: the file's name must be WeCom's, WW_verify_<letters and digits>.txt", w.VerifyFile)
	}
	b, err := os.ReadFile(w.VerifyFile)
	if err != nil {
		return "", nil, fmt.Errorf("config: wecom.verify_file: %w", err)
	}
	if len(b) == 0 || len(b) > maxVerifyFile {
		return "", nil, fmt.Errorf("config: wecom.verify_file %q: %d bytes; WeCom's file holds a short token (1..%d bytes)", w.VerifyFile, len(b), maxVerifyFile)
	}
	return name, b, nil
}

// checkLimits checks the MySQL pools and what crosses them: the
// dashboard's heavy queries leave at least half of the pool to the other
// roles. Zero is the default (the dashboard's, capped at half the pool by
// process); each principal's share within its whole is the dashboard's
// own check (dashboard.Options.Validate).
func (c *Config) checkLimits() error {
	conns := cmp.Or(c.MySQL.MaxOpenConns, DefaultMySQLConns)
	d := c.Dashboard
	switch {
	case conns < 2:
		return fmt.Errorf("config: mysql.max_open_conns %d must be at least 2", c.MySQL.MaxOpenConns)
	case c.MySQL.ReceiverConns < 0:
		return fmt.Errorf("config: mysql.receiver_conns %d must be positive", c.MySQL.ReceiverConns)
	case d.MaxQueries < 0 || d.MaxQueries > conns/2:
		return fmt.Errorf("config: dashboard.max_queries %d must be in 1..%d (half of mysql.max_open_conns: the rest is the other roles'; 0: the default, capped so)", d.MaxQueries, conns/2)
	}
	return nil
}

// checkSpoolDir refuses a spool directory a restart could miss or that is
// not the spool's own: a relative path (resolved against whatever working
// directory the next start has, so spooled reads would be left behind), one
// with surrounding spaces (a YAML slip that creates " " in the working
// directory) and the root directory (the spool writes LOCK and its segments
// in the directory itself). Empty: no spool.
func checkSpoolDir(dir string) error {
	switch {
	case dir == "":
		return nil
	case strings.TrimSpace(dir) != dir:
		return errors.New("has leading or trailing spaces")
	case !filepath.IsAbs(dir):
		return errors.New("must be an absolute path (a relative one depends on the working directory of each start)")
	case filepath.Clean(dir) == string(filepath.Separator):
		return errors.New("must be a directory of its own, not the root directory")
	}
	return nil
}

// instanceID is what Kafka accepts as a group.instance.id (the rule for
// topic names: [a-zA-Z0-9._-], at most 249 characters, not "." or "..").
var instanceID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// Validate reports the first problem that would make yidu misbehave.
func (c Config) Validate() error {
	for _, check := range []func() error{
		c.checkApps, c.checkReminderDelay, c.checkReceiver, c.checkStores, c.checkDashboardURLs,
		c.checkLimits, c.checkSignIn, c.checkS3, c.checkPairings, c.checkUsers, c.checkTokens,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// checkApps checks each app: its name, corp, secrets, read settings,
// retention, approval rule and follow-up.
func (c Config) checkApps() error {
	seen := map[string]bool{}
	for i, a := range c.Apps {
		switch {
		case !yidu.ValidAppName(a.Name):
			return fmt.Errorf("config: apps[%d]: name %q must match %s", i, a.Name, yidu.AppNameRule)
		case seen[a.Name]:
			return fmt.Errorf("config: apps[%d]: duplicate name %q", i, a.Name)
		case a.CorpID == "":
			return fmt.Errorf("config: app %q: corp_id is required", a.Name)
		case a.ContactsSecret != "" && a.ContactsSecret == a.Secret:
			return fmt.Errorf("config: app %q: contacts_secret (or %s) is the app's secret; it must be the corp's "+
				"contacts-sync secret (通讯录同步 Secret), or empty", a.Name, EnvName(a.Name, "contacts_secret"))
		}
		if n := utf8.RuneCountInString(a.ReadReply); n > maxReadReply || !utf8.ValidString(a.ReadReply) {
			return fmt.Errorf("config: app %q: read_reply must be at most %d characters of UTF-8, got %d", a.Name, maxReadReply, n)
		}
		if a.EncodingAESKey != "" {
			if err := checkAESKey(a.EncodingAESKey); err != nil {
				return fmt.Errorf("config: app %q: encoding_aes_key (or %s): %w", a.Name, EnvName(a.Name, "encoding_aes_key"), err)
			}
		}
		if _, err := yidu.ParseReadSignals(a.ReadSignals); err != nil {
			return fmt.Errorf("config: app %q: read_signals: %w", a.Name, err)
		}
		if _, err := yidu.ParseRetention(a.Retention); err != nil {
			return fmt.Errorf("config: app %q: retention: %w", a.Name, err)
		}
		if r := a.Approval.Rule(); r != nil {
			if err := r.Validate(); err != nil {
				return fmt.Errorf("config: app %q: %w", a.Name, err)
			}
		}
		if err := checkFollowUp(a, c.Dashboard.ReminderDelay()); err != nil {
			return fmt.Errorf("config: app %q: %w", a.Name, err)
		}
		seen[a.Name] = true
	}
	return nil
}

// checkReminderDelay checks the dashboard's shortest reminder delay.
func (c Config) checkReminderDelay() error {
	if d := c.Dashboard.MinReminderDelay; d != 0 && d < Duration(time.Second) {
		return errors.New("config: dashboard.min_reminder_delay must be at least 1s (0: the default 10m)")
	}
	return nil
}

// checkReceiver checks the receiver's proxies, public URL, body and
// spool limits, sign-in rates, session lifetime and attachment cache.
func (c Config) checkReceiver() error {
	if _, err := clientip.ParseProxies(c.Receiver.TrustedProxies); err != nil {
		return fmt.Errorf("config: receiver.trusted_proxies: %w", err)
	}
	if err := yidu.CheckPublicURL(c.Receiver.PublicURL); err != nil {
		return fmt.Errorf("config: receiver.public_url %q: %w", c.Receiver.PublicURL, err)
	}
	if c.Receiver.MaxBody < 0 {
		return errors.New("config: receiver.max_body must be positive (0: the receiver's default)")
	}
	if err := checkSpoolDir(c.Receiver.SpoolDir); err != nil && c.Receiver.SpoolDir != SpoolOff {
		return fmt.Errorf("config: receiver.spool_dir (or YIDU_RECEIVER_SPOOL_DIR) %q: %w", c.Receiver.SpoolDir, err)
	}
	if c.Receiver.SpoolDir != "" && c.Receiver.SpoolDir != SpoolOff && c.Receiver.SpoolMaxBytes < 1<<20 {
		return fmt.Errorf("config: receiver.spool_max_bytes %d must be at least 1 MiB", c.Receiver.SpoolMaxBytes)
	}
	if r := c.Receiver.SignInRate; !(r > 0 && r <= 100000) {
		return fmt.Errorf("config: receiver.signin_rate %v must be more than 0 and at most 100000 sign-ins a second", r)
	}
	if r := c.Receiver.SignInClientRate; !(r > 0 && r <= 100000) {
		return fmt.Errorf("config: receiver.signin_client_rate %v must be more than 0 and at most 100000 sign-ins a second", r)
	}
	if r := c.Receiver.SignInFailureRate; !(r > 0 && r <= 100000) {
		return fmt.Errorf("config: receiver.signin_failure_rate %v must be more than 0 and at most 100000 failed sign-ins a second", r)
	}
	if d := c.Receiver.SessionTTL.D(); d < time.Hour || d > 400*24*time.Hour {
		return fmt.Errorf("config: receiver.session_ttl %v must be from 1h to 400 days (a browser keeps a cookie no longer)", d)
	}
	if b := c.Receiver.AttachmentCacheBytes; b < MinAttachmentCacheBytes {
		return fmt.Errorf("config: receiver.attachment_cache_bytes %d must be at least %d (the largest attachment)", b, MinAttachmentCacheBytes)
	}
	if g := c.Receiver.GOGC; g != 0 && (g < 25 || g > 2000) {
		return fmt.Errorf("config: receiver.gogc %d must be 0 (Go's own) or from 25 to 2000 percent", g)
	}
	return nil
}

// checkStores checks the audit's retention, flushd, Kafka, MySQL and
// Redis: their instance, timeouts, topic, TLS, SASL and Sentinel.
func (c Config) checkStores() error {
	if r := c.Audit.Retention.D(); r < 0 || (r > 0 && r < 24*time.Hour) {
		return fmt.Errorf("config: audit.retention %v must be 0 (keep every event) or at least 24h", r)
	}
	if id := c.Flushd.InstanceID; id != "" && (!instanceID.MatchString(id) || id == "." || id == "..") {
		return fmt.Errorf("config: flushd.instance_id (or YIDU_FLUSHD_INSTANCE_ID) %q must match %s", c.Flushd.InstanceID, instanceID)
	}
	if c.Kafka.SessionTimeout < 0 {
		return errors.New("config: kafka.session_timeout must be positive (0: flushd's default)")
	}
	if c.Flushd.Interval < 0 {
		return errors.New("config: flushd.interval must be positive (0: flushd's default)")
	}
	if c.Kafka.Topic == "" || len(c.Kafka.Brokers) == 0 {
		return errors.New("config: kafka.brokers and kafka.topic are required")
	}
	if c.Kafka.Partitions < 0 || c.Kafka.ReplicationFactor < 0 || c.Kafka.MinInsyncReplicas < 0 {
		return errors.New("config: kafka.partitions, kafka.replication_factor and kafka.min_insync_replicas must not be negative (0: the defaults 12, 3, 2)")
	}
	if err := c.Kafka.TLS.validate("kafka.tls"); err != nil {
		return err
	}
	if err := c.MySQL.TLS.validate("mysql.tls"); err != nil {
		return err
	}
	if err := c.Redis.TLS.validate("redis.tls"); err != nil {
		return err
	}
	if err := c.Kafka.SASL.validate(); err != nil {
		return err
	}
	if s := c.Redis.Sentinel; s.Master != "" || len(s.Addrs) > 0 {
		if s.Master == "" || len(s.Addrs) == 0 {
			return errors.New("config: redis.sentinel needs both master and addrs")
		}
		if strings.Contains(c.Redis.Addr, ",") {
			return errors.New("config: redis.sentinel and a Cluster (a comma-separated redis.addr) are exclusive")
		}
	}
	return nil
}

// checkDashboardURLs checks the dashboard's trusted proxies and public
// URL.
func (c Config) checkDashboardURLs() error {
	if _, err := c.Dashboard.Proxies(); err != nil {
		return err
	}
	if err := yidu.CheckPublicURL(c.Dashboard.PublicURL); err != nil {
		return fmt.Errorf("config: dashboard.public_url %q: %w", c.Dashboard.PublicURL, err)
	}
	return nil
}

// checkS3 refuses half a bucket configured: it would leave uploads in
// MySQL unseen.
func (c Config) checkS3() error {
	if s := c.Attachments.S3; !s.Enabled() && (s.Bucket != "" || s.AccessKey != "" || s.SecretKey != "" || s.Region != "") {
		// Half a bucket configured would leave uploads in MySQL unseen.
		return errors.New("config: attachments.s3.endpoint is required when attachments.s3 is set (empty: attachments stay in MySQL)")
	}
	return nil
}

// checkUsers checks the dashboard's users: a name each, none twice, no
// example hash.
func (c Config) checkUsers() error {
	names := map[string]bool{}
	for i, u := range c.Dashboard.Users {
		where := u.from
		if where == "" {
			where = fmt.Sprintf("dashboard.users[%d]", i)
		}
		switch {
		case u.Name == "":
			return fmt.Errorf("config: %s: name is required", where)
		case names[u.Name]:
			return fmt.Errorf("config: %s: user %q is defined twice", where, u.Name)
		case exampleSecret(u.PasswordHash):
			return fmt.Errorf("config: %s.password_hash (%s): the example hash shipped with yidu, whose password is public; print your own with yidu hash-password", where, u.Name)
		}
		names[u.Name] = true
	}
	return nil
}

// checkTokens checks the API tokens: a name each, none twice, no example
// token.
func (c Config) checkTokens() error {
	tokenNames := map[string]bool{}
	for i, t := range c.Dashboard.Tokens {
		where := fmt.Sprintf("dashboard.tokens[%d].token", i)
		if t.Name == "env" {
			where = "YIDU_API_TOKEN"
		}
		// A token's name is its actor in the audit and its key in the
		// per-principal limits: without one, or shared, its acts name
		// nobody (issue 38).
		switch {
		case t.Name == "":
			return fmt.Errorf("config: dashboard.tokens[%d].name is required (the audit names a token's acts by it)", i)
		case tokenNames[t.Name]:
			return fmt.Errorf("config: dashboard.tokens[%d]: token name %q is used twice (the audit could not tell them apart)", i, t.Name)
		}
		tokenNames[t.Name] = true
		if exampleSecret(t.Token) {
			return fmt.Errorf("config: %s (%s): the example token shipped with yidu, which is public; generate a random one (openssl rand -base64 32)", where, t.Name)
		}
	}
	return nil
}

// ExampleSecrets are the dashboard password hashes and API tokens that
// yidu's own examples and manifests show (deploy/, docs/) or once shipped.
// Their values are public, so Validate refuses them; deploycheck keeps the
// list complete.
var ExampleSecrets = []string{
	// Password change-me-please (the Compose stack and k8s/config.yaml
	// of earlier releases).
	"$2a$10$rYSi4MAUSPDWh66yMd9rN.lvGDPHPiqc8F02bieVJK3utUlCWoV8u",
	// deploy/yidu.example.yaml of earlier releases.
	"$2a$10$W2uqNlTmzGhX2wEUv3n9VOGq6u3nC7qHm2b5d7ry9sP8q1pgRrG3u",
	"change-me-to-a-long-random-token",
	"local-dev-api-token-change-me",
	"REPLACE-with-a-long-random-api-token",
}

func exampleSecret(v string) bool { return slices.Contains(ExampleSecrets, v) }

func (t TLS) validate(key string) error {
	if !t.Enabled {
		if t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.InsecureSkipVerify {
			return fmt.Errorf("config: %s: settings given but enabled is false", key)
		}
		return nil
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("config: %s: cert_file and key_file go together", key)
	}
	return nil
}

func (s SASL) validate() error {
	switch s.Mechanism {
	case "":
		if s.Username != "" || s.Password != "" {
			return errors.New("config: kafka.sasl: username or password given without a mechanism")
		}
		return nil
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
	default:
		return fmt.Errorf("config: kafka.sasl.mechanism %q: want %s, %s or %s", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	if s.Username == "" {
		return errors.New("config: kafka.sasl.username is required (or YIDU_KAFKA_SASL_USERNAME)")
	}
	if s.Password == "" {
		return errors.New("config: kafka.sasl: the password comes from YIDU_KAFKA_SASL_PASSWORD, which is empty")
	}
	return nil
}

func checkAESKey(k string) error {
	if len(k) != 43 {
		return fmt.Errorf("must be 43 characters, got %d", len(k))
	}
	b, err := base64.StdEncoding.DecodeString(k + "=")
	if err != nil || len(b) != 32 {
		return errors.New("is not base64 of 32 bytes")
	}
	return nil
}

// ValidateReceiver reports what the callback receiver additionally needs:
// every app's token and EncodingAESKey. Only the receiver holds them, so
// flushd, the dashboard and migrate run without the callback secrets.
func (c Config) ValidateReceiver() error {
	for _, a := range c.Apps {
		if a.Token == "" {
			return fmt.Errorf("config: app %q: token is required (or %s)", a.Name, EnvName(a.Name, "token"))
		}
		if err := checkAESKey(a.EncodingAESKey); err != nil {
			return fmt.Errorf("config: app %q: encoding_aes_key (or %s): %w", a.Name, EnvName(a.Name, "encoding_aes_key"), err)
		}
	}
	return nil
}

// checkFollowUp checks an app's escalation_fallback UserIDs and default
// follow-up policy: a default has no deadline (a notice's own date).
func checkFollowUp(a App, minDelay time.Duration) error {
	if a.DailyQuota < 0 {
		return fmt.Errorf("daily_quota: %d; want 0 (seats × 200) or more", a.DailyQuota)
	}
	for _, u := range a.EscalationFallback {
		if !yidu.UserID(u).Valid() {
			return fmt.Errorf("escalation_fallback: %q is not a WeCom UserID", yidu.Truncate(u, 64))
		}
	}
	if a.FollowUp == nil {
		return nil
	}
	if a.FollowUp.Deadline != nil {
		return errors.New("follow_up.deadline: a default policy takes no deadline")
	}
	if err := a.FollowUp.Validate(time.Time{}, minDelay); err != nil {
		return fmt.Errorf("follow_up: %w", err)
	}
	return nil
}
