// Package reconcile compares a message's Redis bitmaps (read, and each
// signal's) with MySQL's rows (is_read, and each signal's first time:
// button_at, link_at, enter_at) and repairs whichever side is behind
// (yidu reconcile):
//
//   - Redis lost the message (restart without persistence, TTL expiry):
//     the recipients, read and signal bitmaps are rebuilt from MySQL, one
//     query.
//   - Redis lacks reads or signals MySQL has (Redis restored while deltas
//     were still in Kafka, or keys written before signals were kept
//     apart): they are OR-ed into its bitmaps; nothing is cleared.
//   - MySQL lacks reads Redis has (a read WeCom stopped retrying after its
//     bit was set, or deltas not yet flushed): a counted delta is emitted
//     for each, source "reconcile". flushd's is_read = 0 guard makes the
//     ones that were merely in flight a no-op, and a delta emitted here
//     usually comes after the original in its partition, so an original
//     read_time wins. Redis keeps no read times, so an emitted read carries
//     the reconcile time: an upper bound of when it was read.
//   - MySQL lacks signals Redis has: a delta of that signal that does not
//     count is emitted for each, also at the reconcile time (flushd keeps
//     a signal's first time written, so an original in flight wins there
//     too). It never makes a row read: only the read bitmap decides that.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/opt"
)

// Archive reads a message back from MySQL; tracker.Registry provides it.
type Archive interface {
	LoadReads(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, found bool, err error)
}

