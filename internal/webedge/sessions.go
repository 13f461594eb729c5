package webedge

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/yidu-io/yidu/access"
)

// SessionKind is what differs between the surfaces' sessions.
type SessionKind struct {
	// Name is the error messages' context ("access", "page").
	Name string
	// Key starts every session's Redis key, before the hash of its id
	// ("<redis.prefix>:session:" for the dashboard's,
	// "<redis.prefix>page:session:" for the page's).
	Key string
	// TTL is a session's lifetime for Create and, when Rolling, from
	// each Get (Put takes its own).
	TTL time.Duration
	// Rolling: every Get pushes the session's end back by TTL (GETEX in
	// the same round trip), so one used at least once a TTL never ends.
	Rolling bool
	// Strict: a session that does not decode is an error (the request is
	// answered 503); otherwise it is no session (not ours to trust).
	Strict bool
}

// Sessions keeps one kind of session in Redis: one key per session,
// Key + hex(sha256(id)), holding the session as JSON and expiring with
// it. The key is a hash of the cookie's id, so whoever reads Redis
// cannot sign in with what they read. Every replica shares them and they
// outlive restarts.
type Sessions[T any] struct {
	rdb  redis.UniversalClient
	kind SessionKind
}

// NewSessions returns the sessions of kind in rdb.
func NewSessions[T any](rdb redis.UniversalClient, kind SessionKind) *Sessions[T] {
	return &Sessions[T]{rdb: rdb, kind: kind}
}

// TTL is SessionKind.TTL.
func (s *Sessions[T]) TTL() time.Duration { return s.kind.TTL }

// Key is the Redis key of the session id names.
func (s *Sessions[T]) Key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.kind.Key + hex.EncodeToString(sum[:])
}

// NewID is a new session's id: 256 random bits, the cookie's value.
func NewID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Create stores v under a new id for TTL, with also's commands (given
// the session's key) in the same round trip, and returns the id.
func (s *Sessions[T]) Create(ctx context.Context, v T, also func(p redis.Pipeliner, key string)) (string, error) {
	var id string
	var answer func() error
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if id, answer = s.QueueCreate(ctx, p, v); id != "" && also != nil {
			also(p, s.Key(id))
		}
		return nil
	})
	if id == "" {
		return "", answer() // not encoded: nothing was sent
	}
	if err != nil {
		return "", fmt.Errorf("%s: session: %w", s.kind.Name, err)
	}
	return id, nil
}

// QueueCreate queues Create's command on p, a pipeline of the store's
// Redis (the reading page's sign-in shares the read path's, issue 50):
// id is the new session's (its key Key(id)), and answer is Create's
// error once p has run.
func (s *Sessions[T]) QueueCreate(ctx context.Context, p redis.Pipeliner, v T) (id string, answer func() error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", func() error { return fmt.Errorf("%s: encode session: %w", s.kind.Name, err) }
	}
	id = NewID()
	set := p.Set(ctx, s.Key(id), raw, s.kind.TTL)
	return id, func() error {
		if err := set.Err(); err != nil {
			return fmt.Errorf("%s: session: %w", s.kind.Name, err)
		}
		return nil
	}
}

// Put stores v under id until ttl passes.
func (s *Sessions[T]) Put(ctx context.Context, id string, v T, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: encode session: %w", s.kind.Name, err)
	}
	if err := s.rdb.Set(ctx, s.Key(id), b, ttl).Err(); err != nil {
		return fmt.Errorf("%s: redis set session: %w", s.kind.Name, err)
	}
	return nil
}

// Get returns the session stored under id; ok is false when there is
// none (never stored, expired or deleted). A Rolling kind's end is
// pushed back by TTL.
func (s *Sessions[T]) Get(ctx context.Context, id string) (v T, ok bool, err error) {
	return s.decode(s.get(ctx, s.rdb, id))
}

// QueueGet queues Get's command on p, a pipeline of the store's Redis
// (the reading page's open shares it with the read path's, issue 50);
// answer is Get's once p has run.
func (s *Sessions[T]) QueueGet(ctx context.Context, p redis.Pipeliner, id string) (answer func() (T, bool, error)) {
	get := s.get(ctx, p, id)
	return func() (T, bool, error) { return s.decode(get) }
}

// decode is the session get answered.
func (s *Sessions[T]) decode(get *redis.StringCmd) (v T, ok bool, err error) {
	raw, err := get.Bytes()
	if errors.Is(err, redis.Nil) {
		return v, false, nil
	}
	if err != nil {
		return v, false, fmt.Errorf("%s: redis get session: %w", s.kind.Name, err)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		var zero T
		if s.kind.Strict {
			return zero, false, fmt.Errorf("%s: session: %w", s.kind.Name, err)
		}
		return zero, false, nil
	}
	return v, true, nil
}

// get is the session's GET, a GETEX when Rolling.
func (s *Sessions[T]) get(ctx context.Context, c redis.StringCmdable, id string) *redis.StringCmd {
	if s.kind.Rolling {
		return c.GetEx(ctx, s.Key(id), s.kind.TTL)
	}
	return c.Get(ctx, s.Key(id))
}

// Delete removes the session under id: sign-out, everywhere.
func (s *Sessions[T]) Delete(ctx context.Context, id string) error {
	if err := s.rdb.Del(ctx, s.Key(id)).Err(); err != nil {
		return fmt.Errorf("%s: redis delete session: %w", s.kind.Name, err)
	}
	return nil
}

// DashboardSessions are the dashboard's sessions, access.SessionStore:
// "<prefix>:session:<sha256(id)>", each lasting what access.Identities
// puts (it rolls them itself); one that does not decode is none.
func DashboardSessions(rdb redis.UniversalClient, prefix string) *Sessions[access.Session] {
	return NewSessions[access.Session](rdb, SessionKind{Name: "access", Key: prefix + ":session:"})
}
