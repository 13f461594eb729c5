package progress

import (
	"context"
	"fmt"
	"slices"

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

// Searcher is implemented by an Archive that lists messages filtered
// first, then paged (tracker.Registry.SearchVisible): keep decides which
// the caller sees, and neither the page nor next names one it refused.
type Searcher interface {
	SearchVisible(ctx context.Context, corps []string, title, app, cursor string, limit int, keep func(yidu.Message) (bool, error)) (msgs []yidu.Message, next string, err error)
}

// ListRow is one message of a list with its counts; Found is false when the
// counts are not live (ListCounts).
type ListRow struct {
	Message yidu.Message
	Counts  Counts
	Found   bool
}

// List is one page of the messages caller sees, newest first, whose
// title contains title and, when app is not empty, of that app, with
// live counts within caller's View of each (ListCounts: no rebuild).
// Filter first, then page: the cursor never names a notice the caller
// gets 404 on (issue 38).
func (p *Progress) List(ctx context.Context, caller *access.Principal, title, app, cursor string, limit int) ([]ListRow, string, error) {
	corps := caller.Corps()
	if corps != nil && len(corps) == 0 {
		return nil, "", nil
	}
	s, ok := p.archive.(Searcher)
	if !ok {
		return nil, "", fmt.Errorf("progress: list: the archive cannot search")
	}
	rows := map[string]ListRow{}
	keep := func(m yidu.Message) (bool, error) {
		if corps != nil && !slices.Contains(corps, m.CorpID) {
			return false, nil
		}
		v, err := p.ViewOf(ctx, caller, m)
		if err != nil || v.None() {
			return false, err
		}
		rw := ListRow{Message: m}
		if rw.Counts, rw.Found, err = p.ListCounts(ctx, m, v); err != nil || (!v.All() && !rw.Found) {
			return false, err
		}
		rows[m.CorpID+"\x00"+m.MsgID] = rw
		return true, nil
	}
	msgs, next, err := s.SearchVisible(ctx, corps, title, app, cursor, limit, keep)
	if err != nil {
		return nil, "", fmt.Errorf("progress: list messages: %w", err)
	}
	out := make([]ListRow, 0, len(msgs))
	for _, m := range msgs {
		rw, ok := rows[m.CorpID+"\x00"+m.MsgID]
		if !ok {
			rw = ListRow{Message: m}
		}
		rw.Message = m
		out = append(out, rw)
	}
	return out, next, nil
}
