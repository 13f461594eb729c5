package flushd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/opt"
)

// Options configure a Flusher. Zero values take the defaults noted.
type Options struct {
	// Brokers, Topic and Group name the deltas topic and the consumer
	// group; flushd instances sharing Group split the partitions.
	Brokers []string
	Topic   string
	Group   string
	// Interval flushes a message's pending reads at least this often
	// (default 1 minute).
	Interval time.Duration
	// BatchSize is the most uids per UPDATE (default 5000, at most
	// MaxBatchSize). A message with this many dirty uids is flushed at once.
	BatchSize int
	// Statement is the batch UPDATE's form (zero: StatementJSONTable);
	// StatementFor picks it for a server.
	Statement Statement
	// MaxPending is the most reads held unwritten; at the limit the
	// Flusher stops fetching and flushes everything (default 1,000,000).
	MaxPending int
	// DrainTimeout bounds the final flush on shutdown and the flush of
	// revoked partitions (default 20 s).
	DrainTimeout time.Duration
	// SessionTimeout is how long the group waits for a member that went
	// silent (a flushd killed with -9, a lost host) before it gives that
	// member's partitions to the others (default 10 s; franz-go's own is
	// 45 s). The broker bounds it (group.min.session.timeout.ms, 6 s by
	// default, and group.max.session.timeout.ms).
	SessionTimeout time.Duration
	// InstanceID, when set, makes this Flusher a static group member
	// (KIP-345, Kafka 2.3+): restarted with the same ID it takes its
	// partitions back at once, without a rebalance and without waiting for
	// the session timeout. A static member does not leave the group when it
	// stops, so its partitions wait up to SessionTimeout for it. Two running
	// Flushers must never share an ID: the newer fences the older out.
	InstanceID string
	// Logger receives flushd's logs (nil: discarded).
	Logger *slog.Logger
	// Registerer receives flushd's metrics (nil: registered nowhere).
	Registerer prometheus.Registerer
	// Ledger, when set, gets one evidence entry per row a batch makes
	// read, in the batch's transaction (issue 40; db must then be a
	// *sql.DB). Nil: batches are single statements, no ledger.
	Ledger Ledger
	// LockFirst opens every ledger batch with its locking read, never
	// trying first one UPDATE of the unread rows that is rolled back
	// when it does not make every read's row read (Writer.writeAllNew).
	// For a server whose ROLLBACK does not undo that UPDATE:
	// go-mysql-server, the demo's embedded MySQL (LockFirstFor).
	LockFirst bool
	// FetchWait is how long the broker may hold a fetch to gather
	// FetchMinBytes of deltas before it answers (default 200 ms; Kafka's
	// fetch.max.wait.ms with fetch.min.bytes). With franz-go's defaults
	// (1 byte) a fetch is answered as soon as any record is there, so
	// every produce batch can wake one: the wait took about a third off
	// the broker's and this client's CPU in the storm (docs/benchmarks.md).
	// A delta waits at most this long more before it is pending, against
	// Interval's minute.
	FetchWait time.Duration
	// KafkaOpts are added to the client's options (TLS, SASL, tuning);
	// they come after flushd's own, so they override them.
	KafkaOpts []kgo.Opt
	// Live, when set, gets the bits of every row written (read and signal
	// bits, recipients only) right after the statement and before the
	// offsets are committed, so Redis converges to MySQL by itself after
	// it lost data or was down when a signal arrived (docs/reliability.md).
	// A Redis failure never holds MySQL back: the bits wait, at most
	// MaxPending of them, and are retried with backoff.
	Live LiveView
	// Members maps the UserID of a delta that carries one (the receiver
	// took it while MySQL could not map it) to its uid before the write;
	// idmap.Mapper provides it. Without it such deltas are skipped as
	// malformed.
	Members Members
}

// Members maps WeCom UserIDs to uids (idmap.Mapper).
type Members interface {
	Lookup(ctx context.Context, corpID, userID string) (uid uint32, ok bool, err error)
}

