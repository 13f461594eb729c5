package access

import (
	"context"
	"sync"
	"time"
)

// maxSessions bounds the sessions of one process without a store.
const maxSessions = 10_000

// SessionStore keeps sign-in sessions by id: the web edge's Redis
// sessions (internal/webedge.DashboardSessions) share them between
// dashboard replicas and keep them across restarts; without one
// (IdentityOptions.Sessions nil) they live in this process's memory.
type SessionStore interface {
	// Put stores s under id until ttl passes.
	Put(ctx context.Context, id string, s Session, ttl time.Duration) error
	// Get returns the session stored under id; ok is false when there is
	// none (never stored, expired or deleted).
	Get(ctx context.Context, id string) (s Session, ok bool, err error)
	// Delete removes the session: sign-out, everywhere.
	Delete(ctx context.Context, id string) error
}

// Session is a signed-in person's session as stored.
type Session struct {
	User string `json:"user"`
	// CSRF is the token the page sends back with every POST.
	CSRF    string    `json:"csrf"`
	Expires time.Time `json:"expires"`
	// Cred names the password user's credential the session was opened
	// with (a hash of its bcrypt hash): a user removed and added again
	// with another password within session_ttl does not get the old
	// sessions back (issue 38). Empty for a WeCom member.
	Cred string `json:"cred,omitempty"`
}

// memSessions is the SessionStore of a single dashboard process.
type memSessions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]Session
}

func newMemSessions(now func() time.Time) *memSessions {
	return &memSessions{now: now, m: map[string]Session{}}
}

func (m *memSessions) Put(_ context.Context, id string, s Session, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxSessions {
		now := m.now()
		for k, v := range m.m {
			if !now.Before(v.Expires) {
				delete(m.m, k)
			}
		}
		for k := range m.m { // still full: drop an arbitrary one
			if len(m.m) < maxSessions {
				break
			}
			delete(m.m, k)
		}
	}
	m.m[id] = s
	return nil
}

func (m *memSessions) Get(_ context.Context, id string) (Session, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[id]
	return s, ok, nil
}

func (m *memSessions) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, id)
	return nil
}
