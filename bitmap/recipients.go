package bitmap

import (
	"context"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
)

// Recipients answers "is uid a recipient of this message" for the reading
// page's opens (issue 50) from a copy of each message's recipients kept in
// memory, so an open of a recipient costs no Redis round trip of its own.
//
// A copy never answers no. Recipients only grow: PutMessage and
// RestoreReads OR into the rcpt key, a standing notice's joiners are
// added, and nothing clears a bit (a deleted notice's page answers 404 on
// its versions). So a uid in a copy, however old, is a recipient still; a
// uid not in it (a joiner added since, or not a recipient) is asked of
// Redis as Store.IsRecipient asks, and a copy older than the refresh
// interval is read again then, by one caller at a time.
type Recipients struct {
	s       *Store
	refresh time.Duration
	max     int
	now     func() time.Time

	mu     sync.Mutex
	copies map[string]*recipientsCopy
}

type recipientsCopy struct {
	bm      *roaring.Bitmap // never written once published
	readAt  time.Time
	usedAt  time.Time
	reading bool
	hasCopy bool
}

// Defaults of NewRecipients.
const (
	// DefaultRecipientsRefresh is how old a copy may be before a uid it
	// lacks reads it again.
	DefaultRecipientsRefresh = 10 * time.Second
	// DefaultRecipientsMax bounds the messages held (the least recently
	// used go first): a few notices are open at once.
	DefaultRecipientsMax = 64
)

// NewRecipients returns a Recipients over s; refresh and max ≤ 0 take the
// defaults, a nil now time.Now.
func NewRecipients(s *Store, refresh time.Duration, max int, now func() time.Time) *Recipients {
	if refresh <= 0 {
		refresh = DefaultRecipientsRefresh
	}
	if max <= 0 {
		max = DefaultRecipientsMax
	}
	if now == nil {
		now = time.Now
	}
	return &Recipients{s: s, refresh: refresh, max: max, now: now, copies: map[string]*recipientsCopy{}}
}

// IsRecipient is Store.IsRecipient, answered from the message's copy when
// it holds uid (found true: the copy came from Redis).
func (r *Recipients) IsRecipient(ctx context.Context, corpID, msgID string, uid uint32) (is, found bool, err error) {
	key := corpID + "/" + msgID
	now := r.now()
	r.mu.Lock()
	c := r.copies[key]
	if c != nil {
		c.usedAt = now
		if c.hasCopy && c.bm.Contains(uid) {
			r.mu.Unlock()
			return true, true, nil
		}
	}
	read := false
	if c == nil || !c.reading && now.Sub(c.readAt) >= r.refresh {
		if c == nil {
			c = &recipientsCopy{usedAt: now}
			r.copies[key] = c
			r.evictLocked()
		}
		c.reading, read = true, true
	}
	r.mu.Unlock()
	if !read {
		return r.s.IsRecipient(ctx, corpID, msgID, uid)
	}
	bm, found, err := r.s.RecipientBitmap(ctx, corpID, msgID)
	r.mu.Lock()
	c.reading, c.readAt = false, now // a message Redis lacks is asked again after refresh too
	if err == nil && found {
		c.bm, c.hasCopy = bm, true
	}
	r.mu.Unlock()
	if err != nil || !found {
		// Redis lacks the message (or failed): its own answer, found
		// false sends the caller to MySQL.
		return r.s.IsRecipient(ctx, corpID, msgID, uid)
	}
	return bm.Contains(uid), true, nil
}

// evictLocked drops the least recently used copies beyond max.
func (r *Recipients) evictLocked() {
	for len(r.copies) > r.max {
		var oldest string
		var at time.Time
		for k, c := range r.copies {
			if oldest == "" || c.usedAt.Before(at) {
				oldest, at = k, c.usedAt
			}
		}
		delete(r.copies, oldest)
	}
}
