package bitmap

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/redis/go-redis/v9"
	"github.com/yidu-io/yidu"
)

// Counts returns the message's recipient and read counts (BITCOUNT).
func (s *Store) Counts(ctx context.Context, corpID, msgID string) (recipients, read int64, found bool, err error) {
	recipients, read, _, found, err = s.counts(ctx, corpID, msgID, false)
	return recipients, read, found, err
}

// CountsBySignal is Counts with the members per signal, counted or not, in
// the same round trip. Read and signal bits are set for recipients only,
// so each BITCOUNT counts recipients, each once.
func (s *Store) CountsBySignal(ctx context.Context, corpID, msgID string) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error) {
	return s.counts(ctx, corpID, msgID, true)
}

func (s *Store) counts(ctx context.Context, corpID, msgID string, withSignals bool) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error) {
	var ex, rc, rd *redis.IntCmd
	var sigs [yidu.NumSignals]*redis.IntCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ex = p.Exists(ctx, s.msgKey(corpID, msgID, "rcpt"))
		rc = p.BitCount(ctx, s.msgKey(corpID, msgID, "rcpt"), nil)
		rd = p.BitCount(ctx, s.msgKey(corpID, msgID, "read"), nil)
		if withSignals {
			for _, sig := range yidu.Signals() {
				sigs[sig.Index()] = p.BitCount(ctx, s.signalKey(corpID, msgID, sig), nil)
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, bySignal, false, fmt.Errorf("bitmap: counts %s/%s: %w", corpID, msgID, err)
	}
	if ex.Val() == 0 {
		return 0, 0, bySignal, false, nil
	}
	if withSignals {
		for _, sig := range yidu.Signals() {
			bySignal.Set(sig, sigs[sig.Index()].Val())
		}
	}
	return rc.Val(), rd.Val(), bySignal, true, nil
}

// CountsWithin counts the message within scope (a scoped viewer's
// numbers, issue 31): |recipients ∩ scope|, |read ∩ recipients ∩ scope|
// and each signal's |signal ∩ recipients ∩ scope|. The five bitmaps come
// in one round trip and are read as Redis stores them, one bit test per
// member of scope, without building them: a 10,000-person scope of a
// 1,000,000-recipient notice costs 10,000 tests, not five decodings of
// 125 KB. found=false when the message is not in Redis.
func (s *Store) CountsWithin(ctx context.Context, corpID, msgID string, scope *roaring.Bitmap) (recipients, read int64, bySignal yidu.SignalCounts, found bool, err error) {
	var rc, rd *redis.StringCmd
	var sigs [yidu.NumSignals]*redis.StringCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		rc = p.Get(ctx, s.msgKey(corpID, msgID, "rcpt"))
		rd = p.Get(ctx, s.msgKey(corpID, msgID, "read"))
		for _, sig := range yidu.Signals() {
			sigs[sig.Index()] = p.Get(ctx, s.signalKey(corpID, msgID, sig))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, bySignal, false, fmt.Errorf("bitmap: counts within %s/%s: %w", corpID, msgID, err)
	}
	raw := func(c *redis.StringCmd) []byte {
		b, _ := c.Bytes() // redis.Nil: no such key, no bits
		return b
	}
	rec := raw(rc)
	if errors.Is(rc.Err(), redis.Nil) {
		return 0, 0, bySignal, false, nil
	}
	rdb := raw(rd)
	var sb [yidu.NumSignals][]byte
	for i := range sigs {
		sb[i] = raw(sigs[i])
	}
	var by [yidu.NumSignals]int64
	it := scope.Iterator()
	for it.HasNext() {
		uid := it.Next()
		if !bitSet(rec, uid) {
			continue
		}
		recipients++
		if bitSet(rdb, uid) {
			read++
		}
		for i := range sb {
			if bitSet(sb[i], uid) {
				by[i]++
			}
		}
	}
	for _, sig := range yidu.Signals() {
		bySignal.Set(sig, by[sig.Index()])
	}
	return recipients, read, bySignal, true, nil
}

// bitSet reports whether bit n of a Redis string bitmap is set (bit n is
// bit 7-n%8 of byte n/8; past the end, unset).
func bitSet(b []byte, n uint32) bool {
	i := int(n >> 3)
	return i < len(b) && b[i]&(0x80>>(n&7)) != 0
}

// bitmap reads one key. A key that does not exist is an empty set, never
// nil: a notice nobody has read has no read key, and a caller's AndNot
// of a nil bitmap took yidu serve down (issue 46). found says whether
// the key existed.
func (s *Store) bitmap(ctx context.Context, key string) (*roaring.Bitmap, bool, error) {
	b, err := s.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return roaring.New(), false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("bitmap: get %s: %w", key, err)
	}
	return FromRedis(b), true, nil
}

