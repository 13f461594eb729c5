package loops

import (
	"context"
	"time"

	"github.com/yidu-io/yidu/internal/loop"
)

// Run ticks every interval until ctx ends: the round engine's loop. A
// tick never ends it: each round runs under its own recover (Tick), and
// the tick itself under one more (a panic in planning is logged and
// counted, and the next tick comes).
func (r *Rounds) Run(ctx context.Context, every time.Duration) error {
	loop.EveryFromStart(ctx, every, func(ctx context.Context) {
		_ = r.guard().Run(ctx, "follow-up tick", r.Tick)
	})
	return ctx.Err()
}
