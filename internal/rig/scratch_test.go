package rig

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/internal/testenv"
)

func TestDeleteKeys(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	ctx := context.Background()
	tests := []struct {
		name string
		keys int
	}{
		{"none", 0},
		{"a few", 3},
		{"more than a batch", 2500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := prefix + ":" + RandomHex(4) + ":"
			for i := range tt.keys {
				testenv.Check(t, "set", rdb.Set(ctx, fmt.Sprintf("%s%d", p, i), 1, 0).Err())
			}
			other := prefix + ":other"
			testenv.Check(t, "set", rdb.Set(ctx, other, 1, 0).Err())
			n, err := DeleteKeys(ctx, rdb, p)
			if err != nil || n != tt.keys {
				t.Errorf("DeleteKeys = %d, %v; want %d", n, err, tt.keys)
			}
			if left, _, err := rdb.Scan(ctx, 0, p+"*", 10_000).Result(); err != nil || len(left) != 0 {
				t.Errorf("%d keys left under the prefix (%v)", len(left), err)
			}
			if n, err := rdb.Exists(ctx, other).Result(); err != nil || n != 1 {
				t.Errorf("a key under another prefix was deleted (%v)", err)
			}
		})
	}
}

// TestScratch: a scratch database and prefix exist until Close, and
// nothing of them after.
func TestScratch(t *testing.T) {
	c, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	testenv.Check(t, "parse dsn", err)
	c.DBName = ""
	servers := Servers{MySQLDSN: c.FormatDSN(), RedisAddr: testenv.RedisAddr(t)}
	admin, err := sql.Open("mysql", servers.MySQLDSN)
	testenv.Check(t, "open", err)
	defer admin.Close()
	ctx := context.Background()
	exists := func(tb testing.TB, name string) bool {
		tb.Helper()
		var n int
		testenv.Check(tb, "schemata", admin.QueryRowContext(ctx,
			"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n))
		return n == 1
	}

	var progress bytes.Buffer
	s, err := NewScratch(ctx, servers, "yidu_test_rig_", "yidutestrig", &progress)
	if err != nil {
		t.Fatalf("NewScratch: %v", err)
	}
	if !strings.HasPrefix(s.DBName, "yidu_test_rig_") || !strings.HasPrefix(s.Prefix, "yidutestrig") || !exists(t, s.DBName) {
		t.Fatalf("scratch database %q (exists: %v), prefix %q", s.DBName, exists(t, s.DBName), s.Prefix)
	}
	if got, err := mysql.ParseDSN(s.DSN); err != nil || got.DBName != s.DBName {
		t.Errorf("DSN %q names %v (%v); want %s", s.DSN, got, err, s.DBName)
	}
	rdb := redis.NewClient(&redis.Options{Addr: servers.RedisAddr})
	defer rdb.Close()
	testenv.Check(t, "set", rdb.Set(ctx, s.Prefix+":k", 1, 0).Err())

	s.Close()
	if exists(t, s.DBName) {
		t.Errorf("database %s exists after Close", s.DBName)
	}
	if n, err := rdb.Exists(ctx, s.Prefix+":k").Result(); err != nil || n != 0 {
		t.Errorf("a key under %s after Close (%v)", s.Prefix, err)
	}
	for _, want := range []string{"deleted 1 redis keys under " + s.Prefix, "dropped database " + s.DBName} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}

// TestScratchRefused: nothing is created when a server is missing.
func TestScratchRefused(t *testing.T) {
	_, err := NewScratch(context.Background(), Servers{MySQLDSN: "root@tcp(127.0.0.1:1)/", RedisAddr: "127.0.0.1:1"}, "x_", "x", nil)
	if err == nil {
		t.Error("NewScratch without servers = nil error")
	}
}
