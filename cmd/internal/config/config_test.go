package config

import (
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
)

// writeFile writes content to path, for Load to read.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// writeConfig writes yaml to a yidu.yaml of the test's own and returns its
// path.
func writeConfig(tb testing.TB, yaml string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "yidu.yaml")
	writeFile(tb, p, yaml)
	return p
}

func TestLoadExample(t *testing.T) {
	env := map[string]string{
		"YIDU_APP_HR_SECRET":          "from-env",
		"YIDU_APP_HR_CONTACTS_SECRET": "contacts-from-env",
		"YIDU_REDIS_ADDR":             "10.0.0.1:6379",
		"YIDU_KAFKA_BROKERS":          "a:9092,b:9092",
	}
	cfg, err := Load(filepath.Join("..", "..", "..", "deploy", "yidu.example.yaml"), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("Load(example) error %v", err)
	}
	hr, ok := cfg.App("hr")
	if !ok {
		t.Fatalf("App(hr) missing")
	}
	if hr.Secret != "from-env" || hr.ContactsSecret != "contacts-from-env" || hr.AgentID != 1000002 || hr.ReadButtonKey != "yidu_read" {
		t.Errorf("app hr = %+v; want secrets from env, agent 1000002, key yidu_read", hr)
	}
	if cfg.Redis.Addr != "10.0.0.1:6379" {
		t.Errorf("redis addr = %q; want env override", cfg.Redis.Addr)
	}
	if strings.Join(cfg.Kafka.Brokers, ",") != "a:9092,b:9092" {
		t.Errorf("brokers = %v", cfg.Kafka.Brokers)
	}
	if cfg.Receiver.TimestampWindow.D() != 10*time.Minute || cfg.Flushd.Interval.D() != time.Minute {
		t.Errorf("durations = %v, %v", cfg.Receiver.TimestampWindow.D(), cfg.Flushd.Interval.D())
	}
}