// DefaultFetchWait is Options.FetchWait when left out, and
// FetchMinBytes what a fetch gathers within it: at storm rates a fetch
// then carries a fifth of a second's deltas.
const (
	DefaultFetchWait = 200 * time.Millisecond
	FetchMinBytes    = 1 << 20
)

// DefaultSessionTimeout is Options.SessionTimeout when left out: a killed
// Flusher's partitions move to the others this long after its last
// heartbeat.
const DefaultSessionTimeout = 10 * time.Second

// Flusher consumes deltas and writes them to MySQL; see the package doc.
type Flusher struct {
	cl           *kgo.Client
	w            *Writer
	topic        string
	interval     time.Duration
	batchSize    int
	maxPending   int
	drainTimeout time.Duration
	logger       *slog.Logger
	guard        *loop.Guard
	m            *metrics
	backoff      backoff
	logMalformed rate.Sometimes

	// mu guards the fields below. The poll loop holds the poll (see
	// kgo.BlockRebalanceOnPoll) while it works, but the revoke and lost
	// callbacks may still run while it sleeps under backpressure.
	mu       sync.Mutex
	p        *pending
	failures int
	retryAt  time.Time

	members     Members
	liveView    LiveView
	live        *live
	lm          *liveMetrics
	liveBackoff backoff

	paused    bool // poll loop only
	closeOnce sync.Once
	// skipCommit makes commits no-ops: tests use it to crash between
	// writing rows and committing offsets.
	skipCommit atomic.Bool
}

// New returns a Flusher writing through db and consuming as a member of
// opts.Group. It creates its own Kafka client because the rebalance
// callbacks must be installed when the client is built. Call Run once.
func New(db DB, opts Options) (*Flusher, error) {
	if len(opts.Brokers) == 0 || opts.Topic == "" || opts.Group == "" {
		return nil, errors.New("flushd: brokers, topic and group are required")
	}
	opt.Positive(&opts.Interval, time.Minute)
	opt.Positive(&opts.MaxPending, 1_000_000)
	opt.Positive(&opts.DrainTimeout, 20*time.Second)
	opt.Positive(&opts.SessionTimeout, DefaultSessionTimeout)
	opt.Positive(&opts.FetchWait, DefaultFetchWait)
	opt.Logger(&opts.Logger)
	logger := opts.Logger.With("component", "flushd")
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	w, err := newWriter(db, opts.BatchSize, opts.Statement, logger, m)
	if err != nil {
		return nil, err
	}
	if err := w.setLedger(opts.Ledger); err != nil {
		return nil, err
	}
	w.lockFirst = opts.LockFirst
	lm, err := newLiveMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	// A panic in one message's batch is recovered, counted
	// (yidu_loop_panics_total{loop="flushd"}) and retried as a failed
	// flush, with the flush backoff: flushd keeps running (issue 46).
	guard, err := loop.New("flushd", loop.Options{Registerer: opts.Registerer, Logger: logger})
	if err != nil {
		return nil, err
	}
	f := &Flusher{
		guard:        guard,
		w:            w,
		topic:        opts.Topic,
		interval:     opts.Interval,
		batchSize:    w.batchSize,
		maxPending:   opts.MaxPending,
		drainTimeout: opts.DrainTimeout,
		logger:       logger,
		m:            m,
		backoff:      defaultBackoff,
		logMalformed: rate.Sometimes{Interval: 10 * time.Second},
		p:            newPending(),
		liveView:     opts.Live,
		members:      opts.Members,
		live:         newLive(opts.MaxPending),
		liveBackoff:  liveBackoff,
		lm:           lm,
	}
	kopts := append([]kgo.Opt{
		kgo.SeedBrokers(opts.Brokers...),
		kgo.ConsumeTopics(opts.Topic),
		kgo.ConsumerGroup(opts.Group),
		kgo.DisableAutoCommit(),
		// Rebalance callbacks run only between polls, never while a
		// fetch is half added to pending.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(f.revoked),
		kgo.OnPartitionsLost(f.lost),
		kgo.SessionTimeout(opts.SessionTimeout),
		// Kafka advises heartbeats at most a third of the session
		// timeout; franz-go's default 3 s would exceed a short one.
		kgo.HeartbeatInterval(min(3*time.Second, opts.SessionTimeout/3)),
		kgo.FetchMaxWait(opts.FetchWait),
		kgo.FetchMinBytes(FetchMinBytes),
	}, opts.KafkaOpts...)
	if opts.InstanceID != "" {
		kopts = append(kopts, kgo.InstanceID(opts.InstanceID))
	}
	f.cl, err = kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("flushd: kafka client: %w", err)
	}
	return f, nil
}

