package dashboard

import (
	"context"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// This file is the seam with tracker, bitmap and idmap (the package table in
// docs/architecture.md). The dashboard declares what it needs here, in the
// domain's types (package yidu), so neither side imports the other; cmd
// wires the concrete types in.

// Catalog reads the tracked messages, scoped to the caller's corps.
type Catalog interface {
	// SearchVisible lists newest first the messages whose title contains
	// title (any case) and, when app is not empty, of that app; corps nil
	// means every corp. Empty title and app list every message.
	//
	// SearchVisible filters first, then pages (issue 38): keep decides
	// which messages the caller may see, and neither the page nor next
	// names one it refused.
	SearchVisible(ctx context.Context, corps []string, title, app, cursor string, limit int, keep func(yidu.Message) (bool, error)) (msgs []yidu.Message, next string, err error)
	// Reaches reports whether any of uids is a recipient of msgID, from
	// MySQL without restoring Redis: the scope check of a notice whose
	// keys expired comes before any restore.
	Reaches(ctx context.Context, corpID, msgID string, uids *roaring.Bitmap) (bool, error)
	// GetMessage finds msgID within corps (nil: any).
	GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error)
	// LoadReads rebuilds a message from MySQL when Redis lost its keys:
	// its recipients, readers and each signal's members.
	LoadReads(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, found bool, err error)
}

// ReadHistory answers questions about flushed reads (MySQL).
type ReadHistory interface {
	ReadTimes(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]time.Time, error)
	// FirstReads is each flushed read's time and the signal that made it.
	FirstReads(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]yidu.FirstRead, error)
	ReadsPerMinute(ctx context.Context, corpID, msgID string) ([]yidu.MinuteCount, error)
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
	ReadHistory
	Registrar
}

// Bitmaps is what the dashboard needs from bitmap.Store: live counts
// (each signal's too) and bitmaps, and a way to put back keys that expired.
type Bitmaps interface {
	CountsBySignal(ctx context.Context, corpID, msgID string) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error)
	ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	RecipientBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	// CountsWithin is the message's counts within scope, a scoped
	// caller's View (scope.go): |recipients ∩ scope|, |read ∩ recipients
	// ∩ scope| and each signal's |signal ∩ recipients ∩ scope|, in one
	// round trip and without building the bitmaps (found=false: the keys
	// are gone).
	CountsWithin(ctx context.Context, corpID, msgID string, scope *roaring.Bitmap) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error)
	RestoreReads(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error
}

// Directory is what the dashboard needs from idmap.Mapper.
type Directory interface {
	// UserIDs maps uids to UserIDs (uids without a user are left out).
	UserIDs(ctx context.Context, corpID string, uids []uint32) (map[uint32]string, error)
	Departments(ctx context.Context, corpID string) ([]yidu.Department, error)
	// DepartmentMemberSets returns each department's active direct members.
	DepartmentMemberSets(ctx context.Context, corpID string) (map[int64]*roaring.Bitmap, error)
}

// UserDirectory is implemented by a Directory that also knows names,
// departments and status (idmap.Mapper.Users). Without it the
// dashboard shows UserIDs only and derives departments from the member
// sets.
type UserDirectory interface {
	Users(ctx context.Context, corpID string, uids []uint32) (map[uint32]yidu.User, error)
}
