// Package reconcile compares a message's Redis read bitmap with MySQL's
// is_read rows and repairs whichever side is behind (yidu reconcile):
//
//   - Redis lost the message (restart without persistence, TTL expiry):
//     the recipients and read bitmaps are rebuilt from MySQL, one query.
//   - Redis lacks reads MySQL has (Redis restored while deltas were still
//     in Kafka): they are OR-ed into the read bitmap; nothing is cleared.
//   - MySQL lacks reads Redis has (a read WeCom stopped retrying after its
//     bit was set, or deltas not yet flushed): a delta is emitted for each,
//     source "reconcile". flushd's is_read = 0 guard makes the ones that
//     were merely in flight a no-op, and a delta emitted here always comes
//     after the original in its partition, so an original read_time wins.
//     Redis keeps no read times, so an emitted read carries the reconcile
//     time: an upper bound of when it was read.
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
)

// Archive reads a message back from MySQL; tracker.Registry provides it.
type Archive interface {
	LoadMessage(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, found bool, err error)
}

// Bitmaps is the Redis side; bitmap.Store provides it.
type Bitmaps interface {
	ReadBitmap(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, bool, error)
	RestoreMessage(ctx context.Context, m yidu.Message, recipients, read *roaring.Bitmap) error
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
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
}

// String formats the report for the command line.
func (r Report) String() string {
	if !r.Found {
		return fmt.Sprintf("%s/%s: not in MySQL", r.CorpID, r.MsgID)
	}
	return fmt.Sprintf("%s/%s: recipients=%d mysql_read=%d redis_read=%d redis_rebuilt=%t restored_bits=%d emitted_deltas=%d",
		r.CorpID, r.MsgID, r.Recipients, r.MySQLRead, r.RedisRead, r.RedisMissing, r.RestoredBits, r.EmittedDeltas)
}

// maxPublish bounds the deltas sent in one Publish call.
const maxPublish = 5000

// Message reconciles one message.
func (r *Reconciler) Message(ctx context.Context, corpID, msgID string) (Report, error) {
	rep := Report{CorpID: corpID, MsgID: msgID}
	m, rcpt, mysqlRead, found, err := r.archive.LoadMessage(ctx, corpID, msgID)
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

	toRedis := roaring.AndNot(mysqlRead, redisRead)
	if rep.RedisMissing || !toRedis.IsEmpty() {
		if err := r.bitmaps.RestoreMessage(ctx, m, rcpt, mysqlRead); err != nil {
			return rep, fmt.Errorf("reconcile: restore %s/%s: %w", corpID, msgID, err)
		}
		rep.RestoredBits = int64(toRedis.GetCardinality())
	}

	toMySQL := roaring.AndNot(roaring.And(redisRead, rcpt), mysqlRead)
	if !toMySQL.IsEmpty() {
		at := r.now().Unix()
		batch := make([]delta.Delta, 0, maxPublish)
		it := toMySQL.Iterator()
		for it.HasNext() {
			batch = append(batch, delta.Delta{CorpID: corpID, MsgID: msgID, UID: it.Next(), ReadTime: at, Source: delta.SourceReconcile})
			if len(batch) == maxPublish || !it.HasNext() {
				if err := r.pub.Publish(ctx, batch); err != nil {
					return rep, fmt.Errorf("reconcile: publish %s/%s: %w", corpID, msgID, err)
				}
				rep.EmittedDeltas += int64(len(batch))
				batch = batch[:0]
			}
		}
	}
	r.log.Info("reconciled", "corp", corpID, "msgid", msgID, "redis_rebuilt", rep.RedisMissing,
		"restored_bits", rep.RestoredBits, "emitted_deltas", rep.EmittedDeltas)
	return rep, nil
}
