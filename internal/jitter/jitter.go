// Package jitter spreads retries out. When a dependency fails, every
// client that used it fails at the same moment; with plain exponential
// backoff they all come back at the same moments too, in lockstep, and
// hit the recovering server together. Jitter makes each wait a random
// part of the backoff ("equal jitter": at least half of it, so a retry
// still backs off). Sleep is the wait itself, cut short by its context.
package jitter

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d or until ctx ends, then returns ctx's error (nil after
// the full wait).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Apply returns a random duration in [d/2, d].
func Apply(d time.Duration) time.Duration { return ApplyWith(d, rand.Float64) }

// ApplyWith is Apply with the random source rnd (values in [0, 1]),
// for deterministic tests.
func ApplyWith(d time.Duration, rnd func() float64) time.Duration {
	if d <= 0 {
		return d
	}
	half := d / 2
	return half + time.Duration(rnd()*float64(d-half))
}