func TestReadSignals(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []yidu.Signal
	}{
		{"left out: button and link", "apps: [{name: a, corp_id: c}]", []yidu.Signal{yidu.SignalButton, yidu.SignalLink}},
		{"enter_agent too", "apps: [{name: a, corp_id: c, read_signals: [button, link, enter_agent]}]",
			[]yidu.Signal{yidu.SignalButton, yidu.SignalLink, yidu.SignalEnterAgent}},
		{"button only", "apps: [{name: a, corp_id: c, read_signals: [button]}]", []yidu.Signal{yidu.SignalButton}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.yaml)
			cfg, err := Load(p, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Apps[0].Signals(); !slices.Equal(got, tt.want) {
				t.Errorf("Signals() = %v; want %v", got, tt.want)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	const key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", "receiver: {listn: x}", "listn"},
		{"bad app name", "apps: [{name: 'Bad Name', corp_id: c, token: t, encoding_aes_key: " + key + "}]", "name"},
		{"duplicate app", "apps: [{name: a, corp_id: c, token: t, encoding_aes_key: " + key + "}, {name: a, corp_id: c, token: t, encoding_aes_key: " + key + "}]", "duplicate"},
		{"short aes key", "apps: [{name: a, corp_id: c, token: t, encoding_aes_key: abc}]", "43 characters"},
		{"bad duration", "flushd: {interval: soon}", "duration"},
		{"negative session timeout", "kafka: {session_timeout: -1s}", "session_timeout"},
		{"negative flush interval", "flushd: {interval: -1s}", "flushd.interval"},
		{"instance id with slash", "flushd: {instance_id: 'ns/flushd-0'}", "instance_id"},
		{"instance id dot", "flushd: {instance_id: '.'}", "instance_id"},
		{"instance id too long", "flushd: {instance_id: " + strings.Repeat("a", 250) + "}", "instance_id"},
		{"nameless api token", "dashboard: {tokens: [{token: nameless-token-0123456789, corps: ['*']}]}", "name is required"},
		{"api token name twice", "dashboard: {tokens: [{name: ci, token: first-token-0123456789, corps: ['*']}, {name: ci, token: second-token-0123456789, corps: ['*']}]}", "used twice"},
		{"contacts secret is the app's", "apps: [{name: a, corp_id: c, secret: s3, contacts_secret: s3}]", "YIDU_APP_A_CONTACTS_SECRET"},
		{"public url not http", "receiver: {public_url: 'ftp://yidu.example.com'}", "public_url"},
		{"public url relative", "receiver: {public_url: '/yidu'}", "public_url"},
		{"public url with query", "receiver: {public_url: 'https://yidu.example.com/?x=1'}", "public_url"},
		{"dashboard public url not http", "dashboard: {public_url: 'ftp://dash.example.com'}", "dashboard.public_url"},
		{"sasl mechanism", "kafka: {sasl: {mechanism: GSSAPI, username: u}}", "kafka.sasl.mechanism"},
		{"sasl password in file", "kafka: {sasl: {mechanism: PLAIN, username: u, password: p}}", "password"},
		{"sasl without password env", "kafka: {sasl: {mechanism: SCRAM-SHA-512, username: u}}", "YIDU_KAFKA_SASL_PASSWORD"},
		{"sasl without user", "kafka: {sasl: {mechanism: PLAIN}}", "kafka.sasl.username"},
		{"tls settings while off", "kafka: {tls: {ca_file: /ca.pem}}", "kafka.tls"},
		{"tls cert without key", "redis: {tls: {enabled: true, cert_file: /c.pem}}", "redis.tls"},
		{"mysql tls cert without key", "mysql: {tls: {enabled: true, key_file: /k.pem}}", "mysql.tls"},
		{"sentinel without addrs", "redis: {sentinel: {master: m}}", "redis.sentinel"},
		{"sentinel and cluster", "redis: {addr: 'a:1,b:2', sentinel: {master: m, addrs: ['s:26379']}}", "exclusive"},
		{"example hash", "dashboard: {users: [{name: admin, password_hash: '" + ExampleSecrets[0] + "'}]}", "dashboard.users[0].password_hash"},
		{"example token", "dashboard: {tokens: [{name: t, token: change-me-to-a-long-random-token}]}", "dashboard.tokens[0].token"},
		{"user without name", "dashboard: {users: [{password_hash: x}]}", "name is required"},
		{"duplicate user", "dashboard: {users: [{name: a}, {name: a}]}", "defined twice"},
		{"bad trusted proxy", "dashboard: {trusted_proxies: ['10.0.0.0/33']}", "trusted_proxies"},
		{"missing users file", "dashboard: {users_file: /nonexistent/users.yaml}", "dashboard.users_file"},
		{"unknown read signal", "apps: [{name: a, corp_id: c, read_signals: [button, read]}]", "read_signals"},
		{"empty read signals", "apps: [{name: a, corp_id: c, read_signals: []}]", "read_signals"},
		{"read signal twice", "apps: [{name: a, corp_id: c, read_signals: [link, link]}]", "read_signals"},
		{"spool under 1 MiB", "receiver: {spool_dir: /var/lib/yidu/spool, spool_max_bytes: 4096}", "receiver.spool_max_bytes"},
		{"signin rate zero", "receiver: {signin_rate: 0}", "receiver.signin_rate"},
		{"signin rate negative", "receiver: {signin_rate: -5}", "receiver.signin_rate"},
		{"signin rate not a number", "receiver: {signin_rate: .nan}", "receiver.signin_rate"},
		{"signin client rate zero", "receiver: {signin_client_rate: 0}", "receiver.signin_client_rate"},
		{"signin failure rate negative", "receiver: {signin_failure_rate: -1}", "receiver.signin_failure_rate"},
		{"session ttl too short", "receiver: {session_ttl: 1m}", "receiver.session_ttl"},
		{"session ttl too long", "receiver: {session_ttl: 10000h}", "receiver.session_ttl"},
		{"attachment cache under an attachment", "receiver: {attachment_cache_bytes: 1048576}", "receiver.attachment_cache_bytes"},
		{"gogc too low", "receiver: {gogc: 10}", "receiver.gogc"},
		{"gogc too high", "receiver: {gogc: 5000}", "receiver.gogc"},
		{"gogc negative", "receiver: {gogc: -1}", "receiver.gogc"},
		{"relative spool dir", "receiver: {spool_dir: spool}", "receiver.spool_dir"},
		{"dot spool dir", "receiver: {spool_dir: ./var/spool}", "receiver.spool_dir"},
		{"blank spool dir", "receiver: {spool_dir: ' '}", "receiver.spool_dir"},
		{"spool dir with trailing space", "receiver: {spool_dir: '/var/lib/yidu/spool '}", "receiver.spool_dir"},
		{"root spool dir", "receiver: {spool_dir: /}", "receiver.spool_dir"},
		{"root spool dir, uncleaned", "receiver: {spool_dir: /var/..//}", "receiver.spool_dir"},
		{"min reminder delay under 1s", "dashboard: {min_reminder_delay: 500ms}", "dashboard.min_reminder_delay"},
		{"fallback not a userid", "apps: [{name: a, corp_id: c, escalation_fallback: ['bad id']}]", "escalation_fallback"},
		{"default policy under the minimum", "apps: [{name: a, corp_id: c, follow_up: {reminders: [5m]}}]", "follow_up: invalid: reminders"},
		{"default policy with a deadline", "apps: [{name: a, corp_id: c, follow_up: {reminders: [2h], deadline: 2026-12-10T18:00:00+08:00}}]", "follow_up.deadline"},
		{"negative daily quota", "apps: [{name: a, corp_id: c, daily_quota: -1}]", "daily_quota"},
		{"default policy bad hours", "apps: [{name: a, corp_id: c, follow_up: {reminders: [2h], working_hours: '19:00-09:00'}}]", "working_hours"},
		{"oauth base with a path", "wecom: {oauth_base: 'https://open.weixin.qq.com/connect'}", "wecom.oauth_base"},
		{"login base not http", "wecom: {login_base: 'javascript:alert(1)'}", "wecom.login_base"},
		{"login app unknown", "dashboard: {login_app: nope, public_url: 'https://d.example'}", "dashboard.login_app"},
		{"login app without secret", "apps: [{name: a, corp_id: c}]\ndashboard: {login_app: a, public_url: 'https://d.example'}", "no secret"},
		{"login app without public url", "apps: [{name: a, corp_id: c, secret: s}]\ndashboard: {login_app: a}", "dashboard.public_url"},
		{"role without userid", "dashboard: {roles: [{role: admin, corp: c}]}", "dashboard.roles[0]: userid"},
		{"role unknown", "dashboard: {roles: [{userid: u, role: boss, corp: c}]}", "not one of admin"},
		{"viewer without departments", "dashboard: {roles: [{userid: u, role: viewer, corp: c}]}", "departments is required"},
		{"sender of an unknown app", "apps: [{name: a, corp_id: c}]\ndashboard: {roles: [{userid: u, role: sender, corp: c, apps: [b]}]}", "app \"b\" is not an app of corp c"},
		{"sender of another corp's app", "apps: [{name: a, corp_id: c}]\ndashboard: {roles: [{userid: u, role: sender, corp: d, apps: [a]}]}", "not an app of corp d"},
		{"token sender of an unknown app", "apps: [{name: a, corp_id: c}]\ndashboard: {tokens: [{name: t, token: 0123456789abcdef0, role: sender, corp: c, apps: [b]}]}", "dashboard.tokens[0]"},
		{"missing roles file", "dashboard: {roles_file: /nonexistent/roles.yaml}", "dashboard.roles_file"},
		{"verify file misnamed", "wecom: {verify_file: /etc/passwd}", "WW_verify_"},
		{"verify file missing", "wecom: {verify_file: /nonexistent/WW_verify_abc123.txt}", "wecom.verify_file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeConfig(t, tt.yaml)
			_, err := Load(p, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%q) error = %v; want it to mention %q", tt.yaml, err, tt.want)
			}
		})
	}
}