// Close leaves the group and closes the Kafka client; Run calls it on
// return. It is for a Flusher whose Run never started.
func (f *Flusher) Close() {
	f.closeOnce.Do(f.cl.CloseAllowingRebalance)
}

// Run consumes until ctx is cancelled, then stops fetching, flushes what is
// pending within DrainTimeout, commits and returns nil; or an error when
// the drain could not write everything (the rest is replayed by the next
// owner) or the client closed.
func (f *Flusher) Run(ctx context.Context) error {
	defer f.Close()
	// Statements run under wctx, not ctx: cancelling ctx must not abort a
	// statement half way; wctx ends DrainTimeout after ctx does.
	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer wcancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(f.drainTimeout, wcancel) })
	defer stop()
	for {
		if ctx.Err() != nil {
			return f.drain(wctx)
		}
		f.mu.Lock()
		wait := f.waitLocked(time.Now())
		room := f.maxPending - f.p.uids
		f.mu.Unlock()

		polled := false
		if room <= 0 {
			// Backpressure: stop fetching until a flush makes room.
			if !f.paused {
				f.cl.PauseFetchTopics(f.topic)
				f.paused = true
				f.logger.Warn("pending reads at max_pending, fetching paused", "pending", f.maxPending)
			}
			_ = jitter.Sleep(ctx, wait) // cut short by ctx: the next turn drains
		} else {
			if f.paused {
				f.cl.ResumeFetchTopics(f.topic)
				f.paused = false
			}
			pctx, cancel := context.WithTimeout(ctx, wait)
			fetches := f.cl.PollRecords(pctx, room)
			cancel()
			polled = true
			if fetches.IsClientClosed() {
				return errors.New("flushd: kafka client closed")
			}
			fetches.EachError(func(topic string, part int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					f.logger.Error("fetch", "topic", topic, "partition", part, "err", err)
				}
			})
			f.mu.Lock()
			f.take(fetches, time.Now())
			f.mu.Unlock()
		}
		if ctx.Err() != nil {
			return f.drain(wctx)
		}
		f.flushDue(wctx)
		if polled {
			f.cl.AllowRebalance()
		}
	}
}

// waitLocked returns how long the loop may wait for records before a flush
// is due (or a failed flush may be retried).
func (f *Flusher) waitLocked(now time.Time) time.Duration {
	next, ok := f.p.nextDue(f.interval)
	if !ok {
		next = now.Add(f.interval)
	}
	if f.retryAt.After(next) {
		next = f.retryAt
	}
	if f.liveView != nil && len(f.live.msgs) > 0 && f.live.retryAt.Before(next) {
		next = f.live.retryAt
	}
	return max(next.Sub(now), time.Millisecond)
}

// take adds the fetched deltas to pending.
func (f *Flusher) take(fetches kgo.Fetches, now time.Time) {
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		for _, r := range p.Records {
			off := kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset}
			d, err := decode(r.Value)
			if err != nil {
				f.m.malformed.Inc()
				f.logMalformed.Do(func() {
					f.logger.Warn("skipping malformed delta (logged at most every 10s)",
						"partition", p.Partition, "offset", r.Offset, "err", err)
				})
				f.p.skip(p.Partition, off)
				continue
			}
			f.p.add(p.Partition, off, d, now)
		}
		last := p.Records[len(p.Records)-1].Offset
		f.m.lag.WithLabelValues(strconv.Itoa(int(p.Partition))).Set(float64(max(p.HighWatermark-last-1, 0)))
	})
	f.m.pending.Set(float64(f.p.uids))
}

