package flushd

import (
	"context"
	"time"
)

// backoff is a capped exponential delay between retries of a failed flush.
type backoff struct {
	min, max time.Duration
}

var defaultBackoff = backoff{min: 100 * time.Millisecond, max: 10 * time.Second}

// delay returns the wait after the n-th consecutive failure (n ≥ 1).
func (b backoff) delay(n int) time.Duration {
	d := b.min
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// retry calls fn until it succeeds or ctx ends, waiting b.delay between
// attempts; onRetry runs after each failure. It returns fn's last error
// when ctx ends first.
func retry(ctx context.Context, b backoff, fn func() error, onRetry func(error)) error {
	for n := 1; ; n++ {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		onRetry(err)
		t := time.NewTimer(b.delay(n))
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
