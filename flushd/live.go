package flushd

import (
	"context"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/metric"
)

// LiveView is where flushd puts the bits of what it wrote into MySQL, so
// the live view (Redis) converges to MySQL without an operator after Redis
// lost data or missed a signal; bitmap.Healer provides it. Heal must set a
// bit only for a recipient and never clear one.
type LiveView interface {
	// Heal sets, within the message's recipients, the read bit of every
	// uid in read and the signal s bit of every uid in signals[s]; set
	// counts the bits that were 0.
	Heal(ctx context.Context, corpID, msgID string, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) (set int, err error)
}

// liveTimeout bounds one message's Heal: Redis being down must not hold
// the flush loop (MySQL is written already; the bits wait and retry).
const liveTimeout = 2 * time.Second

// liveBackoff spaces failed heals: capped at 2 s, so the live view
// catches up within about that long once Redis answers again.
var liveBackoff = backoff{min: 100 * time.Millisecond, max: 2 * time.Second}

// live is what flushd has written into MySQL and not yet into Redis: per
// message, the uids of counted reads and of each signal. The Flusher
// guards it with its mutex.
type live struct {
	msgs    map[msgKey]*liveBatch
	uids    int
	max     int
	retryAt time.Time
	fails   int
}

type liveBatch struct {
	read    *roaring.Bitmap
	signals map[yidu.Signal]*roaring.Bitmap
	n       int
}

func newLive(max int) *live { return &live{msgs: map[msgKey]*liveBatch{}, max: max} }

// add records reads written for message k. Over max uids the oldest
// backlog is dropped (counted; `yidu reconcile` repairs it): Redis has
// been down longer than max reads, and flushd must keep writing MySQL.
func (l *live) add(k msgKey, reads []Read, m *liveMetrics) {
	if l.uids+bits(reads) > l.max && l.uids > 0 {
		m.dropped.Add(float64(l.uids))
		clear(l.msgs)
		l.uids = 0
	}
	b := l.msgs[k]
	if b == nil {
		b = &liveBatch{read: roaring.New(), signals: map[yidu.Signal]*roaring.Bitmap{}}
		l.msgs[k] = b
	}
	for _, r := range reads {
		if r.Source != 0 && b.read.CheckedAdd(r.UID) {
			b.n++
			l.uids++
		}
		for _, sig := range yidu.Signals() {
			if *r.signal(sig) == 0 {
				continue
			}
			s := b.signals[sig]
			if s == nil {
				s = roaring.New()
				b.signals[sig] = s
			}
			if s.CheckedAdd(r.UID) {
				b.n++
				l.uids++
			}
		}
	}
	m.backlog.Set(float64(l.uids))
}

// bits is the most bits reads can add to the backlog.
func bits(reads []Read) int {
	n := 0
	for _, r := range reads {
		if r.Source != 0 {
			n++
		}
		for _, sig := range yidu.Signals() {
			if *r.signal(sig) != 0 {
				n++
			}
		}
	}
	return n
}

// take removes and returns the backlog, unless a failed heal is still
// backing off.
func (l *live) take(now time.Time) map[msgKey]*liveBatch {
	if len(l.msgs) == 0 || now.Before(l.retryAt) {
		return nil
	}
	out := l.msgs
	l.msgs = map[msgKey]*liveBatch{}
	l.uids = 0
	return out
}

// putBack returns batches a heal did not reach to the backlog, to be
// tried again after a backoff.
func (l *live) putBack(left map[msgKey]*liveBatch, now time.Time, backoff backoff, m *liveMetrics) {
	if len(left) == 0 {
		l.fails = 0
		m.backlog.Set(float64(l.uids))
		return
	}
	l.fails++
	l.retryAt = now.Add(backoff.wait(l.fails))
	for k, b := range left {
		if l.uids+b.n > l.max && l.uids > 0 {
			m.dropped.Add(float64(b.n)) // newer writes came first
			continue
		}
		cur := l.msgs[k]
		if cur == nil {
			l.msgs[k] = b
			l.uids += b.n
			continue
		}
		l.uids -= cur.n
		cur.read.Or(b.read)
		cur.n = int(cur.read.GetCardinality())
		for sig, s := range b.signals {
			if c := cur.signals[sig]; c != nil {
				c.Or(s)
			} else {
				cur.signals[sig] = s
			}
		}
		for _, s := range cur.signals {
			cur.n += int(s.GetCardinality())
		}
		l.uids += cur.n
	}
	m.backlog.Set(float64(l.uids))
}

// liveMetrics are the live view's series.
type liveMetrics struct {
	set     prometheus.Counter
	errors  prometheus.Counter
	dropped prometheus.Counter
	backlog prometheus.Gauge
	// unknownUsers is in this file for want of a better one: deltas by
	// UserID (Options.Members) whose UserID the directory does not know.
	unknownUsers prometheus.Counter
}

func newLiveMetrics(reg prometheus.Registerer) (*liveMetrics, error) {
	f := metric.New(reg)
	m := &liveMetrics{
		set:     f.Counter("yidu_flushd_live_bits_set_total", "Redis read and signal bits flushd set after writing their rows (bits Redis lacked: lost data, or down when the signal arrived)."),
		errors:  f.Counter("yidu_flushd_live_errors_total", "Failed attempts to set written bits in Redis (retried with backoff)."),
		dropped: f.Counter("yidu_flushd_live_dropped_total", "Written bits given up on because the Redis backlog exceeded max_pending (yidu reconcile repairs them)."),
		backlog: f.Gauge("yidu_flushd_live_backlog", "Bits written to MySQL and not yet to Redis."),
		unknownUsers: f.Counter("yidu_flushd_unknown_userids_total",
			"Deltas that named their member by UserID (taken while MySQL was down) whose UserID the directory does not know: dropped."),
	}
	return m, f.Err("flushd")
}

// heal sets the backlog's bits in Redis, one message at a time, each
// bounded by liveTimeout; what fails waits for the next flush, with
// backoff. It reports whether Redis now has every bit written so far
// (the backlog is empty), which is when offsets may be committed.
// Called without f.mu held.
func (f *Flusher) heal(ctx context.Context) (healed bool) {
	if f.liveView == nil {
		return true
	}
	defer func() {
		f.mu.Lock()
		healed = len(f.live.msgs) == 0
		f.mu.Unlock()
	}()
	f.mu.Lock()
	todo := f.live.take(time.Now())
	f.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	failed := false
	for k, b := range todo {
		if failed || ctx.Err() != nil {
			break
		}
		hctx, cancel := context.WithTimeout(ctx, liveTimeout)
		set, err := f.liveView.Heal(hctx, k.corpID, k.msgID, b.read, b.signals)
		cancel()
		if err != nil {
			f.lm.errors.Inc()
			f.logger.Warn("set written bits in Redis; retrying with the next flush", "corp_id", k.corpID, "msgid", k.msgID, "err", err)
			failed = true
			break
		}
		f.lm.set.Add(float64(set))
		delete(todo, k)
	}
	f.mu.Lock()
	f.live.putBack(todo, time.Now(), f.liveBackoff, f.lm)
	f.mu.Unlock()
	return
}
