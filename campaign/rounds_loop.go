package campaign

import (
	"context"
	"time"
)

// Run ticks every interval until ctx ends: the round engine's loop.
func (r *Rounds) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.Tick(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("follow-up tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