// ReadBitmap returns the uids that read the message, empty (not nil)
// when nobody has; found=false when the message has no read yet or is
// not in Redis (check RecipientBitmap).
func (s *Store) ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error) {
	return s.bitmap(ctx, s.msgKey(corpID, msgID, "read"))
}

// SignalBitmap returns the uids that gave signal sig, empty (not nil)
// when nobody has; found=false when nobody has yet or the message is not
// in Redis (check RecipientBitmap).
func (s *Store) SignalBitmap(ctx context.Context, corpID, msgID string, sig yidu.Signal) (*roaring.Bitmap, bool, error) {
	if !sig.Valid() {
		return nil, false, fmt.Errorf("bitmap: signal bitmap %s/%s: invalid signal %d", corpID, msgID, sig)
	}
	return s.bitmap(ctx, s.signalKey(corpID, msgID, sig))
}

// RecipientBitmap returns the message's recipients; found=false (and an
// empty set) when the message is not in Redis.
func (s *Store) RecipientBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error) {
	return s.bitmap(ctx, s.msgKey(corpID, msgID, "rcpt"))
}

// IsRecipient reports whether uid is a recipient of the message (one
// round trip: EXISTS and GETBIT of its rcpt key); found=false when Redis
// does not hold the message (ask MySQL).
func (s *Store) IsRecipient(ctx context.Context, corpID, msgID string, uid uint32) (is, found bool, err error) {
	pipe := s.rdb.Pipeline()
	answer := s.QueueRecipient(ctx, pipe, corpID, msgID, uid)
	_, _ = pipe.Exec(ctx) // each command's error is answer's
	return answer()
}

// QueueRecipient queues IsRecipient's commands on p, a pipeline of the
// store's Redis, so that they share a round trip with the caller's own
// (the reading page's open, issue 50); answer is IsRecipient's once p
// has run.
func (s *Store) QueueRecipient(ctx context.Context, p redis.Pipeliner, corpID, msgID string, uid uint32) (answer func() (is, found bool, err error)) {
	key := s.msgKey(corpID, msgID, "rcpt")
	ex := p.Exists(ctx, key)
	bit := p.GetBit(ctx, key, int64(uid))
	return func() (bool, bool, error) {
		if err := cmp.Or(ex.Err(), bit.Err()); err != nil {
			return false, false, fmt.Errorf("bitmap: recipient %s: %w", key, err)
		}
		return bit.Val() == 1, ex.Val() == 1, nil
	}
}

// MessageMeta returns the message's meta; found=false when not in Redis.
func (s *Store) MessageMeta(ctx context.Context, corpID, msgID string) (yidu.Message, bool, error) {
	h, err := s.rdb.HGetAll(ctx, s.msgKey(corpID, msgID, "meta")).Result()
	if err != nil {
		return yidu.Message{}, false, fmt.Errorf("bitmap: meta %s/%s: %w", corpID, msgID, err)
	}
	if len(h) == 0 {
		return yidu.Message{}, false, nil
	}
	m := yidu.Message{CorpID: corpID, MsgID: msgID, App: h["app"], Title: h["title"]}
	var perr error
	num := func(f string) int64 {
		v, err := strconv.ParseInt(h[f], 10, 64)
		if err != nil && perr == nil {
			perr = fmt.Errorf("bitmap: meta %s/%s: field %s: %w", corpID, msgID, f, err)
		}
		return v
	}
	m.AgentID = num("agent_id")
	m.SentAt = time.UnixMilli(num("sent_at_ms"))
	m.Recipients = num("recipients")
	if c, err := strconv.ParseUint(h["rule"], 10, 8); err == nil && c != 0 {
		m.ReadRule = yidu.ReadRuleOfCode(uint8(c))
	}
	if perr != nil {
		return yidu.Message{}, false, perr
	}
	return m, true, nil
}

// PendingUIDs returns, sorted, the uids of the message with a signal whose
// delta is not known to be acknowledged, for a reconcile job.
func (s *Store) PendingUIDs(ctx context.Context, corpID, msgID string) ([]uint32, error) {
	fs, err := s.rdb.HKeys(ctx, s.msgKey(corpID, msgID, "pend")).Result()
	if err != nil {
		return nil, fmt.Errorf("bitmap: pending %s/%s: %w", corpID, msgID, err)
	}
	uids := make([]uint32, 0, len(fs))
	for _, f := range fs {
		// "<uid>:<signal>"; a bare "<uid>" is a lease of a release that
		// kept no signals apart.
		u, _, _ := strings.Cut(f, ":")
		v, err := strconv.ParseUint(u, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("bitmap: pending %s/%s: field %q: %w", corpID, msgID, f, err)
		}
		uids = append(uids, uint32(v))
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}
