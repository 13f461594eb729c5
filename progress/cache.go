package progress

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// cache keeps values for ttl by key; concurrent misses of one key share
// one load, which runs detached from any single caller's cancellation so
// one caller giving up does not fail the others. At max entries it starts
// over (a bound, not an LRU: entries are cheap to load again).
type cache[V any] struct {
	now  func() time.Time
	ttl  time.Duration
	max  int
	load func(ctx context.Context, key string) (V, error)
	// stale: an expired entry is still answered while one load in the
	// background replaces it, so only a key's very first get waits.
	stale bool

	mu      sync.Mutex
	entries map[string]cacheEntry[V]
	flight  singleflight.Group
}

type cacheEntry[V any] struct {
	v       V
	expires time.Time
}

func newCache[V any](now func() time.Time, ttl time.Duration, max int, load func(context.Context, string) (V, error)) *cache[V] {
	return &cache[V]{now: now, ttl: ttl, max: max, load: load, entries: map[string]cacheEntry[V]{}}
}

func (c *cache[V]) get(ctx context.Context, key string) (V, error) {
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && c.now().Before(e.expires) {
		return e.v, nil
	}
	if ok && c.stale {
		c.warm(ctx, key)
		return e.v, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) { return c.fill(ctx, key) })
	if err != nil {
		var zero V
		return zero, err
	}
	return v.(V), nil
}

// warm loads key in the background (joining a load under way), so that
// the next get finds it; an entry already there keeps answering until the
// load replaces it. A failed load leaves what was there.
func (c *cache[V]) warm(ctx context.Context, key string) {
	c.flight.DoChan(key, func() (any, error) { return c.fill(ctx, key) })
}

func (c *cache[V]) fill(ctx context.Context, key string) (any, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), warmTimeout)
	defer cancel()
	v, err := c.load(ctx, key)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.entries) >= c.max {
		clear(c.entries)
	}
	c.entries[key] = cacheEntry[V]{v: v, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

// warmTimeout bounds one load, which no single caller's cancellation
// ends.
const warmTimeout = 2 * time.Minute
