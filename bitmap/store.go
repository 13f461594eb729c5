package bitmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu"
)

// Options configures a Store. Zero fields take the documented defaults.
type Options struct {
	// Prefix starts every key (default "yidu"); no '{' or '}'.
	Prefix string
	// TTL keeps a message's keys this long after its last activity
	// (default 30 days).
	TTL time.Duration
	// Lease is how long a new read's pending entry belongs to the attempt
	// that marked it (default 3 s). It must stay below WeCom's 5 s retry
	// interval so a retry after a crash re-emits the delta.
	Lease time.Duration
	// QueueSize bounds the mark/ack requests waiting for Redis (default 4096).
	QueueSize int
	// MaxBatch is the most script calls in one pipeline (default 256).
	MaxBatch int
	// Loops is the number of queue loop goroutines (default 1). One loop
	// keeps one pipeline in flight and batches everything that arrives
	// meanwhile; two sent twice the pipelines (32,000 against 17,000 for
	// the same callbacks) and cost Redis a quarter more CPU, at the same
	// rate.
	Loops int
	// RoundTripTimeout bounds one pipeline (default 2 s).
	RoundTripTimeout time.Duration
	Logger           *slog.Logger
	Registerer       prometheus.Registerer
}

func (o *Options) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = "yidu"
	}
	if o.TTL <= 0 {
		o.TTL = 30 * 24 * time.Hour
	}
	if o.Lease <= 0 {
		o.Lease = 3 * time.Second
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 4096
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.Loops <= 0 {
		o.Loops = 1
	}
	if o.RoundTripTimeout <= 0 {
		o.RoundTripTimeout = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ErrQueueFull is returned when the mark/ack queue is full; the receiver
// answers 503 so WeCom retries.
var ErrQueueFull = errors.New("bitmap: redis queue full")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("bitmap: store closed")

// Store keeps per-message bitmaps in Redis (see the package doc for keys).
type Store struct {
	rdb    redis.UniversalClient
	opts   Options
	log    *slog.Logger
	m      *storeMetrics
	logErr rate.Sometimes

	mu     sync.RWMutex // guards closed against sends on queue
	closed bool
	queue  chan *request
	wg     sync.WaitGroup
	once   sync.Once

	keysMu sync.RWMutex
	keys   map[msgRef]*msgKeys // see hotKeys

	// markTTL and markLease are the mark script's TTL and lease (ms),
	// boxed once: an int64 made an interface value allocates.
	markTTL, markLease any
}

// msgRef names one message.
type msgRef struct{ corpID, msgID string }

// msgKeys are the key names of one message a mark or an ack uses, built
// once: in the 9:00 storm every callback marks the same message, and
// building them per call was an eighth of the read path's allocations.
// Shared: nothing may write into them.
type msgKeys struct {
	rcpt, pend string
	// mark[sig.Index()] is markCalls' KEYS for signal sig: rcpt, read,
	// pend, meta, sig's bitmap, the other signals' bitmaps.
	mark [yidu.NumSignals][]string
}

// maxHotKeys bounds the key cache: more messages at once than this, and it
// starts over (building keys is cheap, only not free).
const maxHotKeys = 4096

// New returns a Store on rdb (a Client or ClusterClient) and starts its
// queue loops; Close stops them.
func New(rdb redis.UniversalClient, opts Options) (*Store, error) {
	s, err := newStore(rdb, opts)
	if err != nil {
		return nil, err
	}
	s.start()
	return s, nil
}

func newStore(rdb redis.UniversalClient, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, errors.New("bitmap: a Redis client is required")
	}
	opts.setDefaults()
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("bitmap: prefix %q must not contain '{' or '}'", opts.Prefix)
	}
	m, err := newStoreMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Store{
		rdb:    rdb,
		opts:   opts,
		log:    opts.Logger.With("component", "bitmap"),
		m:      m,
		logErr: rate.Sometimes{Interval: 10 * time.Second},
		queue:  make(chan *request, opts.QueueSize),
		keys:   map[msgRef]*msgKeys{},

		markTTL:   opts.TTL.Milliseconds(),
		markLease: opts.Lease.Milliseconds(),
	}, nil
}

func (s *Store) start() {
	for range s.opts.Loops {
		s.wg.Add(1)
		go s.loop()
	}
}

// Close stops accepting requests, sends what is queued and waits for the
// loops; each remaining pipeline is bounded by RoundTripTimeout.
func (s *Store) Close() {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.queue)
		s.mu.Unlock()
		s.wg.Wait()
	})
}

