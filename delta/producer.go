package delta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/yidu-io/yidu/internal/opt"
)

// ProducerOptions configures a Producer. Zero fields take the defaults.
type ProducerOptions struct {
	// Linger lets concurrent callbacks' records share a produce batch
	// (default 300 µs). The idempotent producer has one request in flight
	// per broker, so under load batches form behind it anyway; the linger
	// decides how small they are when the pipe is idle, and every
	// callback's 200 waits for it. In the 9:00 storm benchmark
	// (docs/benchmarks.md, issue 16) 150 and 300 µs were the fastest of 0,
	// 150 µs, 300 µs, 500 µs and 1 ms on 2026-12-02 (17,300/s against
	// 16,500/s at 500 µs and 15,200/s at 1 ms); the broker spent 0.007
	// CPU-s per 1000 callbacks at 300 µs, 0.005 at 1 ms and 0.011 at 0.
	// On a CPU-bound day 1 and 3 ms had run at the same rate: a closed
	// loop's rate is its connections over the latency, and a linger is
	// latency.
	Linger time.Duration
	// DeliveryTimeout fails a record Kafka has not acknowledged in time
	// (default 2 s, below the receiver's 3 s deadline, so the caller
	// learns of the failure and answers 503 itself).
	DeliveryTimeout time.Duration
	Logger          *slog.Logger
	// Extra kgo options (TLS, SASL) appended last.
	Extra []kgo.Opt
}

// Producer publishes deltas to the deltas topic and waits for their acks.
type Producer struct {
	cl    *kgo.Client
	topic string
	log   *slog.Logger
}

// NewProducer returns an idempotent, acks=all producer for topic.
func NewProducer(brokers []string, topic string, opts ProducerOptions) (*Producer, error) {
	if topic == "" || len(brokers) == 0 {
		return nil, errors.New("delta: producer: brokers and topic are required")
	}
	opt.Positive(&opts.Linger, 300*time.Microsecond)
	opt.Positive(&opts.DeliveryTimeout, 2*time.Second)
	opt.Logger(&opts.Logger)
	kopts := []kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(topic),
		// Idempotence is kgo's default and needs acks=all; say both so a
		// later edit cannot weaken durability silently.
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(opts.Linger),
		kgo.RecordDeliveryTimeout(opts.DeliveryTimeout),
	}
	kopts = append(kopts, opts.Extra...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("delta: producer: %w", err)
	}
	return &Producer{cl: cl, topic: topic, log: opts.Logger.With("component", "delta.producer")}, nil
}

// Publish produces every delta (key Key, value Marshal) and
// returns when Kafka acknowledged all of them, at the first failure, or
// when ctx is done. After an error some deltas may still be written; the
// read path's re-emission makes that harmless.
func (p *Producer) Publish(ctx context.Context, ds []Delta) error {
	if len(ds) == 0 {
		return nil
	}
	w := &publishWait{done: make(chan error, 1)}
	w.left.Store(int64(len(ds)))
	for _, d := range ds {
		// Key and value share one allocation.
		b := AppendKey(make([]byte, 0, 2*(len(d.CorpID)+len(d.MsgID))+len(d.UserID)+24), d.CorpID, d.MsgID)
		k := len(b)
		b = AppendMarshal(b, d)
		p.cl.Produce(ctx, &kgo.Record{Topic: p.topic, Key: b[:k:k], Value: b[k:]}, w.promise)
	}
	select {
	case err := <-w.done:
		if err != nil {
			return fmt.Errorf("delta: publish: %w", err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("delta: publish: %w", ctx.Err())
	}
}

// publishWait is one Publish waiting for its records' acks: done gets the
// first error, or nil once every record is acknowledged.
type publishWait struct {
	left atomic.Int64
	done chan error // buffered 1: the first send wins, the others are dropped
}

// promise runs in kgo's delivery goroutine: it must never block
// (franz-go documents a deadlock otherwise), so it only does non-blocking
// sends.
func (w *publishWait) promise(_ *kgo.Record, err error) {
	if err != nil {
		select {
		case w.done <- err:
		default:
		}
	}
	if w.left.Add(-1) == 0 {
		select {
		case w.done <- nil:
		default:
		}
	}
}

// Ping reports whether a broker answers and the topic exists: the
// receiver's readiness, since without Kafka every read would be a 503.
func (p *Producer) Ping(ctx context.Context) error {
	td, err := kadm.NewClient(p.cl).ListTopics(ctx, p.topic)
	if err != nil {
		return fmt.Errorf("delta: kafka ping: %w", err)
	}
	d, ok := td[p.topic]
	if !ok {
		return fmt.Errorf("delta: kafka ping: topic %q not in metadata", p.topic)
	}
	if d.Err != nil {
		return fmt.Errorf("delta: kafka ping: topic %q: %w", p.topic, d.Err)
	}
	return nil
}

// Close flushes what is buffered (bounded by 5 s) and closes the client.
// Stop the receiver first: Publish after Close fails.
func (p *Producer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		p.log.Warn("flush on close", "err", err)
	}
	p.cl.Close()
}
