package embedded

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestStartKafkaTopicAndClose(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Options{KafkaPartitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.KafkaBrokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, DefaultTopic)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(td[DefaultTopic].Partitions); n != 3 {
		t.Errorf("partitions of %s = %d; want 3", DefaultTopic, n)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: DefaultTopic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Errorf("produce: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
