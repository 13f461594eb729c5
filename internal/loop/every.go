package loop

import (
	"context"
	"time"
)

// Every runs turn every interval until ctx ends (the first turn one
// interval after the start; a turn longer than interval is followed by
// the next at once, as time.Ticker drops the ticks it missed): the body
// of the loops that each replica runs on a ticker.
func Every(ctx context.Context, interval time.Duration, turn func(ctx context.Context)) {
	every(ctx, interval, false, turn)
}

// EveryFromStart is Every with a first turn at the start: the ticker
// starts with it, so the turns still come every interval from the start.
func EveryFromStart(ctx context.Context, interval time.Duration, turn func(ctx context.Context)) {
	every(ctx, interval, true, turn)
}

func every(ctx context.Context, interval time.Duration, now bool, turn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if now {
			turn(ctx)
		}
		now = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
