package process

import (
	"context"
	"time"
)

// every runs turn every interval until ctx ends (the first turn one
// interval after the start): the body of the loops that each replica
// runs on a ticker.
func every(ctx context.Context, interval time.Duration, turn func(ctx context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		turn(ctx)
	}
}
