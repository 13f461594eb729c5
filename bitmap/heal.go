package bitmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/opt"
)

// setWrittenScript ORs the bits flushd wrote into MySQL into the read and
// signal bitmaps, ANDed with the recipients first (BITOP, as the restore:
// a batch of 5000 uids costs a few bitmap-sized byte operations, not 10,000
// GETBIT/SETBIT calls). It never clears a bit and never sets one outside
// the recipients. A message whose recipients key is missing (Redis lost
// it) is left alone: 0, and the caller restores it from MySQL, which
// already holds these rows. Else 1 + the number of bits that were 0.
var setWrittenScript = redis.NewScript(`
-- KEYS: rcpt, tmp, read, one bitmap per signal (yidu.Signals order)
-- ARGV: ttl_ms, then one Redis bitmap (bytes) per key after tmp
local rcpt, tmp = KEYS[1], KEYS[2]
if redis.call('EXISTS', rcpt) == 0 then
  return 0
end
local set = 0
for k = 3, #KEYS do
  local b = ARGV[k - 1]
  if #b > 0 then
    local key = KEYS[k]
    local created = redis.call('EXISTS', key) == 0
    local before = redis.call('BITCOUNT', key)
    redis.call('SET', tmp, b)
    redis.call('BITOP', 'AND', tmp, tmp, rcpt)
    redis.call('BITOP', 'OR', key, key, tmp)
    set = set + redis.call('BITCOUNT', key) - before
    if created then
      redis.call('PEXPIRE', key, ARGV[1])
    end
  end
end
redis.call('DEL', tmp)
return set + 1
`)

// SetWritten ORs what flushd wrote for message (corpID, msgID) into its
// bitmaps, within the recipients: read, the uids whose counted read it
// wrote, and signals[s], the uids whose signal s it wrote (nil: none). found=false when Redis
// lacks the message (no recipients key): nothing is written then. set is
// the number of bits that were 0 (what Redis had lost, or had not been
// told because it was down when the signal arrived).
func (s *Store) SetWritten(ctx context.Context, corpID, msgID string, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) (set int, found bool, err error) {
	keys := []string{s.msgKey(corpID, msgID, "rcpt"), s.msgKey(corpID, msgID, "tmp"), s.msgKey(corpID, msgID, "read")}
	args := []any{s.ttlMillis(), bytesOf(read)}
	empty := read == nil || read.IsEmpty()
	for _, sig := range yidu.Signals() {
		keys = append(keys, s.signalKey(corpID, msgID, sig))
		args = append(args, bytesOf(signals[sig]))
		empty = empty && (signals[sig] == nil || signals[sig].IsEmpty())
	}
	if empty {
		return 0, true, nil
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

// bytesOf is ToRedis, empty for nil.
func bytesOf(b *roaring.Bitmap) []byte {
	if b == nil || b.IsEmpty() {
		return nil
	}
	return ToRedis(b)
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
	opt.Logger(&log)
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
	// what w names; Restore ORs, so a concurrent restore from an older
	// snapshot loses nothing either.
	if found, err := h.store.Restore(ctx, h.loader, corpID, msgID); err != nil || !found {
		if err != nil {
			return 0, fmt.Errorf("bitmap: heal: %w", err)
		}
		return 0, nil
	}
	h.log.Info("message restored from MySQL", "corp_id", corpID, "msgid", msgID)
	return 0, nil
}
