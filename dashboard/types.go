package dashboard

import (
	"context"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/progress"
)

// Messages is what the dashboard needs from tracker.Registry, in the
// domain's types (package yidu), so neither side imports the other; cmd
// wires the concrete types in. What progress reads (the search, the
// archive to restore from, the read history, the MySQL scope check) and
// what campaign sends (reminders, recalls) come along for them.
type Messages interface {
	progress.Searcher
	progress.Archive
	progress.History
	progress.Reacher
	campaign.Registrar
	campaign.Messenger
	// GetMessage finds msgID within corps (nil: any).
	GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
	// SendOutcomes is the recorded state of m's send batches.
	SendOutcomes(ctx context.Context, corpID, msgID string) ([]yidu.BatchOutcome, error)
}

// Bitmaps is what the dashboard needs from bitmap.Store: what progress
// reads (live counts, each signal's too, within a View; the bitmaps; a
// way to put back keys that expired).
type Bitmaps = progress.Bitmaps

// Directory is what the dashboard needs from idmap.Mapper: what progress
// reads (the department tree, who the uids are); a Directory that is
// also a progress.UserDirectory gives names, departments and status.
type Directory = progress.Directory
