package dashboard

import (
	"context"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/progress"
)

// This file is the seam with tracker, bitmap and idmap (the package table in
// docs/architecture.md). The dashboard declares what it needs here, in the
// domain's types (package yidu), so neither side imports the other; cmd
// wires the concrete types in.

// Catalog reads the tracked messages, scoped to the caller's corps; what
// progress reads of them (the archive to restore from, the read history,
// the MySQL scope check) comes along, for progress.New.
type Catalog interface {
	// SearchVisible lists newest first the messages whose title contains
	// title (any case) and, when app is not empty, of that app; corps nil
	// means every corp. Empty title and app list every message.
	//
	// SearchVisible filters first, then pages (issue 38): keep decides
	// which messages the caller may see, and neither the page nor next
	// names one it refused.
	SearchVisible(ctx context.Context, corps []string, title, app, cursor string, limit int, keep func(yidu.Message) (bool, error)) (msgs []yidu.Message, next string, err error)
	// GetMessage finds msgID within corps (nil: any).
	GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
	progress.Archive
	progress.History
	progress.Reacher
}

// Registrar registers, sends, reminds and recalls; the only writes the
// dashboard asks for.
type Registrar interface {
	// RegisterAndSend registers reg and, with reg.Send, sends it and
	// reports every batch.
	RegisterAndSend(ctx context.Context, reg yidu.Registration) (yidu.Registered, error)
	Remind(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error)
	// Recall recalls m through WeCom and freezes its read count at read.
	Recall(ctx context.Context, m yidu.Message, read int64) (yidu.RecallReport, error)
	// SendOutcomes is the recorded state of m's send batches.
	SendOutcomes(ctx context.Context, corpID, msgID string) ([]yidu.BatchOutcome, error)
}

// Messages is what the dashboard needs from tracker.Registry.
type Messages interface {
	Catalog
	Registrar
}

// Bitmaps is what the dashboard needs from bitmap.Store: what progress
// reads (live counts, each signal's too, within a View; the bitmaps; a
// way to put back keys that expired).
type Bitmaps = progress.Bitmaps

// Directory is what the dashboard needs from idmap.Mapper: what progress
// reads (the department tree, who the uids are); a Directory that is
// also a progress.UserDirectory gives names, departments and status.
type Directory = progress.Directory
