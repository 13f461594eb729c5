package dashboard

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Limits on what one principal may hold at once (docs/reliability.md,
// "Hostile use"): live streams and heavy queries are counted per principal
// so that one token or one person at its maximum leaves room for the
// others; the global bounds stay behind them.
const (
	// DefaultMaxStreams bounds the live streams of the whole dashboard.
	DefaultMaxStreams = 256
	// DefaultMaxStreamsPerPrincipal bounds one principal's live streams: a
	// person with a few tabs open, a wall screen, a script.
	DefaultMaxStreamsPerPrincipal = 8
	// DefaultStreamWriteTimeout is how long one event may take to reach a
	// client: one that does not take its events is dropped, its slot freed.
	DefaultStreamWriteTimeout = 30 * time.Second
	// DefaultStreamRecheck is how often a live stream checks its caller's
	// session and scope again (issue 38: at least every 30 s).
	DefaultStreamRecheck = 30 * time.Second
	// DefaultMaxQueries bounds the heavy queries (recipients, departments,
	// export) of the whole dashboard at once; with the default MySQL pool of
	// 64 it leaves 48 connections to flushd (and to the receiver where it
	// shares the pool).
	DefaultMaxQueries = 16
	// DefaultMaxQueriesPerPrincipal bounds one principal's heavy queries at
	// once.
	DefaultMaxQueriesPerPrincipal = 4
	// DefaultQueryWait is how long a heavy query waits for one of the
	// dashboard's MaxQueries slots before it is answered 503.
	DefaultQueryWait = 2 * time.Second
)

// retryAfter is the Retry-After of a refusal for holding too much: the
// usual heavy query or stream turnover is well under it.
var retryAfter = strconv.Itoa(5)

// perKey counts what each key holds, up to max each. The map holds only
// keys that hold something, so it is bounded by the global limits behind.
type perKey struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func newPerKey(max int) *perKey { return &perKey{max: max, n: map[string]int{}} }

// acquire takes one slot of key; false when key holds max already.
func (p *perKey) acquire(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[key] >= p.max {
		return false
	}
	p.n[key]++
	return true
}

// release gives back a slot acquire took.
func (p *perKey) release(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[key] <= 1 {
		delete(p.n, key)
		return
	}
	p.n[key]--
}

// acquireOwn takes one slot of the request's principal and returns its
// release; when the principal holds max already it answers 429 with msg
// (and Retry-After) and returns nil.
func (p *perKey) acquireOwn(w http.ResponseWriter, r *http.Request, msg string) (release func()) {
	who := principalFrom(r.Context()).Key()
	if !p.acquire(who) {
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusTooManyRequests, msg)
		return nil
	}
	return func() { p.release(who) }
}

// acquireStream takes a slot of slots for a live stream; when none is
// free it answers 503 with Retry-After and returns nil.
func acquireStream(w http.ResponseWriter, slots chan struct{}) (release func()) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }
	default:
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "too many live streams")
		return nil
	}
}

// held is how many slots key holds.
func (p *perKey) held(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[key]
}

// heavyQuery admits a query that may scan a whole corp (recipients search,
// departments, export): at most MaxQueriesPerPrincipal at once per
// principal (429 beyond, at once) and MaxQueries in all (a query waits up
// to QueryWait for a slot, then 503). The dashboard so holds at most
// MaxQueries MySQL connections for them, and one principal's flood fails
// its own searches, not the others' nor flushd's (the receiver in yidu
// serve has a pool of its own besides).
func (s *Server) heavyQuery(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		release := s.userQueries.acquireOwn(w, r, "too many queries of yours at once; wait for one to finish")
		if release == nil {
			return
		}
		defer release()
		wait := time.NewTimer(s.queryWait)
		defer wait.Stop()
		select {
		case s.queries <- struct{}{}:
			defer func() { <-s.queries }()
		case <-wait.C:
			w.Header().Set("Retry-After", retryAfter)
			writeError(w, http.StatusServiceUnavailable, "the dashboard is busy, try again shortly")
			return
		case <-r.Context().Done():
			return
		}
		next.ServeHTTP(w, r)
	})
}

// exportSlot admits an export only while exports hold less than half
// the heavy-query slots: an export lasts as long as its client reads, so
// slow exports could otherwise hold them all and starve every search
// and department view (issue 38). Beyond it, 503 at once.
func (s *Server) exportSlot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.exports <- struct{}{}:
			defer func() { <-s.exports }()
		default:
			w.Header().Set("Retry-After", retryAfter)
			writeError(w, http.StatusServiceUnavailable, "too many exports at once, try again shortly")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// limitWeCom answers 429 for a WeCom sign-in request over its limits
// (nothing stored, called or audited) and reports whether it may go on.
func (s *Server) limitWeCom(w http.ResponseWriter, r *http.Request) bool {
	if s.wecomLimits.Allow(s.clientIP(r)) {
		return true
	}
	s.met.logins.WithLabelValues("rate_limited").Inc()
	w.Header().Set("Retry-After", retryAfter)
	s.renderLogin(w, r, http.StatusTooManyRequests, "login.too_many")
	return false
}