// TestStartRefusesWhatCannotWork (issue 46): a setting whose partner is
// missing would start and silently never work; each is refused at
// start naming the app and the missing key, and each with its partner
// loads.
func TestStartRefusesWhatCannotWork(t *testing.T) {
	const (
		dash = "dashboard: {public_url: 'https://d.example'}\n"
		rcv  = "receiver: {public_url: 'https://r.example'}\n"
	)
	tests := []struct {
		name, yaml, want string // want "": loads
	}{
		{"approval without dashboard.public_url", "apps: [{name: hr, corp_id: c, secret: s, approval: {over: 10, approvers: [u1]}}]", `app "hr": approval needs dashboard.public_url`},
		{"approval without the app's secret", dash + "apps: [{name: hr, corp_id: c, approval: {over: 10, approvers: [u1]}}]", "YIDU_APP_HR_SECRET"},
		{"approval with both", dash + "apps: [{name: hr, corp_id: c, secret: s, approval: {over: 10, approvers: [u1]}}]", ""},
		{"read_to_end without receiver.public_url", "apps: [{name: hr, corp_id: c, secret: s, read_signals: [button, read_to_end]}]", "read_signals read_to_end needs receiver.public_url"},
		{"acknowledged without receiver.public_url", "apps: [{name: hr, corp_id: c, secret: s, read_signals: [acknowledged]}]", "read_signals acknowledged needs receiver.public_url"},
		{"acknowledged without the app's secret", rcv + "apps: [{name: hr, corp_id: c, read_signals: [button, acknowledged]}]", "YIDU_APP_HR_SECRET"},
		{"acknowledged with both", rcv + "apps: [{name: hr, corp_id: c, secret: s, read_signals: [button, acknowledged]}]", ""},
		{"link only without receiver.public_url", "apps: [{name: hr, corp_id: c, secret: s, read_signals: [link]}]", "nothing would ever count as read"},
		{"link only with it", rcv + "apps: [{name: hr, corp_id: c, secret: s, read_signals: [link]}]", ""},
		{"the default signals without it", "apps: [{name: hr, corp_id: c}]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, tt.yaml), nil)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Load(%q) = %v; want it to load", tt.yaml, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Load(%q) error = %v; want it to mention %q", tt.yaml, err, tt.want)
			}
		})
	}
}