// decode returns the delta in a record value, or an error when the record
// can never be written.
func decode(value []byte) (delta.Delta, error) {
	d, err := delta.Unmarshal(value)
	if err != nil {
		return d, err
	}
	return d, checkDelta(d)
}

// resolve returns b's reads with those named by UserID mapped to their
// uids (one lookup each; a UserID the directory does not know is no
// recipient of anything and is dropped, counted). A lookup error (MySQL
// down) fails the flush, which is retried with backoff like a failed
// write.
func (f *Flusher) resolve(ctx context.Context, corpID string, b *batch) ([]Read, error) {
	reads := b.reads()
	if len(b.byUser) == 0 {
		return reads, nil
	}
	for userID, r := range b.byUser {
		if f.members == nil {
			f.m.malformed.Inc()
			continue
		}
		uid, ok, err := f.members.Lookup(ctx, corpID, userID)
		if err != nil {
			return nil, fmt.Errorf("flushd: map userids of %s: %w", corpID, err)
		}
		if !ok {
			f.lm.unknownUsers.Inc()
			continue
		}
		r.UID = uid
		reads = append(reads, r)
	}
	return reads, nil
}

// flushDue writes the batches that are due, unless a failed flush is
// still backing off, and commits what is written.
func (f *Flusher) flushDue(ctx context.Context) {
	f.mu.Lock()
	now := time.Now()
	if now.Before(f.retryAt) {
		f.mu.Unlock()
		return
	}
	all := f.p.uids >= f.maxPending
	due := f.p.due(now, f.interval, f.batchSize, all)
	err := f.flushLocked(ctx, due)
	switch {
	case err != nil && ctx.Err() == nil:
		f.failures++
		f.retryAt = now.Add(f.backoff.wait(f.failures))
		f.onRetry(err)
	case err == nil && len(due) > 0:
		f.failures = 0
	}
	points := f.p.commitPoints(nil)
	f.mu.Unlock()
	// Redis before the commit: a crash in between replays the deltas, and
	// the replay sets the bits again. So nothing is committed while Redis
	// still lacks bits of what was written (healed false): a kill -9
	// then replays those deltas and the replay heals them, where a
	// commit would have left them to `yidu reconcile`.
	healed := false
	_ = f.guard.Recover("live view", func() error { healed = f.heal(ctx); return nil })
	if !healed {
		points = nil
	}
	if err := f.commit(ctx, points); err != nil && ctx.Err() == nil {
		f.logger.Error("commit offsets; retrying with the next flush", "err", err)
	}
}

func (f *Flusher) onRetry(err error) {
	f.m.retries.Inc()
	f.logger.Error("flush failed; retrying with backoff", "err", err, "failures", f.failures)
}

// flushLocked writes batches, dropping each from pending once written. It
// stops at the first failure: the rest stay pending.
func (f *Flusher) flushLocked(ctx context.Context, batches []dueBatch) error {
	defer func() { f.m.pending.Set(float64(f.p.uids)) }()
	for _, db := range batches {
		var resolveErr error
		err := f.guard.Recover(db.key.corpID+"/"+db.key.msgID, func() error {
			reads, err := f.resolve(ctx, db.key.corpID, db.b)
			if err != nil {
				resolveErr = err
				return nil
			}
			_, _, err = f.w.Write(ctx, db.key.corpID, db.key.msgID, reads)
			if err == nil && f.liveView != nil {
				f.live.add(db.key, reads, f.lm)
			}
			return err
		})
		if resolveErr != nil {
			return resolveErr
		}
		if errors.Is(err, ErrInvalid) {
			// checkDelta let through something MySQL cannot hold:
			// retrying would stop the partition forever.
			f.m.malformed.Add(float64(db.b.uids.GetCardinality()))
			f.logger.Error("dropping unwritable batch", "partition", db.part, "err", err)
		} else if err != nil {
			return err
		}
		f.p.written(db.part, db.key)
	}
	return nil
}