// TTL returns how long keys live after their last activity.
func (s *Store) TTL() time.Duration { return s.opts.TTL }

func (s *Store) msgKey(corpID, msgID, kind string) string {
	return s.opts.Prefix + ":m:{" + corpID + "/" + msgID + "}:" + kind
}

// hotKeys returns the message's mark and ack keys, from the cache.
func (s *Store) hotKeys(corpID, msgID string) *msgKeys {
	ref := msgRef{corpID, msgID}
	s.keysMu.RLock()
	k := s.keys[ref]
	s.keysMu.RUnlock()
	if k != nil {
		return k
	}
	k = &msgKeys{rcpt: s.msgKey(corpID, msgID, "rcpt"), pend: s.msgKey(corpID, msgID, "pend")}
	read, meta := s.msgKey(corpID, msgID, "read"), s.msgKey(corpID, msgID, "meta")
	for _, sig := range yidu.Signals() {
		keys := make([]string, 0, 5+yidu.NumSignals-1)
		keys = append(keys, k.rcpt, read, k.pend, meta, s.signalKey(corpID, msgID, sig))
		for _, o := range yidu.Signals() {
			if o != sig {
				keys = append(keys, s.signalKey(corpID, msgID, o))
			}
		}
		k.mark[sig.Index()] = slices.Clip(keys)
	}
	s.keysMu.Lock()
	if len(s.keys) >= maxHotKeys {
		clear(s.keys)
	}
	s.keys[ref] = k
	s.keysMu.Unlock()
	return k
}

// signalKey is the bitmap of the members who gave signal sig.
func (s *Store) signalKey(corpID, msgID string, sig yidu.Signal) string {
	return s.msgKey(corpID, msgID, sig.String())
}

func (s *Store) appKey(corpID string, agentID int64, kind string) string {
	return s.opts.Prefix + ":a:{" + corpID + "/" + strconv.FormatInt(agentID, 10) + "}:" + kind
}

func (s *Store) ttlMillis() int64 { return s.opts.TTL.Milliseconds() }

// restoreScript ORs recipients, reads and each signal's members into a
// message's bitmaps (a bit is never cleared), keeps the read and signal
// bitmaps within the recipients, writes its meta and refreshes every key's
// TTL. A message without recipients still gets a one-byte recipients key so
// Mark can tell "no recipients" from "missing".
var restoreScript = redis.NewScript(`
-- KEYS: rcpt, read, pend, meta, tmp, one bitmap per signal
-- ARGV: ttl_ms, rcpt bytes, read bytes, one signal's bytes per signal key, meta field/value...
local rcpt, pend, meta, tmp = KEYS[1], KEYS[3], KEYS[4], KEYS[5]
local bitmaps = {rcpt, KEYS[2]}
for i = 6, #KEYS do
  bitmaps[#bitmaps + 1] = KEYS[i]
end
if #ARGV[2] > 0 then
  redis.call('SET', tmp, ARGV[2])
  redis.call('BITOP', 'OR', rcpt, rcpt, tmp)
end
for j = 2, #bitmaps do
  local b = ARGV[j + 1]
  if #b > 0 then
    redis.call('SET', tmp, b)
    redis.call('BITOP', 'OR', bitmaps[j], bitmaps[j], tmp)
    redis.call('BITOP', 'AND', bitmaps[j], bitmaps[j], rcpt)
  end
end
redis.call('DEL', tmp)
if redis.call('EXISTS', rcpt) == 0 then
  redis.call('SET', rcpt, '\0')
end
for i = #bitmaps + 2, #ARGV, 2 do
  redis.call('HSET', meta, ARGV[i], ARGV[i+1])
end
for i, k in ipairs(KEYS) do
  if k ~= tmp then
    redis.call('PEXPIRE', k, ARGV[1])
  end
end
return 1
`)

// PutMessage stores a newly registered message: meta, recipients bitmap
// and its entry in the app's index. Recipients are ORed in, so a
// registration written in several batches may call it once per batch.
func (s *Store) PutMessage(ctx context.Context, m yidu.Message, recipients *roaring.Bitmap) error {
	return s.RestoreReads(ctx, m, recipients, nil, nil)
}

// RestoreMessage is RestoreReads without signal bitmaps.
func (s *Store) RestoreMessage(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap) error {
	return s.RestoreReads(ctx, m, recipients, read, nil)
}

