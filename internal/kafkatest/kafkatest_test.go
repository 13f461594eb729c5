package kafkatest_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/kafkatest"
)

// TestThreeNodes starts a three-node cluster, creates a replicated topic,
// produces with acks=all, kills the partition's leader and produces again
// once another node leads: what the fault tests build on.
func TestThreeNodes(t *testing.T) {
	start := time.Now()
	c := kafkatest.ForTest(t)
	t.Logf("three nodes up in %s", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The topic as `yidu kafka topic` makes it: 3 copies, 2 in sync.
	if _, st, problems, err := delta.EnsureTopic(ctx, cl, delta.TopicSpec{Name: "t", Partitions: 1}); err != nil || len(problems) > 0 {
		t.Fatalf("EnsureTopic = %+v, %v, %v", st, problems, err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	leader, err := c.Leader(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	killed := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("two")}).FirstErr(); err != nil {
		t.Fatalf("produce after the leader's kill: %v", err)
	}
	t.Logf("produced %s after the leader's kill", time.Since(killed).Round(time.Millisecond))
	now, err := c.Leader(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if now.ID == leader.ID {
		t.Errorf("leader still %d after its kill", leader.ID)
	}
	restart := time.Now()
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d back in %s", leader.ID, time.Since(restart).Round(time.Millisecond))
}
