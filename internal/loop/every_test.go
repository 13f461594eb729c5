package loop

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestEvery: Every's first turn comes one interval after the start,
// EveryFromStart's at the start; the next every interval after the
// start (at once after a turn longer than that), and none once ctx
// ended.
func TestEvery(t *testing.T) {
	m := time.Minute
	tests := []struct {
		name  string
		every func(context.Context, time.Duration, func(context.Context))
		// slow is how long the first turn takes.
		slow time.Duration
		want []time.Duration
	}{
		{"Every", Every, 0, []time.Duration{m, 2 * m, 3 * m}},
		{"EveryFromStart", EveryFromStart, 0, []time.Duration{0, m, 2 * m, 3 * m}},
		{"EveryFromStart, a slow first turn", EveryFromStart, m + m/2, []time.Duration{0, m + m/2, 2 * m, 3 * m}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				start := time.Now()
				var at []time.Duration
				done := make(chan struct{})
				go func() {
					defer close(done)
					tt.every(ctx, m, func(context.Context) {
						at = append(at, time.Since(start))
						if len(at) == 1 {
							time.Sleep(tt.slow)
						}
					})
				}()
				time.Sleep(3*m + time.Second)
				synctest.Wait()
				cancel()
				<-done
				if !slices.Equal(at, tt.want) {
					t.Errorf("turns at %v; want %v", at, tt.want)
				}
			})
		})
	}
}
