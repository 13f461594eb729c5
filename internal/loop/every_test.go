package loop

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestEvery: the first turn comes one interval after the start, the
// next every interval after it, and none once ctx ended.
func TestEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		var at []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			Every(ctx, time.Minute, func(context.Context) { at = append(at, time.Since(start)) })
		}()
		time.Sleep(3*time.Minute + time.Second)
		synctest.Wait()
		cancel()
		<-done
		want := []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute}
		if len(at) != len(want) {
			t.Fatalf("turns at %v; want %v", at, want)
		}
		for i := range want {
			if at[i] != want[i] {
				t.Errorf("turn %d at %v; want %v", i, at[i], want[i])
			}
		}
	})
}