// RestoreReads rebuilds a message from MySQL after Redis lost it: like
// PutMessage, and read is ORed into the read bitmap and signals[s] into
// signal s's bitmap (a bit is never cleared, so a stale MySQL view cannot
// make a read unread or forget a signal). Read and signal bits outside the
// recipients are dropped.
func (s *Store) RestoreReads(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error {
	keys := []string{
		s.msgKey(m.CorpID, m.MsgID, "rcpt"), s.msgKey(m.CorpID, m.MsgID, "read"),
		s.msgKey(m.CorpID, m.MsgID, "pend"), s.msgKey(m.CorpID, m.MsgID, "meta"),
		s.msgKey(m.CorpID, m.MsgID, "tmp"),
	}
	args := []any{s.ttlMillis(), ToRedis(recipients), ToRedis(read)}
	for _, sig := range yidu.Signals() {
		keys = append(keys, s.signalKey(m.CorpID, m.MsgID, sig))
		args = append(args, ToRedis(signals[sig]))
	}
	args = append(args, "app", m.App, "agent_id", m.AgentID, "title", m.Title,
		"sent_at_ms", m.SentAt.UnixMilli(), "recipients", m.Recipients, "rule", int(m.ReadRule.Code()))
	if err := restoreScript.Run(ctx, s.rdb, keys, args...).Err(); err != nil {
		return fmt.Errorf("bitmap: put message %s/%s: %w", m.CorpID, m.MsgID, err)
	}
	if err := s.IndexApp(ctx, m.CorpID, m.AgentID, []yidu.Message{m}, false); err != nil {
		return err
	}
	return nil
}

// ResetAcknowledged makes a message's acknowledgements stop counting
// (a material new version of a notice read under read_rule acknowledged,
// issue 39): its read and acknowledged bitmaps are emptied, so progress
// counts only acknowledgements of the new version, each one a new mark.
// Under that rule nothing else made the message read. A message Redis
// lacks is left alone: its restore reads MySQL, reset first.
func (s *Store) ResetAcknowledged(ctx context.Context, corpID, msgID string) error {
	if err := resetAckScript.Run(ctx, s.rdb, []string{
		s.msgKey(corpID, msgID, "rcpt"), s.msgKey(corpID, msgID, "read"), s.signalKey(corpID, msgID, yidu.SignalAcknowledged),
	}).Err(); err != nil {
		return fmt.Errorf("bitmap: reset acknowledgements of %s/%s: %w", corpID, msgID, err)
	}
	return nil
}

var resetAckScript = redis.NewScript(`
-- KEYS: rcpt, read, acknowledged
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[2], KEYS[3])
end
return 1
`)

// indexSentinel is the app index member that says the index holds every
// active message of the app: after Redis lost data, a PutMessage alone
// must not make the index look complete.
const indexSentinel = ""

// sentScore is the app index score of a message: its send time rounded up
// to the second, so an enter_agent at CreateTime T (whole seconds) never
// claims a message sent later within that second.
func sentScore(t time.Time) int64 { return (t.UnixMilli() + 999) / 1000 }

// IndexApp adds msgs to the index of app (corpID, agentID) and drops
// entries older than TTL. complete says msgs are all the app's active
// messages (a rebuild from MySQL), which marks the index complete.
func (s *Store) IndexApp(ctx context.Context, corpID string, agentID int64, msgs []yidu.Message, complete bool) error {
	key := s.appKey(corpID, agentID, "msgs")
	members := make([]redis.Z, 0, len(msgs)+1)
	for _, m := range msgs {
		members = append(members, redis.Z{Score: float64(sentScore(m.SentAt)), Member: m.MsgID})
	}
	if complete {
		members = append(members, redis.Z{Score: 0, Member: indexSentinel})
	}
	horizon := time.Now().Add(-s.opts.TTL).Unix()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(members) > 0 {
			p.ZAdd(ctx, key, members...)
		}
		p.ZRemRangeByScore(ctx, key, "(0", strconv.FormatInt(horizon, 10))
		p.PExpire(ctx, key, s.opts.TTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("bitmap: index app %s/%d: %w", corpID, agentID, err)
	}
	return nil
}

// sinceScript returns whether the app index is complete, then the msgids
// sent in (cursor - slack, at] for the member.
var sinceScript = redis.NewScript(`
-- KEYS: app index, cursor hash; ARGV: uid, at (unix s), slack (s)
if not redis.call('ZSCORE', KEYS[1], '') then
  return {0}
end
local c = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local from = c - tonumber(ARGV[3])
if from < 0 then from = 0 end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', from), ARGV[2])
table.insert(ids, 1, 1)
return ids
`)

// MessagesSinceCursor returns the app's messages sent after the member's
// cursor (less slack, for messages indexed late) and at or before at.
// complete=false means the app index is not known to be complete (Redis
// lost it): rebuild it with IndexApp(..., true) and ask again.
func (s *Store) MessagesSinceCursor(ctx context.Context, corpID string, agentID int64, uid uint32, at time.Time, slack time.Duration) (msgIDs []string, complete bool, err error) {
	keys := []string{s.appKey(corpID, agentID, "msgs"), s.appKey(corpID, agentID, "cur")}
	v, err := sinceScript.Run(ctx, s.rdb, keys, uid, at.Unix(), int64(slack/time.Second)).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("bitmap: messages since cursor %s/%d: %w", corpID, agentID, err)
	}
	if len(v) == 0 || v[0] != int64(1) {
		return nil, false, nil
	}
	msgIDs = make([]string, 0, len(v)-1)
	for _, x := range v[1:] {
		if id, ok := x.(string); ok && id != indexSentinel {
			msgIDs = append(msgIDs, id)
		}
	}
	return msgIDs, true, nil
}

