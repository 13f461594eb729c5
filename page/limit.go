package page

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/wecom"
)

// Sign-in bounds (issues 46 and 50). WeCom does not limit
// auth/getuserinfo for a valid code ("若code合法则不受上述频率限制", doc path
// 90454), so a member's sign-in needs no rationing: what is bounded is
// a flood from one client address (sign-ins started, each writing a
// state to Redis) and failed exchanges (forged, replayed or expired
// codes and states), per address and, for the codes WeCom refuses, in
// all. A sign-in beyond a bound is never refused: the member gets a
// small 请稍候 page that comes back by itself after a jittered second or
// few, and goes through once the flood has passed. The page's other
// requests never wait for sign-ins.

// Sign-in bounds' defaults.
const (
	// DefaultSignInRate is Options.SignInRate's default: sign-ins started
	// a second on one receiver, all clients together (burst twice that).
	DefaultSignInRate = 1000
	// DefaultClientSignInRate is Options.ClientSignInRate's default:
	// sign-ins started a second from one client address (burst four
	// times that). A carrier's or an office's NAT puts many members
	// behind one address: behind it they wait their turn, never refused.
	DefaultClientSignInRate = 50
	// DefaultFailedSignInRate is Options.FailedSignInRate's default:
	// failed exchanges a second from one client address (burst 20).
	DefaultFailedSignInRate = 1
	// refusedCodeRate bounds the codes WeCom refused, all clients: each
	// cost a call of the corp's 10,000 a minute (doc path 90454).
	refusedCodeRate = 100
	// maxClients bounds the addresses tracked at once.
	maxClients = 1 << 16
)

// buckets are token buckets by client address, idle ones forgotten (a
// bucket idle for long is full again: the same as a new one).
type buckets struct {
	mu    sync.Mutex
	rate  rate.Limit
	burst int
	m     map[netip.Addr]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

func newBuckets(r float64, burst int) *buckets {
	return &buckets{rate: rate.Limit(r), burst: max(1, burst), m: map[netip.Addr]*bucket{}}
}

func (b *buckets) get(a netip.Addr, now time.Time) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.m[a]
	if !ok {
		if len(b.m) >= maxClients {
			full := time.Duration(float64(b.burst)/float64(b.rate)*float64(time.Second)) + time.Second
			for a, k := range b.m {
				if now.Sub(k.used) > full {
					delete(b.m, a)
				}
			}
			if len(b.m) >= maxClients {
				// Still full: forget all (the global bounds still hold).
				clear(b.m)
			}
		}
		k = &bucket{lim: rate.NewLimiter(b.rate, b.burst)}
		b.m[a] = k
	}
	k.used = now
	return k.lim
}

// allow takes a token of a's bucket.
func (b *buckets) allow(a netip.Addr, now time.Time) bool { return b.get(a, now).AllowN(now, 1) }

// empty reports whether a's bucket has no token left, taking none.
func (b *buckets) empty(a netip.Addr, now time.Time) bool { return b.get(a, now).TokensAt(now) < 1 }

// limits are a receiver's sign-in bounds.
type limits struct {
	started  *rate.Limiter // sign-ins started, all clients
	clients  *buckets      // sign-ins started, per client
	failures *buckets      // failed exchanges, per client
	refused  *rate.Limiter // codes WeCom refused, all clients
}

func newLimits(o Options) *limits {
	return &limits{
		started:  rate.NewLimiter(rate.Limit(o.SignInRate), max(1, int(2*o.SignInRate))),
		clients:  newBuckets(o.ClientSignInRate, int(4*o.ClientSignInRate)),
		failures: newBuckets(o.FailedSignInRate, 20),
		refused:  rate.NewLimiter(refusedCodeRate, 2*refusedCodeRate),
	}
}

// wecomBusy reports whether err is WeCom's frequency refusal: 45009 (api
// freq out of limit) or 45033 (api concurrent out of limit), global
// error codes, doc path 90313; see 90454 for the limits.
func wecomBusy(err error) bool {
	var e *wecom.APIError
	return errors.As(err, &e) && (e.Code == 45009 || e.Code == 45033)
}

// exchange asks WeCom who code's member is, backing off (jittered,
// doubling from 200 ms) while WeCom answers 45009 or 45033, within ctx
// and at most four tries.
func (s *Server) exchange(ctx context.Context, a App, code string) (string, error) {
	wait := 200 * time.Millisecond
	for try := 1; ; try++ {
		userID, err := s.oauth.UserID(ctx, a.CorpID, a.AgentID, code)
		if err == nil || !wecomBusy(err) || try == 4 {
			return userID, err
		}
		s.m.busy.Inc()
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-t.C:
		}
		wait *= 2
	}
}

// deferSignIn answers a sign-in put off: 请稍候, coming back to target
// by itself after a jittered 1 to 4 seconds (a meta refresh: the page's
// policy runs no inline script). 429 with Retry-After, never 503.
func (s *Server) deferSignIn(w http.ResponseWriter, r *http.Request, target, why string) {
	s.m.deferred.WithLabelValues(why).Inc()
	secs := 1 + rand.N(4)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	if err := s.tmpl.ExecuteTemplate(w, "wait.html", struct {
		Seconds int
		Target  string
	}{secs, target}); err != nil {
		s.log.ErrorContext(r.Context(), "page: render", "err", err)
	}
}

// metrics are the page's series.
type metrics struct {
	deferred *prometheus.CounterVec
	busy     prometheus.Counter
}

// Reasons a sign-in was put off.
var deferReasons = []string{"client", "all", "failures", "wecom_busy", "unavailable"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	m := &metrics{
		deferred: f.CounterVec("yidu_page_signin_deferred_total",
			"Reading page sign-ins put off (请稍候, retried by the browser), by reason: client (one address's sign-ins), all (the receiver's), failures (one address's failed exchanges, or the codes WeCom refused), wecom_busy (WeCom's 45009/45033), unavailable (Redis or the directory failing).", "reason"),
		busy: f.Counter("yidu_page_wecom_busy_total", "auth/getuserinfo answers 45009 or 45033 (retried with backoff)."),
	}
	metric.Preset(m.deferred.MetricVec, deferReasons)
	return m, f.Err("page")
}
