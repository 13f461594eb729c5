package dashboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisSessions is the SessionStore of several dashboard replicas: one
// key per session, "<prefix>:session:<sha256(id)>", holding the session
// as JSON and expiring with it. The key is a hash of the cookie's id, so
// whoever reads Redis cannot sign in with what they read.
type RedisSessions struct {
	rdb    redis.UniversalClient
	prefix string
}

var _ SessionStore = (*RedisSessions)(nil)

// NewRedisSessions returns a SessionStore on rdb whose keys start with
// prefix (config redis.prefix).
func NewRedisSessions(rdb redis.UniversalClient, prefix string) *RedisSessions {
	return &RedisSessions{rdb: rdb, prefix: prefix}
}

func (r *RedisSessions) key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return r.prefix + ":session:" + hex.EncodeToString(sum[:])
}

// Put stores s under id for ttl.
func (r *RedisSessions) Put(ctx context.Context, id string, s Session, ttl time.Duration) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("dashboard: encode session: %w", err)
	}
	if err := r.rdb.Set(ctx, r.key(id), b, ttl).Err(); err != nil {
		return fmt.Errorf("dashboard: redis set session: %w", err)
	}
	return nil
}

// Get returns the session stored under id.
func (r *RedisSessions) Get(ctx context.Context, id string) (Session, bool, error) {
	b, err := r.rdb.Get(ctx, r.key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, fmt.Errorf("dashboard: redis get session: %w", err)
	}
	var s Session
	if err := json.Unmarshal(b, &s); err != nil {
		// Not ours to trust: treat as no session.
		return Session{}, false, nil
	}
	return s, true, nil
}

// Delete removes the session under id.
func (r *RedisSessions) Delete(ctx context.Context, id string) error {
	if err := r.rdb.Del(ctx, r.key(id)).Err(); err != nil {
		return fmt.Errorf("dashboard: redis delete session: %w", err)
	}
	return nil
}
