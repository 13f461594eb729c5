package jitter

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestApplyWith(t *testing.T) {
	tests := []struct {
		name string
		d    time.Duration
		rnd  float64
		want time.Duration
	}{
		{"lowest", time.Second, 0, 500 * time.Millisecond},
		{"middle", time.Second, 0.5, 750 * time.Millisecond},
		{"highest", time.Second, 0.999999, time.Second - time.Microsecond/2},
		{"zero", 0, 0.5, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ApplyWith(tt.d, func() float64 { return tt.rnd })
			if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Errorf("ApplyWith(%v, %v) = %v; want %v", tt.d, tt.rnd, got, tt.want)
			}
		})
	}
}

func TestApplyBounds(t *testing.T) {
	seen := map[time.Duration]bool{}
	for range 1000 {
		got := Apply(100 * time.Millisecond)
		if got < 50*time.Millisecond || got > 100*time.Millisecond {
			t.Fatalf("Apply(100ms) = %v; want within [50ms, 100ms]", got)
		}
		seen[got] = true
	}
	if len(seen) < 100 {
		t.Errorf("Apply gave %d distinct values in 1000 calls; want them spread", len(seen))
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v; want nil after the wait", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep(cancelled, 1h) = %v; want context.Canceled", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("Sleep(cancelled, 1h) took %v; want it cut short", d)
	}
}
