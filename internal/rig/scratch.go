package rig

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// KeyDeleter is the part of a Redis client DeleteKeys uses.
type KeyDeleter interface {
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	Del(ctx context.Context, keys ...string) *redis.IntCmd
}

// DeleteKeys deletes every key under prefix, up to 1000 at a time, and
// returns how many it deleted: a run's keys on a shared Redis.
func DeleteKeys(ctx context.Context, rdb KeyDeleter, prefix string) (int, error) {
	n := 0
	var keys []string
	del := func() error {
		if err := rdb.Del(ctx, keys...).Err(); err != nil {
			return fmt.Errorf("redis: delete keys under %s: %w", prefix, err)
		}
		n += len(keys)
		keys = keys[:0]
		return nil
	}
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 1000 {
			if err := del(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, fmt.Errorf("redis: scan %s: %w", prefix, err)
	}
	if len(keys) > 0 {
		return n, del()
	}
	return n, nil
}

// Scratch is a run's own database and Redis key prefix on its Servers:
// nothing else writes there, and Close removes both.
type Scratch struct {
	// DSN is Servers.MySQLDSN naming the database DBName.
	DSN, DBName string
	// Redis is a client of Servers.RedisAddr; the run's keys start with
	// Prefix.
	Redis  *redis.Client
	Prefix string

	progress io.Writer
}

// NewScratch connects to Redis and creates the database <db><12 random
// hex digits>; the key prefix is <keys><12 random hex digits>. Close
// says on progress what it removed.
func NewScratch(ctx context.Context, s Servers, db, keys string, progress io.Writer) (*Scratch, error) {
	c, err := mysql.ParseDSN(s.MySQLDSN)
	if err != nil {
		return nil, fmt.Errorf("mysql dsn: %w", err)
	}
	sc := &Scratch{DBName: db + RandomHex(6), Prefix: keys + RandomHex(6), progress: progress}
	sc.Redis = redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	if err := sc.Redis.Ping(ctx).Err(); err != nil {
		sc.Redis.Close()
		return nil, fmt.Errorf("redis %s: %w", s.RedisAddr, err)
	}
	c.DBName = ""
	admin, err := sql.Open("mysql", c.FormatDSN())
	if err == nil {
		_, err = admin.ExecContext(ctx, "CREATE DATABASE `"+sc.DBName+"` CHARACTER SET utf8mb4")
		admin.Close()
	}
	if err != nil {
		sc.Redis.Close()
		return nil, fmt.Errorf("mysql: create database %s: %w", sc.DBName, err)
	}
	c.DBName = sc.DBName
	sc.DSN = c.FormatDSN()
	return sc, nil
}

// Close deletes the keys under Prefix and drops the database, also after
// the run's context has ended.
func (s *Scratch) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := DeleteKeys(ctx, s.Redis, s.Prefix)
	if err != nil {
		Logf(s.progress, "%v", err)
	}
	s.Redis.Close()
	Logf(s.progress, "deleted %d redis keys under %s", n, s.Prefix)
	if err := dropDatabase(ctx, s.DSN, s.DBName); err != nil {
		Logf(s.progress, "%v", err)
	} else {
		Logf(s.progress, "dropped database %s", s.DBName)
	}
}

// dropDatabase drops database name, if it exists, on the server dsn
// names.
func dropDatabase(ctx context.Context, dsn, name string) error {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("mysql: parse dsn: %w", err)
	}
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return fmt.Errorf("mysql: open: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+strings.ReplaceAll(name, "`", "``")+"`"); err != nil {
		return fmt.Errorf("mysql: drop database %s: %w", name, err)
	}
	return nil
}
