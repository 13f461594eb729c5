package dashboard

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
	v, err, _ := c.flight.Do(key, func() (any, error) {
		v, err := c.load(context.WithoutCancel(ctx), key)
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
	})
	if err != nil {
		var zero V
		return zero, err
	}
	return v.(V), nil
}
