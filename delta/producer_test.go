package delta_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestProducerPublish(t *testing.T) {
	p, brokers, topic := testenv.Producer(t, "yidu.reads")
	ctx := context.Background()
	testenv.Check(t, "Ping", p.Ping(ctx))
	want := []delta.Delta{
		{CorpID: testCorp, MsgID: "a", UID: 1, ReadTime: 1_700_000_000, Source: delta.SourceCard, Counted: true},
		{CorpID: testCorp, MsgID: "b", UID: 2, ReadTime: 1_700_000_001, Source: delta.SourceEnterAgent},
		{CorpID: testCorp, MsgID: "a", UID: 3, ReadTime: 1_700_000_002, Source: delta.SourceCard, Counted: true},
	}
	testenv.Check(t, "Publish", p.Publish(ctx, want))
	testenv.Check(t, "Publish none", p.Publish(ctx, nil))
	got := testenv.Deltas(t, brokers, topic)
	// Partitions interleave; order matters only within a message.
	testenv.SortDeltas(got)
	testenv.SortDeltas(want)
	if !slices.Equal(got, want) {
		t.Errorf("consumed %+v; want %+v", got, want)
	}
}

func TestProducerErrors(t *testing.T) {
	p, _, _ := testenv.Producer(t, "yidu.reads")
	t.Run("ctx done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := p.Publish(ctx, []delta.Delta{{CorpID: testCorp, MsgID: "a", UID: 1}})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Publish(cancelled) = %v; want context.Canceled", err)
		}
	})
	t.Run("missing topic", func(t *testing.T) {
		brokers, _ := testenv.Topic(t, "other", 1)
		q, err := delta.NewProducer(brokers, "yidu.missing", delta.ProducerOptions{})
		testenv.Check(t, "delta.NewProducer", err)
		defer q.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := q.Ping(ctx); err == nil {
			t.Errorf("Ping(missing topic) = nil; want an error")
		}
	})
	t.Run("no brokers", func(t *testing.T) {
		if _, err := delta.NewProducer(nil, "t", delta.ProducerOptions{}); err == nil {
			t.Errorf("delta.NewProducer(no brokers) = nil error")
		}
	})
}

const testCorp = "wwcorp"
