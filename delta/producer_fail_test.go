package delta_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// failProduce makes kfake answer every Produce request with code for each
// partition while fail is set; it returns how many it answered so.
func failProduce(c *kfake.Cluster, code int16, fail *atomic.Bool) *atomic.Int32 {
	var n atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !fail.Load() {
			return nil, nil, false
		}
		n.Add(1)
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID // Produce v13 names topics by id
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &n
}

// TestPublishBrokerErrors: the real Producer against a broker that refuses
// the records. Publish returns an error (the receiver's 503) and never
// reports success for a delta Kafka did not acknowledge; once the broker
// accepts again, the same Producer publishes.
func TestPublishBrokerErrors(t *testing.T) {
	ds := []delta.Delta{
		{CorpID: testCorp, MsgID: "a", UID: 1, ReadTime: 1_700_000_000, Source: delta.SourceCard, Counted: true},
		{CorpID: testCorp, MsgID: "b", UID: 2, ReadTime: 1_700_000_000, Source: delta.SourceLink, Counted: true},
	}
	tests := []struct {
		name string
		code int16
		want error
	}{
		// Not retriable: the record fails at once.
		{"refused", kerr.TopicAuthorizationFailed.Code, kerr.TopicAuthorizationFailed},
		// Retriable: kgo retries until DeliveryTimeout, then fails it.
		{"not acknowledged in time", kerr.NotEnoughReplicas.Code, kgo.ErrRecordTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const topic = "yidu.reads"
			c, brokers := testenv.Kafka(t, topic, 3)
			p, err := delta.NewProducer(brokers, topic, delta.ProducerOptions{DeliveryTimeout: time.Second})
			testenv.Check(t, "NewProducer", err)
			defer p.Close()
			var fail atomic.Bool
			fail.Store(true)
			refused := failProduce(c, tt.code, &fail)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = p.Publish(ctx, ds)
			if !errors.Is(err, tt.want) || ctx.Err() != nil {
				t.Errorf("Publish to a broker answering %s = %v; want %v before the caller's deadline", kerr.ErrorForCode(tt.code), err, tt.want)
			}
			if refused.Load() == 0 {
				t.Errorf("no Produce request reached the broker")
			}
			if got := testenv.Deltas(t, brokers, topic); len(got) != 0 {
				t.Errorf("deltas on the topic after the refusal: %+v", got)
			}
			fail.Store(false)
			testenv.Check(t, "Publish once the broker accepts", p.Publish(ctx, ds))
			if got := testenv.Deltas(t, brokers, topic); len(got) != len(ds) {
				t.Errorf("%d deltas on the topic; want %d", len(got), len(ds))
			}
		})
	}
}

// TestPublishDeadline: a broker that does not answer at all within the
// caller's deadline: Publish returns the context's error when the
// deadline passes, not later.
func TestPublishDeadline(t *testing.T) {
	const topic = "yidu.reads"
	c, brokers := testenv.Kafka(t, topic, 1)
	p, err := delta.NewProducer(brokers, topic, delta.ProducerOptions{DeliveryTimeout: time.Minute})
	testenv.Check(t, "NewProducer", err)
	defer p.Close()
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		<-release // holds the request until the test ends
		return nil, nil, false
	})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = p.Publish(ctx, []delta.Delta{{CorpID: testCorp, MsgID: "a", UID: 1, ReadTime: 1_700_000_000}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Publish to a silent broker = %v; want context.DeadlineExceeded", err)
	}
}

// TestPingErrors: readiness fails when the metadata names the topic with
// an error, or when no broker answers.
func TestPingErrors(t *testing.T) {
	const topic = "yidu.reads"
	t.Run("topic error", func(t *testing.T) {
		c, brokers := testenv.Kafka(t, topic, 1)
		p, err := delta.NewProducer(brokers, topic, delta.ProducerOptions{})
		testenv.Check(t, "NewProducer", err)
		defer p.Close()
		c.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl()
			req := kreq.(*kmsg.MetadataRequest)
			resp := req.ResponseKind().(*kmsg.MetadataResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewMetadataResponseTopic()
				st.Topic, st.ErrorCode = rt.Topic, kerr.LeaderNotAvailable.Code
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.Ping(ctx); !errors.Is(err, kerr.LeaderNotAvailable) {
			t.Errorf("Ping with the topic being created = %v; want %v", err, kerr.LeaderNotAvailable)
		}
	})
	t.Run("no broker answers", func(t *testing.T) {
		c, brokers := testenv.Kafka(t, topic, 1)
		p, err := delta.NewProducer(brokers, topic, delta.ProducerOptions{})
		testenv.Check(t, "NewProducer", err)
		defer p.Close()
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := p.Ping(ctx); err == nil {
			t.Errorf("Ping with the cluster closed = nil; want an error")
		}
	})
}
