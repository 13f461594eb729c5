package callback

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisDedup is the production Deduper: one Redis key per applied
// callback, hashed so any key string is safe ("<prefix>:dd:<hash>").
type RedisDedup struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewRedisDedup returns a Deduper on rdb whose keys start with prefix
// (config redis.prefix).
func NewRedisDedup(rdb redis.UniversalClient, prefix string) *RedisDedup {
	return &RedisDedup{rdb: rdb, prefix: prefix}
}

func (d *RedisDedup) key(key string) string {
	sum := sha256.Sum256([]byte(key))
	return d.prefix + ":dd:" + hex.EncodeToString(sum[:16])
}

// Seen reports whether key was remembered and has not expired.
func (d *RedisDedup) Seen(ctx context.Context, key string) (bool, error) {
	n, err := d.rdb.Exists(ctx, d.key(key)).Result()
	if err != nil {
		return false, fmt.Errorf("callback: dedup seen: %w", err)
	}
	return n > 0, nil
}

// Remember records key for ttl (SET NX: the first remember wins).
func (d *RedisDedup) Remember(ctx context.Context, key string, ttl time.Duration) error {
	if err := d.rdb.SetNX(ctx, d.key(key), 1, ttl).Err(); err != nil {
		return fmt.Errorf("callback: dedup remember: %w", err)
	}
	return nil
}
