package access

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// maxLimiters bounds the buckets of each sign-in limit.
const maxLimiters = 10_000

// Sign-in limits (docs/reliability.md, Hostile use). Unknown and known
// names go through exactly the same steps, so an answer never tells
// whether a name exists:
//
//   - per client address, every attempt: 10 at once, then one per 6 s
//     (an office behind one NAT address signs in together);
//   - per (name, address), failures: 5, then one per 12 s;
//   - per name from every address, failures: 10, then one per 6 s. A name
//     past it is "under attack": an address with a recent failure for it
//     is refused, but an address with none still gets its try, so a
//     stranger's flood never locks the real person out.
//
// A refusal is ErrRateLimited before bcrypt runs; an attempt that runs
// bcrypt compares an unknown name against a dummy hash of the users'
// cost, so it takes as long as a wrong password.
var (
	perAddress = bucketRule{burst: 10, every: 6 * time.Second}
	perPair    = bucketRule{burst: 5, every: 12 * time.Second}
	perName    = bucketRule{burst: 10, every: 6 * time.Second}
)

// bucketRule is a token bucket's size and refill.
type bucketRule struct {
	burst float64
	every time.Duration
}

// bucket is a token bucket that can give a token back (a success).
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) level(r bucketRule, now time.Time) float64 {
	if now.After(b.at) {
		b.tokens = min(r.burst, b.tokens+float64(now.Sub(b.at))/float64(r.every))
		b.at = now
	}
	return b.tokens
}

// take takes a token if there is one.
func (b *bucket) take(r bucketRule, now time.Time) bool {
	if b.level(r, now) < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) give(r bucketRule) { b.tokens = min(r.burst, b.tokens+1) }

// buckets are the buckets of one rule by key, at most maxLimiters: when
// full, the buckets back at their burst (equal to new ones) are dropped;
// if none is, an arbitrary one (failOpen, a flood of addresses: the
// attacker has those anyway) or the new key starts empty (a flood of
// names: an unseen name is then "under attack", which delays nobody with
// the right password).
type buckets struct {
	rule     bucketRule
	failOpen bool
	m        map[string]*bucket
}

func newBuckets(r bucketRule, failOpen bool) *buckets {
	return &buckets{rule: r, failOpen: failOpen, m: map[string]*bucket{}}
}

func (bs *buckets) get(key string, now time.Time) *bucket {
	if b := bs.m[key]; b != nil {
		return b
	}
	tokens := bs.rule.burst
	if len(bs.m) >= maxLimiters {
		for k, b := range bs.m {
			if b.level(bs.rule, now) >= bs.rule.burst {
				delete(bs.m, k)
			}
		}
		if len(bs.m) >= maxLimiters {
			if !bs.failOpen {
				tokens = 0
			}
			for k := range bs.m {
				delete(bs.m, k)
				break
			}
		}
	}
	b := &bucket{tokens: tokens, at: now}
	bs.m[key] = b
	return b
}

// Sign-in with WeCom limits (issue 38): each start stores a state in
// Redis for StateTTL and each callback with a state may cost a call of
// auth/getuserinfo on the login app's token, whose quota the tracked
// links share. Both routes together are limited per client address and
// in total, before anything is stored, called or audited.
var (
	// wecomPerAddress: an office behind one NAT address signing in at
	// nine (two requests per sign-in).
	wecomPerAddress = bucketRule{burst: 40, every: time.Second}
	// wecomTotal: every address together.
	wecomTotal = bucketRule{burst: 400, every: 50 * time.Millisecond}
)

// WeComLimiter admits WeCom sign-in requests per address and in total
// (the dashboard answers 429 beyond).
type WeComLimiter struct {
	now   func() time.Time
	mu    sync.Mutex
	total *rate.Limiter
	addrs map[string]*rate.Limiter
}

// NewWeComLimiter returns the limiter of WeCom sign-in requests.
func NewWeComLimiter(now func() time.Time) *WeComLimiter {
	return &WeComLimiter{now: now, addrs: map[string]*rate.Limiter{},
		total: rate.NewLimiter(rate.Every(wecomTotal.every), int(wecomTotal.burst))}
}

// Allow takes one request of ip; false when ip or everyone is over.
func (l *WeComLimiter) Allow(ip string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.addrs[ip]
	if !ok {
		if len(l.addrs) >= maxLimiters {
			// Full: forget the addresses back at their burst (equal to
			// new ones); if none is, start over (the total still holds).
			for k, v := range l.addrs {
				if v.TokensAt(now) >= wecomPerAddress.burst {
					delete(l.addrs, k)
				}
			}
			if len(l.addrs) >= maxLimiters {
				clear(l.addrs)
			}
		}
		a = rate.NewLimiter(rate.Every(wecomPerAddress.every), int(wecomPerAddress.burst))
		l.addrs[ip] = a
	}
	if a.TokensAt(now) < 1 {
		return false
	}
	if !l.total.AllowN(now, 1) {
		return false
	}
	return a.AllowN(now, 1)
}