// TestApproversTyped (issue 46): apps[].approval.approvers name a kind
// of principal. A bare name is typed by what it names, or refused when
// it names two kinds; a typed entry naming nobody is refused.
func TestApproversTyped(t *testing.T) {
	const head = "dashboard: {public_url: 'https://d.example', users: [{name: admin, password_hash: h}, {name: ci, password_hash: h}], " +
		"tokens: [{name: ci, token: ci-token-0123456789abcdef}, {name: deploy, token: deploy-token-0123456789abcdef}], " +
		"roles: [{userid: admin, role: admin, corp: c}, {userid: lisi, role: admin, corp: c}]}\n"
	tests := []struct {
		name, approvers string
		want            []string // typed approvers; nil: refused
		err             string
	}{
		{"a bare user", "[admin]", nil, `approval.approvers[0] "admin" is ambiguous: it names a password user (dashboard.users) and a WeCom member (dashboard.roles); write user:admin or wecom:admin`},
		{"typed user", "['user:admin']", []string{"user:admin"}, ""},
		{"typed member of the same name", "['wecom:admin']", []string{"wecom:admin"}, ""},
		{"a bare token", "[deploy]", []string{"token:deploy"}, ""},
		{"a bare member with a role", "[lisi]", []string{"wecom:lisi"}, ""},
		{"a bare member without a role", "[wangwu]", []string{"wecom:wangwu"}, ""},
		{"a user and a token of one name", "[ci]", nil, `"ci" is ambiguous: it names a password user (dashboard.users) and an API token (dashboard.tokens); write user:ci or token:ci`},
		{"a user nobody is", "['user:nobody']", nil, "no dashboard.users entry is named \"nobody\""},
		{"a token nobody is", "['token:nobody']", nil, "no dashboard.tokens entry is named \"nobody\""},
		{"an unknown kind", "['group:hr']", nil, "the kind must be wecom:, user: or token:"},
		{"a kind without a name", "['wecom:']", nil, "names no wecom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := head + "apps: [{name: hr, corp_id: c, secret: s, approval: {over: 10, approvers: " + tt.approvers + "}}]"
			cfg, err := Load(writeConfig(t, y), nil)
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), `app "hr"`) {
					t.Errorf("approvers %s: Load error = %v; want it to name the app and say %q", tt.approvers, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("approvers %s: %v", tt.approvers, err)
			}
			if got := cfg.Apps[0].Approval.Approvers; !slices.Equal(got, tt.want) {
				t.Errorf("approvers %s typed as %q; want %q", tt.approvers, got, tt.want)
			}
		})
	}
}

