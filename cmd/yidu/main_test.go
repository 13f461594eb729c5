package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"net/http"
	"net/http/httptest"

	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/migrations"
)

// latestMigration is the highest version among the embedded migrations.
func latestMigration(tb testing.TB) int64 {
	tb.Helper()
	names, err := fs.Glob(migrations.FS(), "*.sql")
	if err != nil || len(names) == 0 {
		tb.Fatalf("migrations: %v, %v", names, err)
	}
	var latest int64
	for _, n := range names {
		v, err := strconv.ParseInt(n[:strings.IndexByte(n, '_')], 10, 64)
		if err != nil {
			tb.Fatalf("migration %s: %v", n, err)
		}
		latest = max(latest, v)
	}
	return latest
}

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

	latest := latestMigration(t)
	out, _, err := runCmd(t, env, "", "migrate", "up")
	if want := fmt.Sprintf("schema at version %d", latest); err != nil || !strings.Contains(out, want) {
		t.Fatalf("migrate up = %q, %v; want %s", out, err, want)
	}
	out, _, err = runCmd(t, env, "", "migrate", "status")
	if err != nil || !strings.Contains(out, "00001_init.sql") || !strings.Contains(out, "applied") {
		t.Errorf("migrate status = %q, %v; want 00001_init.sql applied", out, err)
	}
	out, _, err = runCmd(t, env, "", "migrate", "down")
	if want := fmt.Sprintf("rolled back %d", latest); err != nil || !strings.Contains(out, want) {
		t.Errorf("migrate down = %q, %v; want %s", out, err, want)
	}
	out, _, err = runCmd(t, env, "", "migrate", "status")
	if err != nil || !strings.Contains(out, "pending") {
		t.Errorf("migrate status after down = %q, %v; want pending", out, err)
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
		{"no command", nil, "flag: help requested"},
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