// Bitmaps is the Redis side; bitmap.Store provides it.
type Bitmaps interface {
	ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	SignalBitmap(ctx context.Context, corpID, msgID string, sig yidu.Signal) (*roaring.Bitmap, bool, error)
	RestoreReads(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error
}

// Publisher makes deltas durable; delta.Producer provides it.
type Publisher interface {
	Publish(ctx context.Context, ds []delta.Delta) error
}

// Reconciler repairs drift between Redis and MySQL.
type Reconciler struct {
	archive Archive
	bitmaps Bitmaps
	pub     Publisher
	log     *slog.Logger
	now     func() time.Time
}

// Options configure a Reconciler.
type Options struct {
	// Logger receives its logs (nil: discarded).
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// New returns a Reconciler of a's archive and b's bitmaps, emitting
// missing deltas through p.
func New(a Archive, b Bitmaps, p Publisher, opts Options) (*Reconciler, error) {
	if a == nil || b == nil || p == nil {
		return nil, errors.New("reconcile: archive, bitmaps and publisher are required")
	}
	opt.Clock(&opts.Now)
	opt.Logger(&opts.Logger)
	return &Reconciler{archive: a, bitmaps: b, pub: p, log: opts.Logger.With("component", "reconcile"), now: opts.Now}, nil
}

// Report says what one message's reconciliation found and changed.
type Report struct {
	CorpID, MsgID string
	Found         bool  // the message exists in MySQL
	Recipients    int64 // recipients in MySQL
	MySQLRead     int64 // is_read rows before
	RedisRead     int64 // read bits before (0 when the keys were gone)
	RedisMissing  bool  // the Redis keys were gone and were rebuilt
	RestoredBits  int64 // reads copied MySQL → Redis
	EmittedDeltas int64 // reads sent Redis → Kafka → MySQL
	// RestoredSignals and EmittedSignals are the same for signal facts
	// (summed over the signals).
	RestoredSignals int64
	EmittedSignals  int64
	// UnarchivedPageSignals counts read_to_end and acknowledged bits
	// Redis has and MySQL lacks: not re-emitted (the version read is
	// not in Redis), only reported.
	UnarchivedPageSignals int64
}

// String formats the report for the command line.
func (r Report) String() string {
	if !r.Found {
		return fmt.Sprintf("%s/%s: not in MySQL", r.CorpID, r.MsgID)
	}
	return fmt.Sprintf("%s/%s: recipients=%d mysql_read=%d redis_read=%d redis_rebuilt=%t restored_bits=%d emitted_deltas=%d restored_signals=%d emitted_signals=%d",
		r.CorpID, r.MsgID, r.Recipients, r.MySQLRead, r.RedisRead, r.RedisMissing, r.RestoredBits, r.EmittedDeltas,
		r.RestoredSignals, r.EmittedSignals)
}

// maxPublish bounds the deltas sent in one Publish call.
const maxPublish = 5000

// Message reconciles one message.
func (r *Reconciler) Message(ctx context.Context, corpID, msgID string) (Report, error) {
	rep := Report{CorpID: corpID, MsgID: msgID}
	m, rcpt, mysqlRead, mysqlSignals, found, err := r.archive.LoadReads(ctx, corpID, msgID)
	if err != nil {
		return rep, fmt.Errorf("reconcile: load %s/%s: %w", corpID, msgID, err)
	}
	if !found {
		return rep, nil
	}
	rep.Found = true
	rep.Recipients = int64(rcpt.GetCardinality())
	rep.MySQLRead = int64(mysqlRead.GetCardinality())
	redisRead, ok, err := r.bitmaps.ReadBitmap(ctx, corpID, msgID)
	if err != nil {
		return rep, fmt.Errorf("reconcile: redis read bitmap %s/%s: %w", corpID, msgID, err)
	}
	if !ok {
		rep.RedisMissing = true
		redisRead = roaring.New()
	}
	rep.RedisRead = int64(redisRead.GetCardinality())
	redisSignals := map[yidu.Signal]*roaring.Bitmap{}
	for _, sig := range yidu.Signals() {
		b, ok, err := r.bitmaps.SignalBitmap(ctx, corpID, msgID, sig)
		if err != nil {
			return rep, fmt.Errorf("reconcile: redis %s bitmap %s/%s: %w", sig, corpID, msgID, err)
		}
		if !ok {
			b = roaring.New()
		}
		redisSignals[sig] = b
	}

	// MySQL → Redis.
	toRedis := roaring.AndNot(mysqlRead, redisRead)
	var signalsToRedis int64
	for _, sig := range yidu.Signals() {
		signalsToRedis += int64(roaring.AndNot(orEmpty(mysqlSignals[sig]), redisSignals[sig]).GetCardinality())
	}
	if rep.RedisMissing || !toRedis.IsEmpty() || signalsToRedis > 0 {
		if err := r.bitmaps.RestoreReads(ctx, m, rcpt, mysqlRead, mysqlSignals); err != nil {
			return rep, fmt.Errorf("reconcile: restore %s/%s: %w", corpID, msgID, err)
		}
		rep.RestoredBits = int64(toRedis.GetCardinality())
		rep.RestoredSignals = signalsToRedis
	}

	// Redis → Kafka → MySQL: the reads, then each signal's facts.
	at := r.now().Unix()
	toMySQL := roaring.AndNot(roaring.And(redisRead, rcpt), mysqlRead)
	n, err := r.emit(ctx, toMySQL, func(uid uint32) delta.Delta {
		return delta.Delta{CorpID: corpID, MsgID: msgID, UID: uid, ReadTime: at, Source: delta.SourceReconcile, Counted: true}
	})
	rep.EmittedDeltas = n
	if err != nil {
		return rep, err
	}
	for _, sig := range yidu.Signals() {
		missing := roaring.AndNot(roaring.And(redisSignals[sig], rcpt), orEmpty(mysqlSignals[sig]))
		if sig == yidu.SignalReadToEnd || sig == yidu.SignalAcknowledged {
			// The archive keeps these per version read, with the reader's
			// address (page_signals); a bit in Redis knows neither, and
			// inventing the evidence would be worse than lacking it.
			// Answered 200 only once durable in Kafka or the spool, they
			// reach MySQL through flushd.
			rep.UnarchivedPageSignals += int64(missing.GetCardinality())
			continue
		}
		n, err := r.emit(ctx, missing, func(uid uint32) delta.Delta {
			return delta.Delta{CorpID: corpID, MsgID: msgID, UID: uid, ReadTime: at, Source: delta.SourceOf(sig)}
		})
		rep.EmittedSignals += n
		if err != nil {
			return rep, err
		}
	}
	r.log.Info("reconciled", "corp", corpID, "msgid", msgID, "redis_rebuilt", rep.RedisMissing,
		"restored_bits", rep.RestoredBits, "emitted_deltas", rep.EmittedDeltas,
		"restored_signals", rep.RestoredSignals, "emitted_signals", rep.EmittedSignals,
		"unarchived_page_signals", rep.UnarchivedPageSignals)
	return rep, nil
}

// emit publishes one delta per uid, at most maxPublish per call, and
// returns how many were acknowledged.
func (r *Reconciler) emit(ctx context.Context, uids *roaring.Bitmap, mk func(uid uint32) delta.Delta) (int64, error) {
	var n int64
	batch := make([]delta.Delta, 0, min(maxPublish, int(uids.GetCardinality())))
	it := uids.Iterator()
	for it.HasNext() {
		d := mk(it.Next())
		batch = append(batch, d)
		if len(batch) == maxPublish || !it.HasNext() {
			if err := r.pub.Publish(ctx, batch); err != nil {
				return n, fmt.Errorf("reconcile: publish %s/%s: %w", d.CorpID, d.MsgID, err)
			}
			n += int64(len(batch))
			batch = batch[:0]
		}
	}
	return n, nil
}

func orEmpty(b *roaring.Bitmap) *roaring.Bitmap {
	if b == nil {
		return roaring.New()
	}
	return b
}