func TestDashboardUsersFromFileAndEnv(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users.yaml")
	writeFile(t, users, "- {name: bob, password_hash: h1, corps: [c1]}\n")
	cfgFile := filepath.Join(dir, "yidu.yaml")
	writeFile(t, cfgFile, "dashboard: {users: [{name: alice, password_hash: h0}], users_file: "+users+"}\n")
	env := map[string]string{"YIDU_DASHBOARD_USERS": `[{name: carol, password_hash: h2, corps: ["*"]}]`}
	cfg, err := Load(cfgFile, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	var names []string
	for _, u := range cfg.Dashboard.Users {
		names = append(names, u.Name)
	}
	if strings.Join(names, ",") != "alice,carol,bob" {
		t.Errorf("users = %v; want alice (file), carol (env), bob (users_file)", names)
	}

	// A shipped example hash in the users file is refused, naming where.
	writeFile(t, users, "- {name: eve, password_hash: '"+ExampleSecrets[0]+"'}\n")
	if _, err := Load(cfgFile, nil); err == nil || !strings.Contains(err.Error(), "users_file") || !strings.Contains(err.Error(), "password_hash") {
		t.Errorf("Load with an example hash in users_file = %v; want a refusal naming users_file and password_hash", err)
	}
	env = map[string]string{"YIDU_API_TOKEN": "local-dev-api-token-change-me"}
	if _, err := Load("", func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "YIDU_API_TOKEN") {
		t.Errorf("Load with the example API token = %v; want a refusal naming YIDU_API_TOKEN", err)
	}
	// An unknown key in the users file is an error, like in the config.
	writeFile(t, users, "- {name: eve, pasword_hash: x}\n")
	if _, err := Load(cfgFile, nil); err == nil || !strings.Contains(err.Error(), "pasword_hash") {
		t.Errorf("Load with a typo in users_file = %v; want it named", err)
	}
}

func TestTransportEnv(t *testing.T) {
	env := map[string]string{
		"YIDU_KAFKA_SASL_USERNAME": "svc", "YIDU_KAFKA_SASL_PASSWORD": "pw",
		"YIDU_REDIS_USERNAME": "ru", "YIDU_REDIS_SENTINEL_PASSWORD": "sp",
	}
	p := writeConfig(t, "kafka: {sasl: {mechanism: SCRAM-SHA-256}}\nredis: {sentinel: {master: m, addrs: ['s:26379']}}\n")
	cfg, err := Load(p, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if s := cfg.Kafka.SASL; s.Username != "svc" || s.Password != "pw" {
		t.Errorf("kafka.sasl = %+v; want svc/pw from the environment", s)
	}
	if cfg.Redis.Username != "ru" || cfg.Redis.Sentinel.Password != "sp" {
		t.Errorf("redis = %+v; want username and sentinel password from the environment", cfg.Redis)
	}
}

func TestValidateReceiver(t *testing.T) {
	const key = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	tests := []struct {
		name string
		app  App
		want string // "" = valid
	}{
		{"complete", App{Name: "a", CorpID: "c", Token: "t", EncodingAESKey: key}, ""},
		{"missing token", App{Name: "a", CorpID: "c", EncodingAESKey: key}, "YIDU_APP_A_TOKEN"},
		{"missing key", App{Name: "a", CorpID: "c", Token: "t"}, "YIDU_APP_A_ENCODING_AES_KEY"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Apps = []App{tt.app}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate() = %v; want nil (secrets are checked per role)", err)
			}
			err := c.ValidateReceiver()
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("ValidateReceiver() = %v; want %q", err, tt.want)
			}
		})
	}
}

