package bitmap

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
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
	s, err := New(rdb, opts)
	testenv.Check(tb, "New", err)
	tb.Cleanup(s.Close)
	return s, rdb
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
	m          yidu.Message
	rcpt, read *roaring.Bitmap
	signals    map[yidu.Signal]*roaring.Bitmap
}

func newFakeLoader() *fakeLoader { return &fakeLoader{msgs: map[string]loaded{}} }

// add stores a message as MySQL has it; signals is nil or each signal's
// members (button_at, link_at, enter_at set).
func (f *fakeLoader) add(m yidu.Message, rcpt, read *roaring.Bitmap, signals ...map[yidu.Signal]*roaring.Bitmap) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := loaded{m: m, rcpt: rcpt, read: read, signals: map[yidu.Signal]*roaring.Bitmap{}}
	for _, s := range signals {
		for sig, b := range s {
			l.signals[sig] = b
		}
	}
	f.msgs[m.CorpID+"/"+m.MsgID] = l
}

func (f *fakeLoader) LoadReads(_ context.Context, corpID, msgID string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, map[yidu.Signal]*roaring.Bitmap, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	l, ok := f.msgs[corpID+"/"+msgID]
	if !ok {
		return yidu.Message{}, nil, nil, nil, false, nil
	}
	signals := map[yidu.Signal]*roaring.Bitmap{}
	for sig, b := range l.signals {
		signals[sig] = b.Clone()
	}
	return l.m, l.rcpt.Clone(), l.read.Clone(), signals, true, nil
}

func (f *fakeLoader) ActiveMessages(_ context.Context, corpID string, agentID int64, since time.Time) ([]yidu.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actives++
	var out []yidu.Message
	for _, l := range f.msgs {
		if l.m.CorpID == corpID && l.m.AgentID == agentID && !l.m.SentAt.Before(since) {
			out = append(out, l.m)
		}
	}
	// Oldest first, as tracker.Registry.ActiveMessages.
	slices.SortFunc(out, func(a, b yidu.Message) int {
		return cmp.Or(a.SentAt.Compare(b.SentAt), cmp.Compare(a.MsgID, b.MsgID))
	})
	return out, nil
}

func (f *fakeLoader) RecipientOf(_ context.Context, corpID string, uid uint32, msgIDs []string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, id := range msgIDs {
		if l, ok := f.msgs[corpID+"/"+id]; ok && l.rcpt.Contains(uid) {
			out = append(out, id)
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

// CardRead is CardPress without recorded: the tests' shorthand for a press
// whose new reads are all they check.
func (r *Recorder) CardRead(ctx context.Context, corpID string, agentID int64, userID, taskID string, at time.Time) (int, error) {
	n, _, err := r.CardPress(ctx, corpID, agentID, userID, taskID, at)
	return n, err
}
