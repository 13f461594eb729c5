package process

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/tracker"
)

// receiptLoop sends the members' acknowledgement receipts flushd queued
// (tracker.Registry.SendReceipts, issue 48) every interval until ctx
// ends: every dashboard replica runs it, and each receipt is claimed by
// one. A failure is recovered, logged and counted by g
// (yidu_loop_*{loop="receipts"}); the next turn tries again.
func receiptLoop(ctx context.Context, t *tracker.Registry, g *loop.Guard, interval time.Duration) {
	host, _ := os.Hostname()
	owner := fmt.Sprintf("%s/%d", host, os.Getpid())
	loop.Every(ctx, interval, func(ctx context.Context) {
		_ = g.Run(ctx, "receipts", func(ctx context.Context) error {
			_, err := t.SendReceipts(ctx, owner)
			return err
		})
	})
}

// evidenceLog is the corp logs for campaign's approval steps and manual
// reminders: nil (no interface holding a nil *ledger.Ledger) without a
// ledger.
func (m *Main) evidenceLog() store.EvidenceLog {
	if m.Ledger == nil {
		return nil
	}
	return m.Ledger
}
