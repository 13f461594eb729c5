package testenv

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/delta"
)

// Producer returns a delta Producer for topic on a fresh kfake cluster of
// 3 partitions, closed when the test ends, and the brokers.
func Producer(tb testing.TB, topic string) (*delta.Producer, []string) {
	tb.Helper()
	_, brokers := Kafka(tb, topic, 3)
	p, err := delta.NewProducer(brokers, topic, delta.ProducerOptions{})
	Check(tb, "NewProducer", err)
	tb.Cleanup(p.Close)
	return p, brokers
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
