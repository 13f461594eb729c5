package process

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
)

// saslKafka starts a kfake cluster that requires SASL/SCRAM-SHA-256 as
// user/pass for every request, with the deltas topic.
func saslKafka(tb testing.TB, user, pass string) []string {
	tb.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "yidu.reads"),
		kfake.EnableSASL(), kfake.Superuser(config.SASLScramSHA256, user, pass))
	if err != nil {
		tb.Fatalf("kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}

// TestKafkaSASLEndToEnd: the receiver's producer and flushd's consumer
// group both log in with SCRAM-SHA-256, and a read travels callback →
// Kafka → MySQL; franz-go's client metrics are served for both.
func TestKafkaSASLEndToEnd(t *testing.T) {
	brokers := saslKafka(t, "yidu", "scram-secret")
	m := mustRunMainWith(t, func(c *config.Config) {
		c.Kafka.Brokers, c.Kafka.Topic = brokers, "yidu.reads" // kfake's, with SASL: not the suite's Kafka
		c.Kafka.SASL = config.SASL{Mechanism: config.SASLScramSHA256, Username: "yidu", Password: "scram-secret"}
	})
	sentAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	reg := map[string]any{"msgid": "notice-sasl", "app": "hr", "title": "t", "sent_at": sentAt,
		"audience": map[string]any{"userids": []string{"zhangsan", "lisi"}}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	if code := deliver(t, m, cardEvent("zhangsan", "notice-sasl@0", sentAt.Unix()+5)); code != http.StatusOK {
		t.Fatalf("callback = %d; want 200 (published over SASL)", code)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var n int
		if err := m.DB.QueryRow(`SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND is_read = 1`,
			testCorp, "notice-sasl").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("MySQL holds %d reads of notice-sasl; want 1 (flushd consumed over SASL)", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	body := get(t, "http://"+m.ReceiverAddr+"/metrics")
	for _, name := range []string{
		"yidu_kafka_producer_produce_records_total", "yidu_kafka_consumer_fetch_records_total",
		"go_sql_open_connections", "yidu_redis_pool_hits_total", "yidu_build_info{",
	} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func get(tb testing.TB, url string) string {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestKafkaRefusedCredentials: a wrong password, mechanism or missing
// SASL is refused at start within seconds, with an error naming the
// settings to check; never a process that retries forever.
func TestKafkaRefusedCredentials(t *testing.T) {
	brokers := saslKafka(t, "yidu", "scram-secret")
	tests := []struct {
		name string
		sasl config.SASL
	}{
		{"wrong password", config.SASL{Mechanism: config.SASLScramSHA256, Username: "yidu", Password: "wrong"}},
		{"unknown user", config.SASL{Mechanism: config.SASLScramSHA512, Username: "nobody", Password: "scram-secret"}},
		{"plain where scram is set up", config.SASL{Mechanism: config.SASLPlain, Username: "yidu", Password: "scram-secret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default().Kafka
			c.Brokers, c.SASL = brokers, tt.sasl
			start := time.Now()
			err := CheckKafka(context.Background(), c, 10*time.Second)
			if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "kafka.sasl") {
				t.Errorf("CheckKafka = %v; want a refusal naming kafka.sasl", err)
			}
			if err != nil && strings.Contains(err.Error(), tt.sasl.Password) {
				t.Errorf("CheckKafka error %q shows the password", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("CheckKafka took %v; want a fast failure", d)
			}
		})
	}
	t.Run("unreachable broker is not fatal", func(t *testing.T) {
		c := config.Default().Kafka
		c.Brokers = []string{"127.0.0.1:1"}
		c.SASL = config.SASL{Mechanism: config.SASLPlain, Username: "u", Password: "p"}
		if err := CheckKafka(context.Background(), c, time.Second); err != nil {
			t.Errorf("CheckKafka(nothing listening) = %v; want nil (it may come up; readiness reports it)", err)
		}
	})
	t.Run("main refuses to start", func(t *testing.T) {
		cfg := config.Default()
		cfg.MySQL.DSN = testenv.MySQLDSN(t)
		cfg.Redis.Addr = testenv.RedisAddr(t)
		cfg.Kafka.Brokers = brokers
		cfg.Kafka.SASL = config.SASL{Mechanism: config.SASLScramSHA256, Username: "yidu", Password: "wrong"}
		cfg.Flushd.Listen = ""
		m := NewMain(cfg, discardLogger())
		defer m.Close()
		err := m.Run(context.Background(), Roles{Flushd: true})
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("Run(flushd) with a wrong password = %v; want a refusal", err)
		}
	})
}

// ---- Redis over TLS with an ACL user ----

// testPKI is a CA and a server certificate for 127.0.0.1, as PEM files.
type testPKI struct {
	caFile, certFile, keyFile string
}

func newTestPKI(tb testing.TB) testPKI {
	tb.Helper()
	dir := tb.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	testenv.Check(tb, "ca key", err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "yidu test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	testenv.Check(tb, "ca cert", err)
	ca, err := x509.ParseCertificate(caDER)
	testenv.Check(tb, "parse ca", err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	testenv.Check(tb, "server key", err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"redis.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	testenv.Check(tb, "server cert", err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	testenv.Check(tb, "marshal key", err)
	p := testPKI{filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")}
	write := func(path, typ string, b []byte) {
		testenv.Check(tb, "write "+path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600))
	}
	write(p.caFile, "CERTIFICATE", caDER)
	write(p.certFile, "CERTIFICATE", der)
	write(p.keyFile, "EC PRIVATE KEY", keyDER)
	return p
}

// tlsRedis starts redis-server listening only on TLS (--port 0) with ACL
// user yidu/pass, and returns its address. Without redis-server on PATH
// the test is skipped, or fails with YIDU_TEST_REAL=1.
func tlsRedis(tb testing.TB, p testPKI, pass string) string {
	tb.Helper()
	bin := testenv.LookPath(tb, "redis-server")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Check(tb, "free port", err)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", p.certFile, "--tls-key-file", p.keyFile, "--tls-ca-cert-file", p.caFile,
		"--tls-auth-clients", "no", "--save", "", "--appendonly", "no", "--dir", tb.TempDir(),
		// redis-server joins the words after --user into one ACL rule.
		"--user", "default", "off", "--user", "yidu", "on", ">"+pass, "~*", "&*", "+@all")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	testenv.Check(tb, "start redis-server", cmd.Start())
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redis-server on %s did not come up: %v\n%s", addr, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestRedisTLSWithACLUser(t *testing.T) {
	p := newTestPKI(t)
	addr := tlsRedis(t, p, "acl-secret")
	good := config.Redis{Addr: addr, Username: "yidu", Password: "acl-secret",
		TLS: config.TLS{Enabled: true, CAFile: p.caFile}}
	other := newTestPKI(t)
	tests := []struct {
		name string
		edit func(*config.Redis)
		want string // "" = success
	}{
		{"ca and acl user", func(*config.Redis) {}, ""},
		{"server name checked", func(c *config.Redis) { c.TLS.ServerName = "redis.test" }, ""},
		{"wrong password", func(c *config.Redis) { c.Password = "wrong" }, "WRONGPASS"},
		{"default user is off", func(c *config.Redis) { c.Username = "" }, "WRONGPASS"},
		{"another CA", func(c *config.Redis) { c.TLS.CAFile = other.caFile }, "certificate"},
		{"wrong server name", func(c *config.Redis) { c.TLS.ServerName = "evil.test" }, "certificate"},
		{"no TLS", func(c *config.Redis) { c.TLS = config.TLS{} }, "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			cl, err := NewRedis(c)
			testenv.Check(t, "NewRedis", err)
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			start := time.Now()
			err = cl.Ping(ctx).Err()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Ping = %v; want success", err)
			case tt.want != "" && (err == nil || (tt.want != "*" && !strings.Contains(err.Error(), tt.want))):
				t.Fatalf("Ping = %v; want an error mentioning %q", err, tt.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Ping took %v; want a fast answer", d)
			}
			if tt.want == "" {
				testenv.Check(t, "SET", cl.Set(ctx, "yidu-tls-test", "1", time.Minute).Err())
			}
		})
	}
	t.Run("main opens over TLS", func(t *testing.T) {
		cfg := config.Default()
		cfg.MySQL.DSN = testenv.MySQLDSN(t)
		cfg.Redis = good
		cfg.Redis.Prefix, cfg.Redis.TTL = "yidu", config.Duration(time.Hour)
		m := NewMain(cfg, discardLogger())
		defer m.Close()
		if err := m.Open(context.Background()); err != nil {
			t.Fatalf("Open over TLS: %v", err)
		}
		if err := m.Redis.Ping(context.Background()).Err(); err != nil {
			t.Errorf("Ping: %v", err)
		}
		cfg.Redis.Password = "wrong"
		bad := NewMain(cfg, discardLogger())
		defer bad.Close()
		if err := bad.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
			t.Errorf("Open with a wrong password = %v; want WRONGPASS", err)
		}
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestTLSConfig(t *testing.T) {
	p := newTestPKI(t)
	tests := []struct {
		name string
		c    config.TLS
		want string // "" = no error
	}{
		{"off", config.TLS{}, ""},
		{"system roots", config.TLS{Enabled: true}, ""},
		{"ca", config.TLS{Enabled: true, CAFile: p.caFile}, ""},
		{"client cert", config.TLS{Enabled: true, CertFile: p.certFile, KeyFile: p.keyFile}, ""},
		{"missing ca", config.TLS{Enabled: true, CAFile: "/nonexistent.pem"}, "ca_file"},
		{"ca not pem", config.TLS{Enabled: true, CAFile: p.keyFile}, "no PEM certificate"},
		{"key mismatch", config.TLS{Enabled: true, CertFile: p.certFile, KeyFile: p.caFile}, "key_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc, err := TLSConfig(tt.c)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("TLSConfig(%+v) = %v", tt.c, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("TLSConfig(%+v) = %v; want %q", tt.c, err, tt.want)
			case tt.want == "" && tt.c.Enabled && (tc == nil || tc.InsecureSkipVerify):
				t.Errorf("TLSConfig(%+v) = %+v; want verification on", tt.c, tc)
			case !tt.c.Enabled && tc != nil:
				t.Errorf("TLSConfig(off) = %+v; want nil", tc)
			}
		})
	}
}

func TestMySQLDSN(t *testing.T) {
	p := newTestPKI(t)
	tests := []struct {
		name string
		c    config.MySQL
		want string // substring of the DSN, or of the error
		err  bool
	}{
		{"no tls", config.MySQL{DSN: "u:p@tcp(db:3306)/yidu"}, "u:p@tcp(db:3306)/yidu", false},
		{"tls added", config.MySQL{DSN: "u:p@tcp(db:3306)/yidu", TLS: config.TLS{Enabled: true, CAFile: p.caFile}}, "tls=yidu", false},
		{"tls named", config.MySQL{DSN: "u:p@tcp(db:3306)/yidu?tls=yidu", TLS: config.TLS{Enabled: true, CAFile: p.caFile}}, "tls=yidu", false},
		{"conflicting mode", config.MySQL{DSN: "u:p@tcp(db:3306)/yidu?tls=skip-verify", TLS: config.TLS{Enabled: true}}, "tls=skip-verify", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn, err := MySQLDSN(tt.c)
			if tt.err {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("MySQLDSN = %q, %v; want an error mentioning %q", dsn, err, tt.want)
				}
				return
			}
			if err != nil || !strings.Contains(dsn, tt.want) {
				t.Errorf("MySQLDSN = %q, %v; want %q in it", dsn, err, tt.want)
			}
		})
	}
}

// TestKafkaOptsMetricsPerClient: the producer and the consumer register
// kprom's series side by side on one registry (serve runs both).
func TestKafkaOptsMetricsPerClient(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := config.Default().Kafka
	for _, sub := range []string{"producer", "consumer"} {
		if _, err := KafkaOpts(c, reg, sub); err != nil {
			t.Fatalf("KafkaOpts(%s): %v", sub, err)
		}
	}
}
