package main

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestLink(t *testing.T) {
	dir := t.TempDir()
	write := func(name, yaml string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const apps = "apps: [{name: hr, corp_id: ww1, agent_id: 1000002}, {name: ops, corp_id: ww1, agent_id: 1000003}]\n"
	withURL := write("links.yaml", "receiver: {public_url: 'https://yidu.example.com'}\n"+apps)
	noURL := write("nolinks.yaml", apps)
	env := map[string]string{"YIDU_APP_HR_SECRET": "hr-secret", "YIDU_APP_OPS_SECRET": "ops-secret"}
	const target = "https://intranet.example.com/n/42?a=1&b=2"

	out, _, err := runCmd(t, env, "", "link", "--config", withURL, "--app", "hr", "--msgid", "notice-1", "--to", target)
	if err != nil {
		t.Fatalf("yidu link: %v", err)
	}
	u, err := url.Parse(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("yidu link printed %q: %v", out, err)
	}
	if u.Scheme != "https" || u.Host != "yidu.example.com" || u.Path != "/r/hr/notice-1" || u.Query().Get("to") != target ||
		!regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(u.Query().Get("sig")) {
		t.Errorf("yidu link printed %q; want https://yidu.example.com/r/hr/notice-1?to=<target>&sig=<32 hex>", out)
	}
	other, _, err := runCmd(t, env, "", "link", "--config", withURL, "--app", "ops", "--msgid", "notice-1", "--to", target)
	if err != nil || other == out {
		t.Errorf("ops's link = %q, %v; want a different signature from hr's", other, err)
	}

	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"missing flags", env, []string{"link", "--config", withURL, "--app", "hr"}, "usage: yidu link"},
		{"unknown app", env, []string{"link", "--config", withURL, "--app", "nope", "--msgid", "m", "--to", target}, `no app "nope"`},
		{"no public url", env, []string{"link", "--config", noURL, "--app", "hr", "--msgid", "m", "--to", target}, "receiver.public_url"},
		{"no secret", nil, []string{"link", "--config", withURL, "--app", "hr", "--msgid", "m", "--to", target}, "YIDU_APP_HR_SECRET"},
		{"not http", env, []string{"link", "--config", withURL, "--app", "hr", "--msgid", "m", "--to", "javascript:alert(1)"}, "http(s)"},
		{"bad msgid", env, []string{"link", "--config", withURL, "--app", "hr", "--msgid", "m@1", "--to", target}, "msgid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, tt.env, "", tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("yidu %v = %q, %v; want an error mentioning %q", tt.args, out, err, tt.want)
			}
		})
	}
}
