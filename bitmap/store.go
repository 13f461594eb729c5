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
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/opt"
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
	opt.Logger(&o.Logger)
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
	guard  *loop.Guard

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
	log := opts.Logger.With("component", "bitmap")
	// A panic in one pipeline answers its callers with an error and the
	// queue loop goes on (issue 46): yidu_loop_panics_total{loop="bitmap_mark"}.
	guard, err := loop.New("bitmap_mark", loop.Options{Registerer: opts.Registerer, Logger: log})
	if err != nil {
		return nil, err
	}
	return &Store{
		rdb:    rdb,
		opts:   opts,
		log:    log,
		guard:  guard,
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
