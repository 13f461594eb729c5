package bitmap

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// ReadsLoader is the part of MessageLoader a restore needs: a message's
// rows from MySQL as bitmaps (tracker.Registry.LoadReads).
type ReadsLoader interface {
	LoadReads(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, found bool, err error)
}

// Restore puts message (corpID, msgID) back from MySQL when Redis lacks
// it: its meta, recipients, readers and each signal's members, read
// through loader in one snapshot. RestoreReads ORs, so a concurrent
// restore from an older snapshot loses nothing. found=false: no such
// active message, nothing written. The one restore-on-miss of the
// Recorder and the Healer.
func (s *Store) Restore(ctx context.Context, loader ReadsLoader, corpID, msgID string) (found bool, err error) {
	m, rcpt, read, signals, found, err := loader.LoadReads(ctx, corpID, msgID)
	if err != nil {
		return false, fmt.Errorf("bitmap: load %s/%s: %w", corpID, msgID, err)
	}
	if !found {
		return false, nil
	}
	if read == nil {
		read = roaring.New()
	}
	if err := s.RestoreReads(ctx, m, rcpt, read, signals); err != nil {
		return false, fmt.Errorf("bitmap: restore %s/%s: %w", corpID, msgID, err)
	}
	return true, nil
}
