package progress

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestCacheStale checks the department cache's refresh: warm loads before
// the first get, an expired entry answers at once while one background
// load replaces it, and a failed reload keeps the old value.
func TestCacheStale(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var loads atomic.Int64
	release := make(chan struct{}, 10)
	fail := atomic.Bool{}
	c := newCache(clock, time.Minute, 10, func(ctx context.Context, key string) (int64, error) {
		<-release
		n := loads.Add(1)
		if fail.Load() {
			return 0, errors.New("directory down")
		}
		return n, nil
	})
	c.stale = true
	ctx := context.Background()

	c.warm(ctx, "corp")
	release <- struct{}{}
	waitFor(t, "the cache to reload", func() bool { c.mu.Lock(); defer c.mu.Unlock(); _, ok := c.entries["corp"]; return ok })
	if v, err := c.get(ctx, "corp"); err != nil || v != 1 {
		t.Fatalf("get after warm = %d, %v; want 1 (no second load)", v, err)
	}

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	// Expired: the old value answers without waiting for the load, which
	// is held back until released.
	if v, err := c.get(ctx, "corp"); err != nil || v != 1 {
		t.Fatalf("get of an expired entry = %d, %v; want the stale 1 at once", v, err)
	}
	release <- struct{}{}
	waitFor(t, "the cache to reload", func() bool { v, _ := c.get(ctx, "corp"); return v == 2 })
	if n := loads.Load(); n != 2 {
		t.Errorf("loads = %d; want 2", n)
	}

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	fail.Store(true)
	if v, err := c.get(ctx, "corp"); err != nil || v != 2 {
		t.Fatalf("get of an expired entry = %d, %v; want the stale 2", v, err)
	}
	release <- struct{}{}
	waitFor(t, "the cache to reload", func() bool { return loads.Load() == 3 })
	if v, err := c.get(ctx, "corp"); err != nil || v != 2 {
		t.Errorf("get after a failed reload = %d, %v; want the old 2", v, err)
	}
	release <- struct{}{} // the reload that last get started
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testenv.WaitFor(tb, 15*time.Second, what, cond)
}
