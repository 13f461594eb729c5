package callback

import (
	"container/list"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter is a token bucket per corp+UserID, bounded to max members: a
// flood of distinct (signed, so WeCom-issued) UserIDs cannot grow it without
// limit, it forgets the least recently seen member instead.
type limiter struct {
	rate  rate.Limit
	burst int
	max   int

	mu  sync.Mutex
	m   map[memberKey]*list.Element
	lru list.List // of *memberBucket, most recent first
}

type memberKey struct{ corpID, userID string }

type memberBucket struct {
	key memberKey
	lim *rate.Limiter
}

func newLimiter(r rate.Limit, burst, max int) *limiter {
	return &limiter{rate: r, burst: burst, max: max, m: make(map[memberKey]*list.Element)}
}

// allow takes a token from the member's bucket at now.
func (l *limiter) allow(corpID, userID string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := memberKey{corpID, userID}
	if e, ok := l.m[k]; ok {
		l.lru.MoveToFront(e)
		return e.Value.(*memberBucket).lim.AllowN(now, 1)
	}
	if l.lru.Len() >= l.max {
		old := l.lru.Back()
		delete(l.m, old.Value.(*memberBucket).key)
		l.lru.Remove(old)
	}
	// Clone: the strings share memory with the whole decrypted message.
	k = memberKey{strings.Clone(corpID), strings.Clone(userID)}
	b := &memberBucket{key: k, lim: rate.NewLimiter(l.rate, l.burst)}
	l.m[k] = l.lru.PushFront(b)
	return b.lim.AllowN(now, 1)
}

// len returns the number of members with a bucket.
func (l *limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}