// TestSpoolEnv: YIDU_RECEIVER_SPOOL_DIR sets the spool directory (the
// StatefulSet's volume), which keeps its 1 GiB default bound.
func TestSpoolEnv(t *testing.T) {
	p := filepath.Join(t.TempDir(), "yidu.yaml")
	if err := os.WriteFile(p, []byte("receiver: {listen: '127.0.0.1:0'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"YIDU_RECEIVER_SPOOL_DIR": "/var/lib/yidu/spool"}
	c, err := Load(p, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if c.Receiver.SpoolDir != "/var/lib/yidu/spool" || c.Receiver.SpoolMaxBytes != 1<<30 {
		t.Errorf("spool = %q, %d; want the env's directory and 1 GiB", c.Receiver.SpoolDir, c.Receiver.SpoolMaxBytes)
	}
}

func TestDefaultsValid(t *testing.T) {
	if _, err := Load("", nil); err != nil {
		t.Errorf("Load(\"\") = %v; want defaults to validate", err)
	}
}

func TestPublicURL(t *testing.T) {
	p := writeConfig(t, "receiver: {public_url: 'https://yidu.example.com/wecom'}\n")
	cfg, err := Load(p, nil)
	if err != nil || cfg.Receiver.PublicURL != "https://yidu.example.com/wecom" {
		t.Errorf("Load = %q, %v; want the file's public_url", cfg.Receiver.PublicURL, err)
	}
	env := map[string]string{"YIDU_RECEIVER_PUBLIC_URL": "https://links.example.com"}
	cfg, err = Load(p, func(k string) string { return env[k] })
	if err != nil || cfg.Receiver.PublicURL != "https://links.example.com" {
		t.Errorf("Load with env = %q, %v; want the override", cfg.Receiver.PublicURL, err)
	}
	if Default().Receiver.PublicURL != "" {
		t.Error("default public_url is set; tracked links must be opt-in")
	}
}

func TestFlushdMembership(t *testing.T) {
	cfg, err := Load("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Kafka.SessionTimeout.D() != 0 || cfg.Flushd.InstanceID != "" {
		t.Errorf("defaults: session_timeout %v, instance_id %q; want 0 (flushd's default) and none (dynamic membership)",
			cfg.Kafka.SessionTimeout.D(), cfg.Flushd.InstanceID)
	}
	yaml := "kafka: {session_timeout: 30s}\nflushd: {instance_id: flushd-a, batch_size: 13106}\n"
	p := writeConfig(t, yaml)
	cfg, err = Load(p, nil)
	if err != nil || cfg.Kafka.SessionTimeout.D() != 30*time.Second || cfg.Flushd.InstanceID != "flushd-a" {
		t.Errorf("Load = %v, %q, %v; want the file's 30s, flushd-a", cfg.Kafka.SessionTimeout.D(), cfg.Flushd.InstanceID, err)
	}
	// A StatefulSet passes its pod name through the environment.
	env := map[string]string{"YIDU_FLUSHD_INSTANCE_ID": "yidu-flushd-2"}
	cfg, err = Load(p, func(k string) string { return env[k] })
	if err != nil || cfg.Flushd.InstanceID != "yidu-flushd-2" {
		t.Errorf("Load with env = %q, %v; want yidu-flushd-2", cfg.Flushd.InstanceID, err)
	}
}

// TestMySQLDialect: mysql.dialect defaults to auto; the file or
// YIDU_MYSQL_DIALECT name the server instead.
func TestMySQLDialect(t *testing.T) {
	cfg, err := Load("", nil)
	if err != nil || cfg.MySQL.Dialect != DialectAuto {
		t.Fatalf("default mysql.dialect = %q, %v; want auto", cfg.MySQL.Dialect, err)
	}
	p := filepath.Join(t.TempDir(), "yidu.yaml")
	if err := os.WriteFile(p, []byte("mysql: {dialect: tidb}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err := Load(p, nil); err != nil || cfg.MySQL.Dialect != "tidb" {
		t.Errorf("Load(dialect: tidb) = %q, %v; want tidb", cfg.MySQL.Dialect, err)
	}
	env := map[string]string{"YIDU_MYSQL_DIALECT": "mariadb"}
	if cfg, err := Load(p, func(k string) string { return env[k] }); err != nil || cfg.MySQL.Dialect != "mariadb" {
		t.Errorf("Load with YIDU_MYSQL_DIALECT = %q, %v; want mariadb", cfg.MySQL.Dialect, err)
	}
}

// TestLimits: the dashboard's heavy queries leave half the MySQL pool to
// the other roles (the shares within their wholes are the dashboard's own
// check: process.TestCheckRejects).
func TestLimits(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string // "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"zero is the default", func(c *Config) { c.Dashboard = Dashboard{}; c.MySQL.MaxOpenConns = 0 }, ""},
		{"small pool, zero queries: fitted", func(c *Config) {
			c.MySQL.MaxOpenConns = 8
			c.Dashboard.MaxQueries, c.Dashboard.MaxQueriesPerPrincipal = 0, 0
		}, ""},
		{"small pool", func(c *Config) {
			c.MySQL.MaxOpenConns = 8
			c.Dashboard.MaxQueries = 4
			c.Dashboard.MaxQueriesPerPrincipal = 2
		}, ""},
		{"queries over half the pool", func(c *Config) { c.MySQL.MaxOpenConns = 8; c.Dashboard.MaxQueries = 16 }, "dashboard.max_queries 16 must be in 1..4"},
		{"negative queries", func(c *Config) { c.Dashboard.MaxQueries = -1 }, "dashboard.max_queries"},
		{"pool of one", func(c *Config) { c.MySQL.MaxOpenConns = 1 }, "mysql.max_open_conns"},
		{"negative receiver pool", func(c *Config) { c.MySQL.ReceiverConns = -1 }, "mysql.receiver_conns"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.edit(&c)
			err := c.Validate()
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v; want %q", err, tt.want)
			}
		})
	}
}

// TestFollowUpConfig: an app's default policy and fallback load as
// written; a test may lower the minimum delay to 1 s.
func TestFollowUpConfig(t *testing.T) {
	p := writeConfig(t, `dashboard: {min_reminder_delay: 1s}
apps: [{name: a, corp_id: c, daily_quota: 5000, escalation_fallback: [hr-lead], follow_up: {reminders: [3s, 'next 09:30', 1d], escalate_after: 1, working_hours: '09:00-19:00', working_days: mon-fri}}]`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := c.App("a")
	if a.FollowUp == nil || !slices.Equal(a.FollowUp.Reminders, []string{"3s", "next 09:30", "1d"}) || a.FollowUp.EscalateAfter != 1 ||
		a.FollowUp.WorkingDays != "mon-fri" || !slices.Equal(a.EscalationFallback, []string{"hr-lead"}) || a.DailyQuota != 5000 ||
		time.Duration(c.Dashboard.MinReminderDelay) != time.Second {
		t.Errorf("loaded %+v, %+v, min %s", a.FollowUp, a.EscalationFallback, time.Duration(c.Dashboard.MinReminderDelay))
	}
	if d := time.Duration(Default().Dashboard.MinReminderDelay); d != 10*time.Minute {
		t.Errorf("default min_reminder_delay %s; want 10m", d)
	}
}

// TestSpoolDefault: the spool is on unless turned off, in data_dir's
// spool/; data_dir defaults to the XDG state directory, and is checked
// as receiver.spool_dir is.
func TestSpoolDefault(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string
	}{
		{"XDG state home", map[string]string{"XDG_STATE_HOME": "/s", "HOME": "/h"}, "/s/yidu/spool", ""},
		{"home alone", map[string]string{"HOME": "/h"}, "/h/.local/state/yidu/spool", ""},
		{"a relative XDG_STATE_HOME is ignored", map[string]string{"XDG_STATE_HOME": "rel", "HOME": "/h"}, "/h/.local/state/yidu/spool", ""},
		{"YIDU_DATA_DIR", map[string]string{"YIDU_DATA_DIR": "/var/lib/yidu", "HOME": "/h"}, "/var/lib/yidu/spool", ""},
		{"spool_dir wins", map[string]string{"YIDU_RECEIVER_SPOOL_DIR": "/x", "YIDU_DATA_DIR": "/d"}, "/x", ""},
		{"off", map[string]string{"YIDU_RECEIVER_SPOOL_DIR": "off", "HOME": "/h"}, SpoolOff, ""},
		{"no home: no spool", map[string]string{}, "", ""},
		{"a relative data_dir", map[string]string{"YIDU_DATA_DIR": "yidu-data"}, "", "data_dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load("", func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load = %v; want an error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Receiver.SpoolDir != tt.want {
				t.Errorf("receiver.spool_dir = %q; want %q", cfg.Receiver.SpoolDir, tt.want)
			}
		})
	}
}

