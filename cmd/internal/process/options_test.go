package process

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/flushd"
)

// TestCheckRejects: what config no longer checks because a library owns
// the rule is refused by Check, at start, naming the option.
func TestCheckRejects(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"defaults", "", ""},
		{"batch at the maximum", "flushd: {batch_size: 13106}", ""},
		{"negative batch", "flushd: {batch_size: -1}", "batch_size"},
		{"batch over flushd.MaxBatchSize", "flushd: {batch_size: 13107}", "batch_size"},
		{"short api token", "dashboard: {tokens: [{name: x, token: short}]}", "16 characters"},
		{"unknown mysql dialect", "mysql: {dialect: oracle}", "mysql.dialect"},
		{"mysql dialect upper-case", "mysql: {dialect: TiDB}", "mysql.dialect"},
		{"mysql dialect tidb", "mysql: {dialect: tidb}", ""},
		{"principal over the whole", "dashboard: {max_streams_per_principal: 300}", "max_streams_per_principal"},
		{"principal's queries over the whole", "dashboard: {max_queries_per_principal: 17}", "max_queries_per_principal"},
		{"negative stream timeout", "dashboard: {stream_write_timeout: -1s}", "stream_write_timeout"},
		{"small pool, zero queries: fitted", "mysql: {max_open_conns: 8}", ""},
		{"s3", "attachments: {s3: {endpoint: minio:9000, bucket: b, access_key: a, secret_key: s}}", ""},
		{"s3 without keys", "attachments: {s3: {endpoint: minio:9000, bucket: b}}", "attachments.s3"},
		{"s3 endpoint a URL", "attachments: {s3: {endpoint: 'https://minio:9000', bucket: b, access_key: a, secret_key: s}}", "attachments.s3"},
		{"s3 presign_ttl over 7 days", "attachments: {s3: {endpoint: minio:9000, bucket: b, access_key: a, secret_key: s, presign_ttl: 200h}}", "presign_ttl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "yidu.yaml")
			if err := os.WriteFile(p, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(p, func(string) string { return "" })
			if err != nil {
				t.Fatalf("config.Load: %v", err)
			}
			err = Check(cfg)
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Check(%q) = %v; want %q", tt.yaml, err, tt.want)
			}
		})
	}
}

// TestOptionsDefaults: a file that leaves the knobs out gets the
// libraries' defaults, as when config held copies of them; the heavy
// queries' default is capped at half the pool.
func TestOptionsDefaults(t *testing.T) {
	cfg, err := config.Load("", func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	d := DashboardOptions(cfg)
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if d.MaxStreams != dashboard.DefaultMaxStreams || d.MaxStreamsPerPrincipal != dashboard.DefaultMaxStreamsPerPrincipal ||
		d.StreamWriteTimeout != dashboard.DefaultStreamWriteTimeout || d.MaxQueries != dashboard.DefaultMaxQueries ||
		d.MaxQueriesPerPrincipal != dashboard.DefaultMaxQueriesPerPrincipal {
		t.Errorf("dashboard defaults = %+v", d)
	}
	cfg.MySQL.MaxOpenConns = 8
	d = DashboardOptions(cfg)
	if err := d.Validate(); err != nil || d.MaxQueries != 4 || d.MaxQueriesPerPrincipal != 4 {
		t.Errorf("pool of 8: max_queries %d, per principal %d, %v; want 4, 4", d.MaxQueries, d.MaxQueriesPerPrincipal, err)
	}
	if f := FlushdOptions(cfg); f.BatchSize != 0 || f.Interval != 0 || f.Validate() != nil {
		t.Errorf("flushd options = %+v; want zero values (flushd's defaults: %d per batch)", f, flushd.DefaultBatchSize)
	}
}

// TestWeComMemberIsNotTheUserOfItsName (issue 46): approvers: [admin]
// with a password user admin means that user. A WeCom member whose
// UserID is admin may no longer approve the app's notices; the user
// may. (On the old code the bare name matched either.)
func TestWeComMemberIsNotTheUserOfItsName(t *testing.T) {
	p := filepath.Join(t.TempDir(), "yidu.yaml")
	y := "dashboard: {public_url: 'https://d.example', users: [{name: admin, password_hash: h, corps: ['*']}]}\n" +
		"apps: [{name: hr, corp_id: c, agent_id: 1, secret: s, approval: {over: 10, approvers: [admin]}}]"
	if err := os.WriteFile(p, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	n := yidu.Notice{App: DomainApps(cfg.Apps)[0], CreatedBy: "hr-author"}
	member := &access.Principal{Name: "admin", Kind: access.KindWeCom, UserID: "admin", Corp: "c"}
	if err := campaign.MayApprove(member, n); !errors.Is(err, campaign.ErrForbidden) {
		t.Errorf("MayApprove(WeCom member admin) = %v; want ErrForbidden (the approver is the password user admin)", err)
	}
	user := access.NewPrincipal("admin", access.KindUser, true, nil)
	if err := campaign.MayApprove(user, n); err != nil {
		t.Errorf("MayApprove(password user admin) = %v; want nil", err)
	}
}
