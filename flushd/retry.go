package flushd

import (
	"context"
	"time"

	"github.com/yidu-io/yidu/internal/jitter"
)

// backoff is a capped exponential delay between retries of a failed flush.
type backoff struct {
	min, max time.Duration
	// rnd draws the jitter (values in [0, 1]); nil is math/rand. Tests
	// pin it.
	rnd func() float64
}

var defaultBackoff = backoff{min: 100 * time.Millisecond, max: 10 * time.Second}

// delay returns the cap of the wait after the n-th consecutive failure
// (n ≥ 1); wait draws the actual wait below it.
func (b backoff) delay(n int) time.Duration {
	d := b.min
	for i := 1; i < n && d < b.max; i++ {
		d *= 2
	}
	return min(d, b.max)
}

// wait is the jittered wait after the n-th consecutive failure, in
// [delay(n)/2, delay(n)]: flushd instances that failed on the same MySQL
// outage come back spread out.
func (b backoff) wait(n int) time.Duration {
	if b.rnd != nil {
		return jitter.ApplyWith(b.delay(n), b.rnd)
	}
	return jitter.Apply(b.delay(n))
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
		if jitter.Sleep(ctx, b.wait(n)) != nil {
			return err
		}
	}
}