// TestSignInConfig: the WeCom sign-in app defaults to the first app with
// a secret once dashboard.public_url is set, "off" turns it off, roles
// come from the file and the list, leaders see by default, and the
// verification file is read.
func TestSignInConfig(t *testing.T) {
	dir := t.TempDir()
	roles := filepath.Join(dir, "roles.yaml")
	writeFile(t, roles, "- {userid: lisi, role: viewer, corp: c, departments: [4]}\n")
	verify := filepath.Join(dir, "WW_verify_AbC123.txt")
	writeFile(t, verify, "AbC123token")
	base := "apps: [{name: a, corp_id: c}, {name: b, corp_id: c, secret: s}]\n"
	tests := []struct {
		name, yaml string
		login      string // the sign-in app's name, "" for off
		roles      int
		leaders    bool
	}{
		{"no public url: off", base, "", 0, true},
		{"first app with a secret", base + "dashboard: {public_url: 'https://d.example'}", "b", 0, true},
		{"off", base + "dashboard: {public_url: 'https://d.example', login_app: 'off'}", "", 0, true},
		{"roles from list and file, leaders off", base + "dashboard: {roles: [{userid: zs, role: sender, corp: c, apps: [a]}], roles_file: " + roles + ", leaders_see: false}", "", 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(writeConfig(t, tt.yaml+"\nwecom: {verify_file: "+verify+"}\n"), nil)
			if err != nil {
				t.Fatal(err)
			}
			app, ok := cfg.WeComLoginApp()
			if got := map[bool]string{true: app.Name}[ok]; got != tt.login {
				t.Errorf("WeComLoginApp = %q; want %q", got, tt.login)
			}
			if len(cfg.Dashboard.Roles) != tt.roles || cfg.Dashboard.SeeLeaders() != tt.leaders {
				t.Errorf("roles %d, leaders see %v; want %d, %v", len(cfg.Dashboard.Roles), cfg.Dashboard.SeeLeaders(), tt.roles, tt.leaders)
			}
			name, body, err := cfg.WeCom.ReadVerifyFile()
			if err != nil || name != "WW_verify_AbC123.txt" || string(body) != "AbC123token" {
				t.Errorf("ReadVerifyFile = %q %q %v", name, body, err)
			}
		})
	}
}

