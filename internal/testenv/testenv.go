// Package testenv gives tests the real services they run against: a fresh,
// migrated MariaDB/MySQL database, a Redis key namespace or a redis-server
// of the test's own (StartRedis, for outages), an in-process kfake Kafka
// cluster and the fake WeCom API (RunWithWeCom); and the small helpers the
// tests of several packages share (Check, WaitFor, …). Everything is cleaned up
// with tb.Cleanup.
//
// Real servers are taken from YIDU_TEST_MYSQL_DSN (default
// root@tcp(127.0.0.1:3306)/) and YIDU_TEST_REDIS_ADDR (default
// 127.0.0.1:6379). When one is unreachable the test is skipped, unless
// YIDU_TEST_REAL=1 (set by .ci/run), where it fails.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/yidu-io/yidu/migrations"
)

// Real reports whether a missing real server must fail the test.
func Real() bool { return os.Getenv("YIDU_TEST_REAL") == "1" }

func unavailable(tb testing.TB, what string, err error) {
	tb.Helper()
	if Real() {
		tb.Fatalf("testenv: %s unavailable with YIDU_TEST_REAL=1: %v", what, err)
	}
	tb.Skipf("testenv: %s unavailable (%v); set YIDU_TEST_REAL=1 to fail instead", what, err)
}

// LookPath returns the path of the program name (a server or browser a
// test runs as a child process); without it on PATH the test is skipped,
// or fails with YIDU_TEST_REAL=1, like a missing server.
func LookPath(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		unavailable(tb, name, err)
	}
	return path
}

// RandomName returns prefix followed by 12 random hex digits.
func RandomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func baseDSN() string {
	if v := os.Getenv("YIDU_TEST_MYSQL_DSN"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// MySQLDSN creates a fresh database with every migration applied and returns
// a DSN for it (parseTime on, multiStatements off). The database is dropped
// when the test ends.
func MySQLDSN(tb testing.TB) string {
	tb.Helper()
	cfg, err := mysql.ParseDSN(baseDSN())
	if err != nil {
		tb.Fatalf("testenv: parse dsn: %v", err)
	}
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		tb.Fatalf("testenv: open mysql: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		unavailable(tb, "mysql", err)
	}
	name := RandomName("yidu_test_")
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		tb.Fatalf("testenv: create database: %v", err)
	}
	tb.Cleanup(func() {
		db, err := sql.Open("mysql", cfg.FormatDSN())
		if err != nil {
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	cfg.DBName = name
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// As process.OpenDB opens production's pools: statements interpolated
	// (the text protocol), so tests read rows as production does.
	cfg.InterpolateParams = true
	dsn := cfg.FormatDSN()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatalf("testenv: open %s: %v", name, err)
	}
	defer db.Close()
	if _, err := migrations.Up(ctx, db); err != nil {
		tb.Fatalf("testenv: migrate %s: %v", name, err)
	}
	return dsn
}

// MySQL returns an open pool on a fresh migrated database (see MySQLDSN).
func MySQL(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open("mysql", MySQLDSN(tb))
	if err != nil {
		tb.Fatalf("testenv: open mysql: %v", err)
	}
	db.SetMaxOpenConns(32)
	tb.Cleanup(func() { db.Close() })
	return db
}

// RedisAddr returns the test Redis address, skipping (or failing with
// YIDU_TEST_REAL=1) when it does not answer.
func RedisAddr(tb testing.TB) string {
	tb.Helper()
	addr := os.Getenv("YIDU_TEST_REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(tb, "redis", err)
	}
	return addr
}

// Redis returns a client for the test Redis and a key prefix unique to this
// test; every key under the prefix is deleted when the test ends. Packages
// run in parallel against one Redis, so tests must keep to their prefix.
func Redis(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	addr := RedisAddr(tb)
	c := redis.NewClient(&redis.Options{Addr: addr})
	prefix := RandomName("yidut")
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
			if len(keys) == 1000 {
				c.Del(ctx, keys...)
				keys = keys[:0]
			}
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
		c.Close()
	})
	return c, prefix
}

// Kafka starts an in-process kfake cluster with topic (partitions as given)
// and returns its broker addresses; the cluster closes when the test ends.
func Kafka(tb testing.TB, topic string, partitions int32) (*kfake.Cluster, []string) {
	tb.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	if err != nil {
		tb.Fatalf("testenv: kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// Check fails tb when err is not nil, naming what failed.
func Check(tb testing.TB, what string, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
}

// Quote returns s with backquotes escaped, for identifiers in test SQL.
func Quote(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