// commit commits points of f.topic and records the partitions that
// succeeded.
func (f *Flusher) commit(ctx context.Context, points map[int32]kgo.EpochOffset) error {
	if len(points) == 0 || f.skipCommit.Load() {
		return nil
	}
	var errs []error
	f.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{f.topic: points},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				errs = append(errs, err)
				clear(points)
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						errs = append(errs, fmt.Errorf("partition %d: %w", p.Partition, err))
						delete(points, p.Partition)
					}
				}
			}
		})
	if len(points) > 0 {
		f.m.commits.Inc()
		f.mu.Lock()
		f.p.committed(points)
		f.mu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("flushd: commit: %w", errors.Join(errs...))
	}
	return nil
}

// drain is the shutdown path. Run's ctx is already cancelled: ctx is the
// write context, which ends DrainTimeout after it.
func (f *Flusher) drain(ctx context.Context) error {
	f.cl.PauseFetchTopics(f.topic)
	f.mu.Lock()
	err := retry(ctx, f.backoff, func() error {
		return f.flushLocked(ctx, f.p.due(time.Time{}, 0, 0, true))
	}, f.onRetry)
	points := f.p.commitPoints(nil)
	left := f.p.uids
	f.live.retryAt = time.Time{} // one last try, backoff or not
	f.mu.Unlock()
	if !f.heal(ctx) {
		points = nil // the next owner replays them and heals
	}
	cerr := f.commit(ctx, points)

	// Whatever is left is replayed by the next owner; forgetting it here
	// keeps the revoke callback of Close from waiting a second timeout.
	f.mu.Lock()
	all := make([]int32, 0, len(f.p.parts))
	for n := range f.p.parts {
		all = append(all, n)
	}
	f.p.drop(all)
	f.mu.Unlock()

	if err != nil {
		return fmt.Errorf("flushd: drain: %d reads left unwritten for replay: %w", left, err)
	}
	return cerr
}

// revoked flushes and commits the revoked partitions before they go to
// another member. What cannot be written within DrainTimeout is left
// uncommitted for the new owner to replay.
func (f *Flusher) revoked(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
	parts := tps[f.topic]
	if len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.drainTimeout)
	defer cancel()
	f.mu.Lock()
	err := retry(ctx, f.backoff, func() error {
		return f.flushLocked(ctx, f.p.of(parts))
	}, f.onRetry)
	points := f.p.commitPoints(parts)
	f.mu.Unlock()
	if !f.heal(ctx) {
		points = nil // the new owner replays them and heals
	}
	if err != nil {
		f.logger.Error("revoked partitions keep unwritten reads; their new owner replays them",
			"partitions", parts, "err", err)
	}
	if err := f.commit(ctx, points); err != nil {
		f.logger.Error("commit revoked partitions; their new owner replays them", "partitions", parts, "err", err)
	}
	f.forget(parts)
}

// lost drops the lost partitions' pending reads without committing: the
// group has moved on and the new owner replays them.
func (f *Flusher) lost(_ context.Context, _ *kgo.Client, tps map[string][]int32) {
	parts := tps[f.topic]
	if len(parts) == 0 {
		return
	}
	f.logger.Warn("partitions lost; their pending reads are left to the new owner", "partitions", parts)
	f.forget(parts)
}

func (f *Flusher) forget(parts []int32) {
	f.mu.Lock()
	f.p.drop(parts)
	f.m.pending.Set(float64(f.p.uids))
	f.mu.Unlock()
	for _, n := range parts {
		f.m.lag.DeleteLabelValues(strconv.Itoa(int(n)))
	}
}
