package bitmap

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// capturePublisher keeps what it is given; fail makes it refuse.
type capturePublisher struct {
	mu   sync.Mutex
	fail bool
	ds   []delta.Delta
}

func (c *capturePublisher) Publish(_ context.Context, ds []delta.Delta) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return errKafkaDown
	}
	c.ds = append(c.ds, ds...)
	return nil
}

// silentRedis accepts connections and never answers, as a frozen
// (SIGSTOP) or partitioned Redis does.
func silentRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Check(t, "listen", err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// TestRedisDownPublishesUnmarked: with Redis refusing connections or not
// answering, a button press and a link read are published to Kafka
// unmarked (with the app's decision whether they count) and answered
// within the deadline; an enter_agent is published unmarked to the
// messages MySQL says the member received (refused when MySQL is down
// too); and when Kafka refuses too the read is refused, never taken.
func TestRedisDownPublishesUnmarked(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	testenv.Check(t, "listen", err)
	deadAddr := dead.Addr().String()
	dead.Close()
	enterCounts := yidu.App{Name: "hr", CorpID: testCorp, AgentID: 7, ReadSignals: []yidu.Signal{yidu.SignalButton, yidu.SignalEnterAgent}}
	for _, tc := range []struct {
		name string
		addr string
	}{
		{"refused", deadAddr},
		{"silent", silentRedis(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb := redis.NewClient(&redis.Options{Addr: tc.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, ReadTimeout: 500 * time.Millisecond})
			t.Cleanup(func() { rdb.Close() })
			s, err := New(rdb, Options{Registerer: prometheus.NewRegistry()})
			testenv.Check(t, "New", err)
			t.Cleanup(s.Close)
			pub := &capturePublisher{}
			// Recent: the app's active messages are those within Redis's TTL.
			at := time.Now().Truncate(time.Second)
			loader := newFakeLoader()
			loader.add(testMessage("notice-2", 7, at.Add(-time.Hour)), uids(5, 6), roaring.New())
			loader.add(testMessage("notice-3", 7, at), uids(5), roaring.New())
			loader.add(testMessage("notice-4", 7, at.Add(time.Minute)), uids(5), roaring.New())
			loader.add(testMessage("notice-5", 8, at.Add(-time.Hour)), uids(5), roaring.New())
			rec, err := NewRecorder(s, fakeIDs{}, pub, loader, RecorderOptions{
				Apps: []yidu.App{enterCounts}, MarkTimeout: 300 * time.Millisecond, Registerer: prometheus.NewRegistry(),
			})
			testenv.Check(t, "NewRecorder", err)
			failing, err := NewRecorder(s, fakeIDs{}, pub, &failingLoader{fakeLoader: loader, err: errMySQLDown}, RecorderOptions{
				Apps: []yidu.App{enterCounts}, MarkTimeout: 300 * time.Millisecond, Registerer: prometheus.NewRegistry(),
			})
			testenv.Check(t, "NewRecorder", err)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()

			start := time.Now()
			if n, err := rec.CardRead(ctx, testCorp, 7, "u5", "notice-1@0", at); err != nil || n != 1 {
				t.Fatalf("CardRead with Redis down = %d, %v; want 1, nil", n, err)
			}
			if n, err := rec.LinkRead(ctx, testCorp, 7, "u6", "notice-1", at.Add(time.Second)); err != nil || n != 0 {
				t.Fatalf("LinkRead with Redis down = %d, %v; want 0 (link does not count for this app), nil", n, err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("two reads took %s with Redis down; want well within the deadline", d)
			}
			want := []delta.Delta{
				{CorpID: testCorp, MsgID: "notice-1", UID: 5, ReadTime: at.Unix(), Source: delta.SourceCard, Counted: true},
				{CorpID: testCorp, MsgID: "notice-1", UID: 6, ReadTime: at.Unix() + 1, Source: delta.SourceLink, Counted: false},
			}
			pub.mu.Lock()
			got := append([]delta.Delta(nil), pub.ds...)
			pub.mu.Unlock()
			if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("published %+v; want %+v", got, want)
			}
			if n := testutil.ToFloat64(rec.m.reads.WithLabelValues("card", outcomeLabelUnmarked)); n != 1 {
				t.Errorf("reads_total{card,unmarked} = %v; want 1", n)
			}

			// An app entry asks MySQL (the loader) which of the app's active
			// messages sent by then u5 received: notice-2 and notice-3, not
			// notice-4 (sent after the entry) nor another app's notice-5.
			if n, err := rec.EnterAgent(ctx, testCorp, 7, "u5", at); err != nil || n != 2 {
				t.Errorf("EnterAgent with Redis down = %d, %v; want 2 (counted for this app), nil", n, err)
			}
			wantEnter := []delta.Delta{
				{CorpID: testCorp, MsgID: "notice-2", UID: 5, ReadTime: at.Unix(), Source: delta.SourceEnterAgent, Counted: true},
				{CorpID: testCorp, MsgID: "notice-3", UID: 5, ReadTime: at.Unix(), Source: delta.SourceEnterAgent, Counted: true},
			}
			pub.mu.Lock()
			got = append([]delta.Delta(nil), pub.ds[len(want):]...)
			pub.mu.Unlock()
			if !slices.Equal(got, wantEnter) {
				t.Errorf("published for the app entry %+v; want %+v", got, wantEnter)
			}
			// A member who received none of them: nothing to publish.
			if n, err := rec.EnterAgent(ctx, testCorp, 7, "u9", at); err != nil || n != 0 {
				t.Errorf("EnterAgent of a non-recipient with Redis down = %d, %v; want 0, nil", n, err)
			}
			// MySQL down too: an error (503), WeCom retries.
			if _, err := failing.EnterAgent(ctx, testCorp, 7, "u5", at); !errors.Is(err, errMySQLDown) {
				t.Errorf("EnterAgent with Redis and MySQL down = %v; want the loader's error", err)
			}
			pub.mu.Lock()
			pub.fail = true
			pub.mu.Unlock()
			ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel2()
			if _, err := rec.CardRead(ctx2, testCorp, 7, "u8", "notice-1@0", at); err == nil || !errors.Is(err, errKafkaDown) {
				t.Errorf("CardRead with Redis and Kafka down = %v; want the publish error", err)
			}
		})
	}
}

// downIDs is idmap with MySQL down and an empty cache.
type downIDs struct{}

func (downIDs) Lookup(context.Context, string, string) (uint32, bool, error) {
	return 0, false, errMySQLDown
}

// lookupDownRecorder is a Recorder on a fresh store whose directory
// lookups fail (downIDs), publishing into the returned capturePublisher.
func lookupDownRecorder(tb testing.TB) (*Recorder, *Store, *capturePublisher) {
	tb.Helper()
	s, _ := mustStore(tb, Options{})
	pub := &capturePublisher{}
	rec, err := NewRecorder(s, downIDs{}, pub, newFakeLoader(), RecorderOptions{Registerer: prometheus.NewRegistry()})
	testenv.Check(tb, "NewRecorder", err)
	return rec, s, pub
}

// TestLookupDownPublishesByUserID: when the uid of a member cannot be
// looked up (MySQL down, not cached), a button press and a link read are
// published by UserID (uid 0), nothing is marked, and the read is
// answered; a malformed task id is still refused before any lookup, and
// with Kafka down too the read is refused.
func TestLookupDownPublishesByUserID(t *testing.T) {
	rec, s, pub := lookupDownRecorder(t)
	ctx := context.Background()
	at := time.Unix(1764406800, 0)
	if n, err := rec.CardRead(ctx, testCorp, 7, "ZhangSan", "notice-1@0", at); err != nil || n != 1 {
		t.Fatalf("CardRead = %d, %v; want 1, nil", n, err)
	}
	if n, err := rec.LinkRead(ctx, testCorp, 7, "lisi", "notice-1", at); err != nil || n != 1 {
		t.Fatalf("LinkRead = %d, %v; want 1, nil", n, err)
	}
	if n, err := rec.CardRead(ctx, testCorp, 7, "wangwu", "not a task id", at); err != nil || n != 0 {
		t.Errorf("CardRead of a malformed task id = %d, %v; want 0, nil", n, err)
	}
	want := []delta.Delta{
		{CorpID: testCorp, MsgID: "notice-1", UserID: "ZhangSan", ReadTime: at.Unix(), Source: delta.SourceCard, Counted: true},
		{CorpID: testCorp, MsgID: "notice-1", UserID: "lisi", ReadTime: at.Unix(), Source: delta.SourceLink, Counted: true},
	}
	pub.mu.Lock()
	got := append([]delta.Delta(nil), pub.ds...)
	pub.mu.Unlock()
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("published %+v; want %+v", got, want)
	}
	if rcpt, _, found, _ := s.Counts(ctx, testCorp, "notice-1"); found || rcpt != 0 {
		t.Error("something was marked in Redis without a uid")
	}
	pub.mu.Lock()
	pub.fail = true
	pub.mu.Unlock()
	if _, err := rec.CardRead(ctx, testCorp, 7, "zhaoliu", "notice-1@0", at); !errors.Is(err, errKafkaDown) {
		t.Errorf("CardRead with MySQL and Kafka down = %v; want the publish error", err)
	}
}
