package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/migrations"
)

func runCmd(t *testing.T, env map[string]string, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), err
}

func TestMigrateUpStatusDown(t *testing.T) {
	// A DSN naming a database that does not exist yet: migrate up creates it.
	base := testenv.MySQLDSN(t)
	dsn := base[:strings.LastIndex(base, "/")+1] + testenv.RandomName("yidu_test_") + base[strings.Index(base, "?"):]
	env := map[string]string{"YIDU_MYSQL_DSN": dsn}
	t.Cleanup(func() {
		db, err := openAdmin(dsn)
		if err == nil {
			db.Exec("DROP DATABASE IF EXISTS " + dbName(dsn))
			db.Close()
		}
	})

	version, file := latestMigration(t)
	out, _, err := runCmd(t, env, "", "migrate", "up")
	if want := fmt.Sprintf("schema at version %d", version); err != nil || !strings.Contains(out, want) {
		t.Fatalf("migrate up = %q, %v; want %s", out, err, want)
	}
	out, _, err = runCmd(t, env, "", "migrate", "status")
	if err != nil || !strings.Contains(out, "00001_init.sql") || !strings.Contains(out, file) || strings.Contains(out, "pending") {
		t.Errorf("migrate status = %q, %v; want 00001_init.sql … %s applied", out, err, file)
	}
	out, _, err = runCmd(t, env, "", "migrate", "down")
	if want := fmt.Sprintf("rolled back %d", version); err != nil || !strings.Contains(out, want) {
		t.Errorf("migrate down = %q, %v; want %s", out, err, want)
	}
	out, _, err = runCmd(t, env, "", "migrate", "status")
	if err != nil || !strings.Contains(out, "pending") {
		t.Errorf("migrate status after down = %q, %v; want pending", out, err)
	}
	// Every Down section, to version 0 (bounded: one per migration), then
	// up again from scratch; a down at 0 is done, not a failure.
	for i := 0; ; i++ {
		out, _, err = runCmd(t, env, "", "migrate", "down")
		if err != nil {
			t.Fatalf("migrate down #%d = %q, %v", i+2, out, err)
		}
		if strings.Contains(out, "schema at version 0: nothing to roll back") {
			break
		}
		if !strings.Contains(out, "rolled back ") || int64(i) > version {
			t.Fatalf("migrate down #%d = %q; want rolled back, or nothing to roll back within %d", i+2, out, version)
		}
	}
	out, _, err = runCmd(t, env, "", "migrate", "status")
	if err != nil || strings.Contains(out, "applied") {
		t.Errorf("migrate status at version 0 = %q, %v; want every migration pending", out, err)
	}
	out, _, err = runCmd(t, env, "", "migrate", "up")
	if want := fmt.Sprintf("schema at version %d", version); err != nil || !strings.Contains(out, want) {
		t.Errorf("migrate up after down to 0 = %q, %v; want %s", out, err, want)
	}
	if _, _, err := runCmd(t, env, "", "migrate", "sideways"); err == nil {
		t.Errorf("migrate sideways succeeded; want an error")
	}
}

func TestHashPassword(t *testing.T) {
	out, _, err := runCmd(t, nil, "correct horse battery\n", "hash-password")
	if err != nil {
		t.Fatalf("hash-password: %v", err)
	}
	if bcrypt.CompareHashAndPassword([]byte(strings.TrimSpace(out)), []byte("correct horse battery")) != nil {
		t.Errorf("hash-password printed %q, which does not verify", out)
	}
	if _, _, err := runCmd(t, nil, "short\n", "hash-password"); err == nil {
		t.Errorf("hash-password accepted a 5-character password")
	}
}

func TestUsageErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("receiver: {listn: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "no command"},
		{"unknown command", []string{"explode"}, `unknown command "explode"`},
		{"bad config key", []string{"serve", "--config", bad}, "listn"},
		{"missing config", []string{"serve", "--config", "/nonexistent/yidu.yaml"}, "no such file"},
		{"directory without app", []string{"directory", "sync"}, "usage: yidu directory sync --app NAME"},
		{"directory unknown app", []string{"directory", "sync", "--app", "nope"}, `no app "nope"`},
		{"reconcile without target", []string{"reconcile"}, "usage: yidu reconcile"},
		{"bad log level", []string{"serve", "--log-level", "loud"}, "--log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCmd(t, nil, "", tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("yidu %v error = %v; want it to mention %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // "" = anything
	}{
		{"no command", nil, 2, ""},
		{"unknown command", []string{"explode"}, 2, ""},
		{"help", []string{"-h"}, 0, "commands:"},
		{"migrate help names its verbs", []string{"migrate", "-h"}, 0, "yidu migrate up|status|down"},
		{"directory help names sync and --app", []string{"directory", "-h"}, 0, "-app"},
		{"reconcile help", []string{"reconcile", "-h"}, 0, "-all-active"},
		{"link help", []string{"link", "-h"}, 0, "-msgid"},
		{"hash-password help", []string{"hash-password", "-h"}, 0, "without echo"},
		{"version", []string{"version"}, 0, "yidu "},
		{"--version", []string{"--version"}, 0, "yidu "},
		{"migrate without a step", []string{"migrate"}, 2, ""},
		{"migrate sideways", []string{"migrate", "sideways"}, 2, ""},
		{"directory without sync", []string{"directory", "--app", "hr"}, 2, ""},
		{"unknown flag", []string{"serve", "--nope"}, 2, ""},
		{"unknown global flag", []string{"--nope", "serve"}, 2, ""},
		{"reconcile both", []string{"reconcile", "--msgid", "m", "--all-active"}, 2, ""},
		{"reconcile a malformed msgid", []string{"reconcile", "--msgid", "../x"}, 2, ""},
		{"link a malformed msgid", []string{"link", "--app", "hr", "--msgid", "a b", "--to", "https://x.example"}, 2, ""},
		{"healthcheck without URL", []string{"healthcheck"}, 2, ""},
		{"serve with an argument", []string{"serve", "extra"}, 2, ""},
		{"doctor an unknown app", []string{"doctor", "--app", "nope"}, 2, ""},
		{"bad log level", []string{"serve", "--log-level", "loud"}, 2, ""},
		{"missing config is a failure, not usage", []string{"--config", "/nonexistent/yidu.yaml", "serve"}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, nil, "", tt.args...)
			if got := exitCode(err); got != tt.code {
				t.Errorf("yidu %v: exit %d (%v); want %d", tt.args, got, err, tt.code)
			}
			if tt.stdout != "" && !strings.Contains(out, tt.stdout) {
				t.Errorf("yidu %v printed %q; want it to contain %q", tt.args, out, tt.stdout)
			}
		})
	}
}

func TestGlobalConfigBeforeCommand(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("receiver: {listn: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--config", bad, "serve"}, {"serve", "--config", bad}, {"--config=" + bad, "migrate", "status"}} {
		if _, _, err := runCmd(t, nil, "", args...); err == nil || !strings.Contains(err.Error(), "listn") {
			t.Errorf("yidu %v = %v; want the file's error (it was read)", args, err)
		}
	}
}

// TestServeRefusesAmbiguousApprover is issue 46's "a bare name is
// refused at start where it is ambiguous": yidu serve with an approver
// "admin" that names both a password user and a WeCom member with a role
// exits 1 naming the entry and both typed spellings, before it listens
// (its context is done: a serve that started would return at once).
func TestServeRefusesAmbiguousApprover(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	testenv.Check(t, "bcrypt", err)
	file := filepath.Join(t.TempDir(), "yidu.yaml")
	y := fmt.Sprintf(`dashboard:
  public_url: https://yidu.example.com
  users: [{name: admin, password_hash: %q, corps: [wwcorp]}]
  roles: [{userid: admin, role: viewer, corp: wwcorp, departments: [1]}]
apps:
  - {name: hr, corp_id: wwcorp, agent_id: 1000002, token: t, encoding_aes_key: jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C, secret: s,
     approval: {over: 10, approvers: [admin]}}
`, hash)
	testenv.Check(t, "write config", os.WriteFile(file, []byte(y), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	err = run(ctx, []string{"--config", file, "serve"}, strings.NewReader(""), &out, &errb, func(string) string { return "" })
	if exitCode(err) != 1 || err == nil || !strings.Contains(err.Error(), `approval.approvers[0] "admin" is ambiguous`) ||
		!strings.Contains(err.Error(), "user:admin or wecom:admin") {
		t.Errorf("yidu serve with an ambiguous approver = exit %d, %v; want 1 naming the entry and user:admin or wecom:admin", exitCode(err), err)
	}
}

func TestHealthcheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	defer down.Close()
	if _, _, err := runCmd(t, nil, "", "healthcheck", ok.URL); err != nil {
		t.Errorf("healthcheck(200) = %v; want nil", err)
	}
	if _, _, err := runCmd(t, nil, "", "healthcheck", down.URL); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("healthcheck(503) = %v; want an error naming 503", err)
	}
}

// latestMigration returns the highest embedded migration's version and
// file name: `migrate up` ends there, `migrate down` rolls it back.
func latestMigration(tb testing.TB) (int64, string) {
	tb.Helper()
	entries, err := fs.ReadDir(migrations.FS(), ".")
	if err != nil {
		tb.Fatal(err)
	}
	var version int64
	var file string
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if ok && err == nil && strings.HasSuffix(e.Name(), ".sql") && v > version {
			version, file = v, e.Name()
		}
	}
	if version == 0 {
		tb.Fatal("no migrations embedded")
	}
	return version, file
}
