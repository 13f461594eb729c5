package bitmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
)

// setWrittenScript sets, per uid that is a recipient (rcpt bit 1), the bits
// flushd wrote into MySQL: the read bit and the signal bits. It never
// clears a bit and never sets one outside the recipients. A message whose
// recipients key is missing (Redis lost it) is left alone: 0, and the
// caller restores it from MySQL, which already holds these rows.
var setWrittenScript = redis.NewScript(`
-- KEYS: rcpt, read, one bitmap per signal (yidu.Signals order)
-- ARGV: ttl_ms, then per bitmap key after rcpt its uid count, then the uids
local rcpt = KEYS[1]
if redis.call('EXISTS', rcpt) == 0 then
  return 0
end
local n = #KEYS - 1
local at = n + 2
local set = 0
for k = 1, n do
  local key = KEYS[k + 1]
  local cnt = tonumber(ARGV[k + 1])
  local created = redis.call('EXISTS', key) == 0
  for i = at, at + cnt - 1 do
    local uid = ARGV[i]
    if redis.call('GETBIT', rcpt, uid) == 1 and redis.call('SETBIT', key, uid, 1) == 0 then
      set = set + 1
    end
  end
  at = at + cnt
  if created and redis.call('EXISTS', key) == 1 then
    redis.call('PEXPIRE', key, ARGV[1])
  end
end
return set + 1
`)

// SetWritten ORs what flushd wrote for message (corpID, msgID) into its
// bitmaps, within the recipients: read, the uids whose counted read it
// wrote, and signals[s], the uids whose signal s it wrote (nil: none). found=false when Redis
// lacks the message (no recipients key): nothing is written then. set is
// the number of bits that were 0 (what Redis had lost, or had not been
// told because it was down when the signal arrived).
func (s *Store) SetWritten(ctx context.Context, corpID, msgID string, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) (set int, found bool, err error) {
	keys := []string{s.msgKey(corpID, msgID, "rcpt"), s.msgKey(corpID, msgID, "read")}
	bms := []*roaring.Bitmap{read}
	for _, sig := range yidu.Signals() {
		keys = append(keys, s.signalKey(corpID, msgID, sig))
		bms = append(bms, signals[sig])
	}
	args := make([]any, 0, 1+len(bms))
	args = append(args, s.ttlMillis())
	total := 0
	for _, b := range bms {
		n := 0
		if b != nil {
			n = int(b.GetCardinality())
		}
		args = append(args, n)
		total += n
	}
	if total == 0 {
		return 0, true, nil
	}
	for _, b := range bms {
		if b == nil {
			continue
		}
		b.Iterate(func(uid uint32) bool {
			args = append(args, uid)
			return true
		})
	}
	v, err := setWrittenScript.Run(ctx, s.rdb, keys, args...).Int()
	if err != nil {
		return 0, false, fmt.Errorf("bitmap: set written %s/%s: %w", corpID, msgID, err)
	}
	if v == 0 {
		return 0, false, nil
	}
	return v - 1, true, nil
}

// Healer keeps Redis's live view in step with what flushd writes into
// MySQL (flushd.LiveView): every written read and signal gets its bit, so
// after Redis lost data (a restart, a failover to an empty replica, an
// eviction) or missed a signal (it was down when the receiver took it) the
// dashboard converges without `yidu reconcile`. A message Redis lacks
// altogether is restored from MySQL, which already holds the rows just
// written.
type Healer struct {
	store  *Store
	loader MessageLoader
	log    *slog.Logger
}

// NewHealer returns a Healer writing to store and restoring through
// loader. A nil logger discards.
func NewHealer(store *Store, loader MessageLoader, log *slog.Logger) (*Healer, error) {
	if store == nil || loader == nil {
		return nil, errors.New("bitmap: healer: store and loader are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Healer{store: store, loader: loader, log: log.With("component", "bitmap.healer")}, nil
}

// Heal sets the bits of what was written for message (corpID, msgID), as
// SetWritten; see Healer. set counts the bits that were 0 (for a restored message: the
// bits the restore set are not counted).
func (h *Healer) Heal(ctx context.Context, corpID, msgID string, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) (set int, err error) {
	set, found, err := h.store.SetWritten(ctx, corpID, msgID, read, signals)
	if err != nil || found {
		return set, err
	}
	// Loaded after flushd's statement committed, so the snapshot holds
	// what w names; RestoreReads ORs, so a concurrent restore from an
	// older snapshot loses nothing either.
	m, rcpt, mread, msignals, found, err := h.loader.LoadReads(ctx, corpID, msgID)
	if err != nil {
		return 0, fmt.Errorf("bitmap: heal: load %s/%s: %w", corpID, msgID, err)
	}
	if !found {
		return 0, nil
	}
	if err := h.store.RestoreReads(ctx, m, rcpt, mread, msignals); err != nil {
		return 0, fmt.Errorf("bitmap: heal: %w", err)
	}
	h.log.Info("message restored from MySQL", "corp_id", corpID, "msgid", msgID)
	return 0, nil
}
