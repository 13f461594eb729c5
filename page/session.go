package page

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/internal/webedge"
)

// Readers' sessions (issue 50). A member signs in once per corp and
// reads every notice of the corp for DefaultSessionTTL, rolling: each use
// pushes the end back, so a member who reads at least once a month never
// signs in again. Sessions are in Redis, shared by the receivers and kept
// across their restarts. Each member's sessions are indexed by uid, so the
// directory can end them when the member leaves (Sessions.Revoke, called
// by idmap's sync and change_contact delete_user).
//
// What a page needs of the reader (uid, name, whether they are in the
// directory and still there) is kept in the session at sign-in, so an
// open costs no MySQL; a member who leaves loses the session.

// DefaultSessionTTL is Options.SessionTTL's default: 30 days, rolling.
const DefaultSessionTTL = 30 * 24 * time.Hour

// session is a reader's sign-in, kept in Redis under its id's hash.
type session struct {
	Corp   string `json:"corp"`
	UserID string `json:"userid"`
	// UID and Name are the member's at sign-in; Status is "" for a member
	// of the directory, "left" or "unknown" (kept so the page answers
	// them 404 with an audit row, as for a non-recipient).
	UID    uint32 `json:"uid,omitempty"`
	Name   string `json:"name,omitempty"`
	Status string `json:"status,omitempty"`
	// Reader: the session carries the reader (uid 0 is a uid); false for
	// a session made before it did.
	Reader bool `json:"reader,omitempty"`
}

// Session statuses.
const (
	statusLeft    = "left"
	statusUnknown = "unknown"
)

// Sessions keeps readers' sessions in Redis: the web edge's sessions
// (internal/webedge) of the page's kind, rolling, with an index of each
// member's sessions.
type Sessions struct {
	rdb    redis.UniversalClient
	prefix string
	store  *webedge.Sessions[session]
}

// NewSessions returns the readers' sessions in rdb under prefix, each
// lasting ttl from its last use (0: DefaultSessionTTL).
func NewSessions(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &Sessions{rdb: rdb, prefix: prefix, store: webedge.NewSessions[session](rdb, webedge.SessionKind{
		Name: "page", Key: prefix + "page:session:", TTL: ttl, Rolling: true, Strict: true})}
}

// TTL is how long a session lasts from its last use.
func (s *Sessions) TTL() time.Duration { return s.store.TTL() }

// indexKey holds the session keys of one member.
func (s *Sessions) indexKey(corp string, uid uint32) string {
	return s.prefix + "page:sessions:{" + corp + "}:" + strconv.FormatUint(uint64(uid), 10)
}

// create stores sess and returns its id (the cookie's value), in a
// round trip of its own.
func (s *Sessions) create(ctx context.Context, sess session) (string, error) {
	var id string
	var answer func() error
	_, _ = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { // each command's error is answer's
		id, answer = s.queueCreate(ctx, p, sess)
		return nil
	})
	if err := answer(); err != nil {
		return "", err
	}
	return id, nil
}

// queueCreate queues create's commands on p (the sign-in's, in the read
// path's shared pipeline); answer is create's once p has run.
func (s *Sessions) queueCreate(ctx context.Context, p redis.Pipeliner, sess session) (id string, answer func() error) {
	id, set := s.store.QueueCreate(ctx, p, sess)
	if id == "" || !sess.Reader || sess.Status == statusUnknown {
		return id, set
	}
	idx := s.indexKey(sess.Corp, sess.UID)
	add := p.SAdd(ctx, idx, s.store.Key(id))
	exp := p.Expire(ctx, idx, s.TTL()+24*time.Hour)
	return id, func() error {
		if err := set(); err != nil {
			return err
		}
		if err := cmp.Or(add.Err(), exp.Err()); err != nil {
			return fmt.Errorf("page: session index: %w", err)
		}
		return nil
	}
}

// lookup returns the session id names and pushes its end back by the TTL.
func (s *Sessions) lookup(ctx context.Context, id string) (session, bool, error) {
	return s.store.Get(ctx, id)
}

// queueLookup queues lookup's command on p; answer is lookup's once p
// has run.
func (s *Sessions) queueLookup(ctx context.Context, p redis.Pipeliner, id string) (answer func() (session, bool, error)) {
	return s.store.QueueGet(ctx, p, id)
}

// revokedKey marks a member whose sessions were ended within RevokedTTL.
func (s *Sessions) revokedKey(corp string, uid uint32) string {
	return s.prefix + "page:revoked:{" + corp + "}:" + strconv.FormatUint(uint64(uid), 10)
}

// RevokedTTL is how long a revocation is remembered: a sign-in that
// began before it (from a copy of the directory, idmap's roster) and
// made its session after it asks the directory itself. It covers the
// roster's version check (idmap.RosterCheck) and the time a sync takes
// between marking members left and moving the directory's version.
const RevokedTTL = 10 * time.Minute

// queueRevoked queues on p whether uid's sessions were revoked within
// RevokedTTL; queued after a new session's index entry, it sees any
// revocation that missed the session.
func (s *Sessions) queueRevoked(ctx context.Context, p redis.Pipeliner, corp string, uid uint32) (answer func() (bool, error)) {
	ex := p.Exists(ctx, s.revokedKey(corp, uid))
	return func() (bool, error) {
		n, err := ex.Result()
		if err != nil {
			return false, fmt.Errorf("page: revoked: %w", err)
		}
		return n > 0, nil
	}
}

// end deletes the session id of sess and its index entry.
func (s *Sessions) end(ctx context.Context, sess session, id string) error {
	if err := s.store.Delete(ctx, id); err != nil {
		return err
	}
	if err := s.rdb.SRem(ctx, s.indexKey(sess.Corp, sess.UID), s.store.Key(id)).Err(); err != nil {
		return fmt.Errorf("page: session index: %w", err)
	}
	return nil
}

// Revoke ends every reading session of the corp's members uids (they
// left the company): their next open signs them in again, and the
// directory then answers them 404. Each member's revocation is marked
// for RevokedTTL first, so a sign-in racing it notices (queueRevoked).
func (s *Sessions) Revoke(ctx context.Context, corp string, uids []uint32) error {
	for _, uid := range uids {
		if err := s.rdb.Set(ctx, s.revokedKey(corp, uid), "1", RevokedTTL).Err(); err != nil {
			return fmt.Errorf("page: revoke sessions of %d: %w", uid, err)
		}
		idx := s.indexKey(corp, uid)
		keys, err := s.rdb.SMembers(ctx, idx).Result()
		if err != nil {
			return fmt.Errorf("page: revoke sessions of %d: %w", uid, err)
		}
		// One key a command: a cluster keeps them in different slots.
		if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range append(keys, idx) {
				p.Del(ctx, k)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("page: revoke sessions of %d: %w", uid, err)
		}
	}
	return nil
}

// SessionCookie is the name of the reading page's session cookie.
const SessionCookie = "yidu_read"

// Create makes a session of corp's member userID (uid, name), as a
// sign-in does, and returns its id, the value of SessionCookie; yidu-bench
// seeds the members who signed in before a storm with it.
func (s *Sessions) Create(ctx context.Context, corp, userID string, uid uint32, name string) (string, error) {
	return s.create(ctx, session{Corp: corp, UserID: userID, UID: uid, Name: name, Reader: true})
}
