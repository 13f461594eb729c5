package testenv

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/delta"
)

// Producer returns a delta Producer on a fresh topic of 3 partitions
// (Topic: Apache Kafka's or kfake's), closed when the test ends, the
// brokers and the topic's name. On Apache Kafka its delivery timeout is
// 15 s, not the production 2 s.
func Producer(tb testing.TB, name string) (*delta.Producer, []string, string) {
	tb.Helper()
	brokers, topic := Topic(tb, name, 3)
	var opts delta.ProducerOptions
	if RealKafka() {
		// A fresh topic's first records on a loaded CI machine (the JVM
		// and every package's tests on 2 cores) took longer than the
		// production default of 2 s (TestProducerPublish: "records have
		// timed out"); the tests are about what arrives, not how fast.
		opts.DeliveryTimeout = 15 * time.Second
	}
	p, err := delta.NewProducer(brokers, topic, opts)
	Check(tb, "NewProducer", err)
	tb.Cleanup(p.Close)
	return p, brokers, topic
}

// Deltas returns every delta on topic: the end offsets say how many
// records there are, so the test knows there are no more.
func Deltas(tb testing.TB, brokers []string, topic string) []delta.Delta {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	Check(tb, "consumer", err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	Check(tb, "ListEndOffsets", err)
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

// SortDeltas orders ds by message, uid and source: partitions interleave,
// so order matters only within a message.
func SortDeltas(ds []delta.Delta) {
	slices.SortFunc(ds, func(a, b delta.Delta) int {
		return cmp.Or(cmp.Compare(a.CorpID, b.CorpID), cmp.Compare(a.MsgID, b.MsgID), cmp.Compare(a.UID, b.UID), cmp.Compare(a.Source, b.Source))
	})
}

// KafkaBrokersEnv names the brokers of a running Apache Kafka the tests
// use instead of kfake (.ci/run starts a single node and sets it).
const KafkaBrokersEnv = "YIDU_TEST_KAFKA_BROKERS"

// LongEnv, set to 1, runs the long fault scenarios (minutes each), as
// .ci/run does; the README's go test ./... leaves them out.
const LongEnv = "YIDU_TEST_LONG"

// RealKafka reports whether the tests run on Apache Kafka
// (YIDU_TEST_KAFKA_BROKERS) rather than kfake.
func RealKafka() bool { return os.Getenv(KafkaBrokersEnv) != "" }

// Long skips tb unless YIDU_TEST_LONG=1.
func Long(tb testing.TB) {
	tb.Helper()
	if os.Getenv(LongEnv) != "1" {
		tb.Skipf("testenv: a long scenario: set %s=1 to run it (.ci/run does)", LongEnv)
	}
}

// Topic returns brokers and a topic of partitions to produce to and
// consume from: on the Apache Kafka of YIDU_TEST_KAFKA_BROKERS a topic of
// its own, named after name and created for this test (topics are not
// auto-created, as on a managed Kafka) and deleted when it ends; without
// it an in-process kfake cluster seeded with name itself.
func Topic(tb testing.TB, name string, partitions int32) (brokers []string, topic string) {
	tb.Helper()
	if !RealKafka() {
		_, brokers := Kafka(tb, name, partitions)
		return brokers, name
	}
	brokers = strings.Split(os.Getenv(KafkaBrokersEnv), ",")
	topic = RandomName(name + ".t")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	Check(tb, "kafka admin client", err)
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		cl.Close()
		tb.Fatalf("testenv: create topic %s on %s: %v", topic, brokers, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := adm.DeleteTopics(ctx, topic); err != nil {
			tb.Logf("testenv: delete topic %s: %v", topic, err)
		}
		cl.Close()
	})
	waitLeaders(tb, ctx, adm, topic, partitions)
	return brokers, topic
}

// waitLeaders waits until every partition of a new topic has a leader.
func waitLeaders(tb testing.TB, ctx context.Context, adm *kadm.Client, topic string, partitions int32) {
	tb.Helper()
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil && td[topic].Err == nil && len(td[topic].Partitions) == int(partitions) {
			ok := true
			for _, p := range td[topic].Partitions {
				ok = ok && p.Leader >= 0 && p.Err == nil
			}
			if ok {
				return
			}
		}
		if ctx.Err() != nil {
			tb.Fatalf("testenv: topic %s has no leaders: %v", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// KafkaBrokers returns the brokers of a Kafka with no topic of the
// test's yet, for tests that create topics themselves: Apache Kafka's
// (YIDU_TEST_KAFKA_BROKERS; name topics with RandomName), or a fresh
// kfake cluster's.
func KafkaBrokers(tb testing.TB) []string {
	tb.Helper()
	if RealKafka() {
		return strings.Split(os.Getenv(KafkaBrokersEnv), ",")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		tb.Fatalf("testenv: kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	return c.ListenAddrs()
}
