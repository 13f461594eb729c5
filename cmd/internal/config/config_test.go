package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
		{"zero batch", "flushd: {batch_size: 0}", "batch_size"},
		{"batch over flushd.MaxBatchSize", "flushd: {batch_size: 13107}", "batch_size"},
		{"zero session timeout", "kafka: {session_timeout: 0s}", "session_timeout"},
		{"instance id with slash", "flushd: {instance_id: 'ns/flushd-0'}", "instance_id"},
		{"instance id dot", "flushd: {instance_id: '.'}", "instance_id"},
		{"instance id too long", "flushd: {instance_id: " + strings.Repeat("a", 250) + "}", "instance_id"},
		{"short api token", "dashboard: {tokens: [{name: x, token: short}]}", "16 characters"},
		{"contacts secret is the app's", "apps: [{name: a, corp_id: c, secret: s3, contacts_secret: s3}]", "YIDU_APP_A_CONTACTS_SECRET"},
		{"public url not http", "receiver: {public_url: 'ftp://yidu.example.com'}", "public_url"},
		{"public url relative", "receiver: {public_url: '/yidu'}", "public_url"},
		{"public url with query", "receiver: {public_url: 'https://yidu.example.com/?x=1'}", "public_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "yidu.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%q) error = %v; want it to mention %q", tt.yaml, err, tt.want)
			}
		})
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

func TestDefaultsValid(t *testing.T) {
	if _, err := Load("", nil); err != nil {
		t.Errorf("Load(\"\") = %v; want defaults to validate", err)
	}
}

func TestPublicURL(t *testing.T) {
	p := filepath.Join(t.TempDir(), "yidu.yaml")
	if err := os.WriteFile(p, []byte("receiver: {public_url: 'https://yidu.example.com/wecom'}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if cfg.Kafka.SessionTimeout.D() != 10*time.Second || cfg.Flushd.InstanceID != "" {
		t.Errorf("defaults: session_timeout %v, instance_id %q; want 10s and none (dynamic membership)",
			cfg.Kafka.SessionTimeout.D(), cfg.Flushd.InstanceID)
	}
	p := filepath.Join(t.TempDir(), "yidu.yaml")
	yaml := "kafka: {session_timeout: 30s}\nflushd: {instance_id: flushd-a, batch_size: 13106}\n"
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
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
