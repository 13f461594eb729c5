package progress

import (
	"context"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// Reacher is implemented by an Archive that can tell from MySQL whether
// any of uids is a recipient (tracker.Registry.Reaches).
type Reacher interface {
	Reaches(ctx context.Context, corpID, msgID string, uids *roaring.Bitmap) (bool, error)
}

// ListCounts are m's counts for one row of a list, from the live bitmaps
// only (a list of many notices must stay cheap; nothing is restored).
// For everyone: BITCOUNT, a recalled message's frozen at its recall
// (shown even when its keys are gone); found is false when the keys are
// gone. Within a scoped View: found is false when the keys are gone or
// no recipient is in v, and the caller leaves the row out (the notice is
// 404 to them, or waits for its page to rebuild the keys).
func (p *Progress) ListCounts(ctx context.Context, m yidu.Message, v access.View) (Counts, bool, error) {
	c, found, err := p.Live(ctx, m, v)
	if err != nil {
		return Counts{}, false, err
	}
	if v.All() {
		if m.Recalled() {
			return Frozen(m, c), true, nil
		}
		return c, found, nil
	}
	if !found || c.Recipients == 0 {
		return Counts{}, false, nil
	}
	return c, true, nil
}

// Reaches reports whether v meets m's recipients without rebuilding m's
// keys (issue 38: a scoped caller cannot make yidu rebuild the keys of a
// notice it may not see): from Redis when they are live, from MySQL
// otherwise, one probe per member of the View.
func (p *Progress) Reaches(ctx context.Context, m yidu.Message, v access.View) (bool, error) {
	if v.All() {
		return true, nil
	}
	rec, _, _, found, err := p.bms.CountsWithin(ctx, m.CorpID, m.MsgID, v.UIDs())
	if err != nil {
		return false, fmt.Errorf("progress: scope check: %w", err)
	}
	if found {
		return rec > 0, nil
	}
	r, ok := p.archive.(Reacher)
	if !ok {
		return false, nil
	}
	reached, err := r.Reaches(ctx, m.CorpID, m.MsgID, v.UIDs())
	if err != nil {
		return false, fmt.Errorf("progress: scope check: %w", err)
	}
	return reached, nil
}
