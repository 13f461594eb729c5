package bitmap

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/bitmap/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

const testCorp = "wwcorp"

// mustStore returns a started Store under a fresh test prefix, closed when
// the test ends.
func mustStore(tb testing.TB, opts Options) (*Store, *redis.Client) {
	tb.Helper()
	rdb, prefix := testenv.Redis(tb)
	opts.Prefix = prefix
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	s := New(rdb, opts)
	tb.Cleanup(s.Close)
	return s, rdb
}

// mustProducer returns a Producer on a fresh kfake cluster and the brokers.
func mustProducer(tb testing.TB, topic string) (*Producer, []string) {
	tb.Helper()
	_, brokers := testenv.Kafka(tb, topic, 3)
	p, err := NewProducer(brokers, topic, ProducerOptions{})
	testenv.Check(tb, "NewProducer", err)
	tb.Cleanup(p.Close)
	return p, brokers
}

// consumeAll returns every delta on topic: the end offsets say how many
// records there are, so the test knows there are no more.
func consumeAll(tb testing.TB, brokers []string, topic string) []delta.Delta {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	testenv.Check(tb, "consumer", err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	testenv.Check(tb, "ListEndOffsets", err)
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []delta.Delta
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			tb.Fatalf("consumed %d of %d deltas: %v", len(out), want, err)
		}
		fs.EachError(func(t string, p int32, err error) { tb.Fatalf("fetch %s/%d: %v", t, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			d, err := delta.Unmarshal(r.Value)
			if err != nil {
				tb.Fatalf("Unmarshal: %v", err)
			}
			if got, want := string(r.Key), string(delta.Key(d.CorpID, d.MsgID)); got != want {
				tb.Errorf("record key %q; want %q", got, want)
			}
			out = append(out, d)
		})
	}
	return out
}

// fakeIDs maps "u<n>" to uid n; anything else is unknown.
type fakeIDs struct{}

func (fakeIDs) Lookup(_ context.Context, corpID, userID string) (uint32, bool, error) {
	if corpID != testCorp || len(userID) < 2 || userID[0] != 'u' {
		return 0, false, nil
	}
	n, err := strconv.ParseUint(userID[1:], 10, 32)
	if err != nil {
		return 0, false, nil
	}
	return uint32(n), true, nil
}

// fakeLoader is MySQL as the Recorder sees it.
type fakeLoader struct {
	mu      sync.Mutex
	msgs    map[string]loaded
	loads   int
	actives int
}

type loaded struct {
	m          Message
	rcpt, read *roaring.Bitmap
}

func newFakeLoader() *fakeLoader { return &fakeLoader{msgs: map[string]loaded{}} }

func (f *fakeLoader) add(m Message, rcpt, read *roaring.Bitmap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs[m.CorpID+"/"+m.MsgID] = loaded{m, rcpt, read}
}

func (f *fakeLoader) LoadMessage(_ context.Context, corpID, msgID string) (Message, *roaring.Bitmap, *roaring.Bitmap, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	l, ok := f.msgs[corpID+"/"+msgID]
	if !ok {
		return Message{}, nil, nil, false, nil
	}
	return l.m, l.rcpt.Clone(), l.read.Clone(), true, nil
}

func (f *fakeLoader) ActiveMessages(_ context.Context, corpID string, agentID int64, since time.Time) ([]Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actives++
	var out []Message
	for _, l := range f.msgs {
		if l.m.CorpID == corpID && l.m.AgentID == agentID && !l.m.SentAt.Before(since) {
			out = append(out, l.m)
		}
	}
	return out, nil
}

// flakyPublisher fails its first fails calls, then publishes through pub.
type flakyPublisher struct {
	pub   Publisher
	mu    sync.Mutex
	fails int
	calls int
}

var errKafkaDown = errors.New("kafka down (test)")

func (f *flakyPublisher) Publish(ctx context.Context, ds []delta.Delta) error {
	f.mu.Lock()
	f.calls++
	fail := f.fails > 0
	if fail {
		f.fails--
	}
	f.mu.Unlock()
	if fail {
		return errKafkaDown
	}
	return f.pub.Publish(ctx, ds)
}

// uids returns a bitmap of the given uids.
func uids(us ...uint32) *roaring.Bitmap { return roaring.BitmapOf(us...) }

// rangeBitmap returns uids [lo, hi).
func rangeBitmap(lo, hi uint64) *roaring.Bitmap {
	b := roaring.New()
	b.AddRange(lo, hi)
	return b
}

// wipe deletes every key of the store, as a Redis without persistence
// does when it restarts.
func wipe(tb testing.TB, rdb *redis.Client, s *Store) {
	tb.Helper()
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, s.opts.Prefix+":*").Result()
	testenv.Check(tb, "KEYS", err)
	if len(keys) > 0 {
		testenv.Check(tb, "DEL", rdb.Del(ctx, keys...).Err())
	}
}

// counterValue reads a counter (testutil would need a module go.sum lacks).
func counterValue(tb testing.TB, c prometheus.Counter) float64 {
	tb.Helper()
	var m dto.Metric
	testenv.Check(tb, "metric Write", c.Write(&m))
	return m.GetCounter().GetValue()
}

// meanObserved is a histogram's mean observation.
func meanObserved(tb testing.TB, h prometheus.Histogram) float64 {
	tb.Helper()
	var m dto.Metric
	testenv.Check(tb, "metric Write", h.Write(&m))
	if m.GetHistogram().GetSampleCount() == 0 {
		return 0
	}
	return m.GetHistogram().GetSampleSum() / float64(m.GetHistogram().GetSampleCount())
}
