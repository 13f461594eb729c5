package dashboard

import (
	"context"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/tracker"
)

// This file is the seam with tracker, bitmap and idmap (the package table in
// docs/architecture.md). The dashboard declares what it needs here so the
// providers never import it; cmd wires the concrete types in.

// Message is a tracked message (bitmap.Message).
type Message = bitmap.Message

// MinuteCount is the number of flushed reads in one minute.
type MinuteCount = tracker.MinuteCount

// Registration is what POST /api/v1/messages asks the tracker to register.
type Registration = tracker.Registration

// RemindReport says what a reminder did.
type RemindReport = tracker.RemindReport

// Department is one node of a corp's department tree.
type Department = idmap.Department

// User is a directory entry with what the page shows of a person.
type User = idmap.User

// UserLeft is User.Status of someone deleted in WeCom (users.status = 2).
const UserLeft = idmap.StatusLeft

// Catalog reads the tracked messages, scoped to the caller's corps.
type Catalog interface {
	// ListMessages lists newest first; corps nil means every corp.
	ListMessages(ctx context.Context, corps []string, cursor string, limit int) (msgs []Message, next string, err error)
	// GetMessage finds msgID within corps (nil: any).
	GetMessage(ctx context.Context, corps []string, msgID string) (Message, bool, error)
	// LoadMessage rebuilds a message from MySQL when Redis lost its keys.
	LoadMessage(ctx context.Context, corpID, msgID string) (m Message, recipients, read *roaring.Bitmap, found bool, err error)
}

// ReadHistory answers questions about flushed reads (MySQL).
type ReadHistory interface {
	ReadTimes(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]time.Time, error)
	ReadsPerMinute(ctx context.Context, corpID, msgID string) ([]MinuteCount, error)
}

// Registrar registers and reminds; the only writes the dashboard asks for.
type Registrar interface {
	Register(ctx context.Context, reg Registration) (m Message, created bool, err error)
	Remind(ctx context.Context, m Message, userIDs []string) (RemindReport, error)
	// LastReminder is when msgID was last reminded (persisted, so a restart
	// does not reopen the interval).
	LastReminder(ctx context.Context, corpID, msgID string) (at time.Time, ok bool, err error)
}

// Messages is what the dashboard needs from tracker.Registry.
type Messages interface {
	Catalog
	ReadHistory
	Registrar
}

// Bitmaps is what the dashboard needs from bitmap.Store: live counts and
// bitmaps, and a way to put back keys that expired.
type Bitmaps interface {
	Counts(ctx context.Context, corpID, msgID string) (recipients, read int64, found bool, err error)
	ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	RecipientBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	RestoreMessage(ctx context.Context, m Message, recipients, read *roaring.Bitmap) error
}

// Directory is what the dashboard needs from idmap.Mapper.
type Directory interface {
	// UserIDs maps uids to UserIDs (uids without a user are left out).
	UserIDs(ctx context.Context, corpID string, uids []uint32) (map[uint32]string, error)
	Departments(ctx context.Context, corpID string) ([]Department, error)
	// DepartmentMemberSets returns each department's active direct members.
	DepartmentMemberSets(ctx context.Context, corpID string) (map[int64]*roaring.Bitmap, error)
}

// UserDirectory is implemented by a Directory that also knows names,
// departments and status (idmap.Mapper.Users). Without it the
// dashboard shows UserIDs only and derives departments from the member
// sets.
type UserDirectory interface {
	Users(ctx context.Context, corpID string, uids []uint32) (map[uint32]User, error)
}