// TestImportsNoLibrary: config parses and checks what crosses libraries;
// it imports none of the libraries it configures (each owns its defaults
// and checks, and cmd/internal/process maps a Config onto them). Only the
// domain (the module root) and internal helpers.
func TestImportsNoLibrary(t *testing.T) {
	for _, dir := range []string{"."} {
		pkg, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pkg.Imports {
			rest, ours := strings.CutPrefix(imp, "github.com/yidu-io/yidu/")
			if ours && !strings.HasPrefix(rest, "internal/") {
				t.Errorf("config imports %s; it must import no library it configures", imp)
			}
		}
	}
}

// TestReadingPageKeys: receiver.signin_rate and attachment_cache_bytes
// default to 100/s and 1 GiB and take the file's values.
func TestReadingPageKeys(t *testing.T) {
	if d := Default().Receiver; d.SignInRate != 1000 || d.SignInClientRate != 50 || d.SignInFailureRate != 1 || d.SessionTTL.D() != 30*24*time.Hour || d.AttachmentCacheBytes != 1<<30 || d.GOGC != 400 {
		t.Errorf("defaults = %+v; want 1000, 50, 1, 30 days, 1 GiB, gogc 400", d)
	}
	for text, want := range map[string]int{"receiver: {gogc: 0}\n": 0, "receiver: {gogc: 200}\n": 200} {
		if cfg, err := Load(writeConfig(t, text), nil); err != nil || cfg.Receiver.GOGC != want {
			t.Errorf("Load(%q) = %d, %v; want gogc %d", text, cfg.Receiver.GOGC, err, want)
		}
	}
	p := writeConfig(t, "receiver: {signin_rate: 12.5, attachment_cache_bytes: 104857600}\n")
	cfg, err := Load(p, nil)
	if err != nil || cfg.Receiver.SignInRate != 12.5 || cfg.Receiver.AttachmentCacheBytes != 100<<20 {
		t.Errorf("Load = %v, %d, %v; want 12.5 and 100 MiB", cfg.Receiver.SignInRate, cfg.Receiver.AttachmentCacheBytes, err)
	}
}

// TestReceiptsConfig: an app sends acknowledgement receipts unless
// receipts: false; anything but a boolean is refused.
func TestReceiptsConfig(t *testing.T) {
	p := writeConfig(t, `apps: [{name: a, corp_id: c}, {name: b, corp_id: c, receipts: false}, {name: d, corp_id: c, receipts: true}]`)
	c, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"a": true, "b": false, "d": true} {
		if a, _ := c.App(name); a.ReceiptsOn() != want {
			t.Errorf("app %s receipts %v; want %v", name, a.ReceiptsOn(), want)
		}
	}
	if _, err := Load(writeConfig(t, `apps: [{name: a, corp_id: c, receipts: maybe}]`), nil); err == nil {
		t.Error("receipts: maybe loaded")
	}
}
