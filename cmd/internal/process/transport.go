package process

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/yidu-io/yidu/cmd/internal/config"
)

// TLSConfig returns the client TLS settings of c, or nil when TLS is off.
// The server's certificate is verified against CAFile (or the system
// roots) unless c.InsecureSkipVerify says otherwise.
func TLSConfig(c config.TLS) (*tls.Config, error) {
	if !c.Enabled {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls: ca_file %s holds no PEM certificate", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls: cert_file and key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// KafkaOpts returns the client options every Kafka client of yidu shares
// (producer, flushd's consumer group, the admin calls made through them):
// TLS, SASL, and franz-go's kprom metrics on reg as
// yidu_kafka_<subsystem>_* (nil reg: none). Each client needs its own
// subsystem: kprom registers its series once per client.
func KafkaOpts(c config.Kafka, reg prometheus.Registerer, subsystem string) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	tc, err := TLSConfig(c.TLS)
	if err != nil {
		return nil, fmt.Errorf("kafka.%w", err)
	}
	if tc != nil {
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch s := c.SASL; s.Mechanism {
	case "":
	case config.SASLPlain:
		opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
	case config.SASLScramSHA256:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
	case config.SASLScramSHA512:
		opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("kafka.sasl.mechanism %q is not supported", s.Mechanism)
	}
	if reg != nil {
		opts = append(opts, kgo.WithHooks(kprom.NewMetrics("yidu_kafka", kprom.Registerer(reg), kprom.Subsystem(subsystem),
			kprom.FetchAndProduceDetail(kprom.ByTopic, kprom.Records, kprom.Batches, kprom.UncompressedBytes))))
	}
	return opts, nil
}

// CheckKafka asks the brokers for the topic's metadata with the
// configured TLS and SASL, within timeout. A refused credential or
// certificate is returned at once, so a misconfigured process stops at
// start with the reason instead of retrying forever; a broker that does
// not answer is not an error here (it may come up later; readiness
// reports it). Without TLS or SASL there is nothing to refuse, and no
// check: a plaintext broker that is down delays no start.
func CheckKafka(ctx context.Context, c config.Kafka, timeout time.Duration) error {
	if !c.TLS.Enabled && c.SASL.Mechanism == "" {
		return nil
	}
	opts, err := KafkaOpts(c, nil, "")
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...)}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx, c.Topic)
	if err == nil {
		if d, ok := td[c.Topic]; ok && d.Err != nil {
			err = d.Err
		}
	}
	if err != nil && (refusedAlways(err) || closedOnUs(err)) {
		who := "without SASL"
		if c.SASL.Mechanism != "" {
			who = fmt.Sprintf("as %q (%s)", c.SASL.Username, c.SASL.Mechanism)
		}
		return fmt.Errorf("kafka: %s refused the connection %s: check kafka.sasl, kafka.tls and YIDU_KAFKA_SASL_PASSWORD: %w",
			strings.Join(c.Brokers, ","), who, err)
	}
	return nil
}

// refusedAlways reports whether err is a definitive authentication,
// authorization or certificate failure: retrying cannot help.
func refusedAlways(err error) bool {
	for _, e := range []error{
		kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState,
		kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed, kerr.GroupAuthorizationFailed,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		alert     tls.AlertError
		recordHdr tls.RecordHeaderError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &alert) || errors.As(err, &recordHdr)
}

// closedOnUs reports whether the broker accepted the connection and then
// closed it (EOF, reset). With SASL or TLS configured (CheckKafka runs only
// then) that is how a failed login ends (a real broker after SaslAuthenticate's error, kfake
// at once), and how a TLS listener answers plaintext; a broker that cannot
// be reached at all (dial errors, timeouts) is not refused.
func closedOnUs(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// NewRedis returns a client for c: Sentinel when redis.sentinel names a
// master, Redis Cluster when addr lists several nodes, else one node;
// with the ACL username and TLS when configured.
func NewRedis(c config.Redis) (redis.UniversalClient, error) {
	tc, err := TLSConfig(c.TLS)
	if err != nil {
		return nil, fmt.Errorf("redis.%w", err)
	}
	o := &redis.UniversalOptions{
		Addrs:        strings.Split(c.Addr, ","),
		Username:     c.Username,
		Password:     c.Password,
		DB:           c.DB,
		TLSConfig:    tc,
		PoolSize:     64,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  2 * time.Second,
		WriteTimeout: 2 * time.Second,
	}
	if s := c.Sentinel; s.Master != "" {
		o.MasterName, o.Addrs = s.Master, s.Addrs
		o.SentinelUsername, o.SentinelPassword = s.Username, s.Password
	}
	return redis.NewUniversalClient(o), nil
}

// MySQLTLSName is the name yidu registers mysql.tls under; a DSN selects
// it with tls=yidu.
const MySQLTLSName = "yidu"

// MySQLDSN registers mysql.tls (when enabled) with the driver under
// MySQLTLSName and returns the DSN to open: the configured one, with
// tls=yidu added when it names no TLS mode of its own. go-sql-driver's
// registry is process-wide, which is why only cmd calls this.
func MySQLDSN(c config.MySQL) (string, error) {
	if !c.TLS.Enabled {
		return c.DSN, nil
	}
	tc, err := TLSConfig(c.TLS)
	if err != nil {
		return "", fmt.Errorf("mysql.%w", err)
	}
	if err := mysql.RegisterTLSConfig(MySQLTLSName, tc); err != nil {
		return "", fmt.Errorf("mysql: register tls: %w", err)
	}
	dc, err := mysql.ParseDSN(c.DSN)
	if err != nil {
		return "", fmt.Errorf("mysql: parse dsn: %w", err)
	}
	switch dc.TLSConfig {
	case "", MySQLTLSName:
		dc.TLSConfig = MySQLTLSName
	default:
		return "", fmt.Errorf("mysql: mysql.tls is enabled but the dsn asks for tls=%s; drop it or say tls=%s", dc.TLSConfig, MySQLTLSName)
	}
	// ParseDSN resolved the name to the registered config; FormatDSN
	// writes the name back.
	return dc.FormatDSN(), nil
}