// advanceScript moves a member's cursor forward only and refreshes the TTL.
var advanceScript = redis.NewScript(`
-- KEYS: cursor hash; ARGV: uid, at (unix s), ttl_ms
local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > c then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return c
`)

// AdvanceCursor moves the member's enter_agent cursor to at unless it is
// already later.
func (s *Store) AdvanceCursor(ctx context.Context, corpID string, agentID int64, uid uint32, at time.Time) error {
	keys := []string{s.appKey(corpID, agentID, "cur")}
	if err := advanceScript.Run(ctx, s.rdb, keys, uid, at.Unix(), s.ttlMillis()).Err(); err != nil {
		return fmt.Errorf("bitmap: advance cursor %s/%d: %w", corpID, agentID, err)
	}
	return nil
}

// Cursor returns the member's enter_agent cursor (zero time when unset).
func (s *Store) Cursor(ctx context.Context, corpID string, agentID int64, uid uint32) (time.Time, error) {
	v, err := s.rdb.HGet(ctx, s.appKey(corpID, agentID, "cur"), strconv.FormatUint(uint64(uid), 10)).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("bitmap: cursor %s/%d: %w", corpID, agentID, err)
	}
	return time.Unix(v, 0), nil
}

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

func (s *Store) bitmap(ctx context.Context, key string) (*roaring.Bitmap, bool, error) {
	b, err := s.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("bitmap: get %s: %w", key, err)
	}
	return FromRedis(b), true, nil
}

// ReadBitmap returns the uids that read the message. found=false when the
// message has no read yet or is not in Redis (check RecipientBitmap).
func (s *Store) ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error) {
	return s.bitmap(ctx, s.msgKey(corpID, msgID, "read"))
}

// SignalBitmap returns the uids that gave signal sig; found=false when
// nobody has yet or the message is not in Redis (check RecipientBitmap).
func (s *Store) SignalBitmap(ctx context.Context, corpID, msgID string, sig yidu.Signal) (*roaring.Bitmap, bool, error) {
	if !sig.Valid() {
		return nil, false, fmt.Errorf("bitmap: signal bitmap %s/%s: invalid signal %d", corpID, msgID, sig)
	}
	return s.bitmap(ctx, s.signalKey(corpID, msgID, sig))
}

// RecipientBitmap returns the message's recipients; found=false when the
// message is not in Redis.
func (s *Store) RecipientBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error) {
	return s.bitmap(ctx, s.msgKey(corpID, msgID, "rcpt"))
}

// IsRecipient reports whether uid is a recipient of the message (one
// round trip: EXISTS and GETBIT of its rcpt key); found=false when Redis
// does not hold the message (ask MySQL). The reading page asks it per view.
func (s *Store) IsRecipient(ctx context.Context, corpID, msgID string, uid uint32) (is, found bool, err error) {
	key := s.msgKey(corpID, msgID, "rcpt")
	pipe := s.rdb.Pipeline()
	ex := pipe.Exists(ctx, key)
	bit := pipe.GetBit(ctx, key, int64(uid))
	if _, err := pipe.Exec(ctx); err != nil {
		return false, false, fmt.Errorf("bitmap: recipient %s: %w", key, err)
	}
	return bit.Val() == 1, ex.Val() == 1, nil
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
