package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/delta"
)

// topicSpec is the deltas topic the configuration asks for.
func topicSpec(c config.Kafka) delta.TopicSpec {
	return delta.TopicSpec{Name: c.Topic, Partitions: c.Partitions, ReplicationFactor: c.ReplicationFactor, MinInsyncReplicas: c.MinInsyncReplicas}
}

// kafkaClient is a client of the configured brokers with yidu's TLS and
// SASL, for admin calls.
func kafkaClient(c config.Kafka) (*kgo.Client, error) {
	opts, err := process.KafkaOpts(c, nil, "")
	if err != nil {
		return nil, err
	}
	// A short metadata age: a topic just created is looked for again at
	// once, not after kgo's 5 s metadata cache.
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cl, nil
}

// kafkaTopic is `yidu kafka topic`: it creates the deltas topic with the
// configured partitions, replication factor and min.insync.replicas when
// it does not exist (unless check), and reports how the topic on the
// cluster differs from them. Any difference is an error (exit 1): an
// existing topic is never changed, the operator decides.
func kafkaTopic(ctx context.Context, c config.Kafka, check bool, out io.Writer) error {
	spec := topicSpec(c)
	if err := spec.Validate(); err != nil {
		return err
	}
	cl, err := kafkaClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var (
		created  bool
		st       delta.TopicState
		problems []string
	)
	if check {
		st, err = delta.DescribeTopic(ctx, cl, spec.Name)
		problems = st.Problems(spec)
	} else {
		created, st, problems, err = delta.EnsureTopic(ctx, cl, spec)
	}
	if err != nil {
		return fmt.Errorf("kafka topic: %w", err)
	}
	if created {
		fmt.Fprintf(out, "created ")
	}
	if st.Exists {
		fmt.Fprintf(out, "topic %s: %d partitions, replication factor %d, min.insync.replicas %d\n",
			spec.Name, st.Partitions, st.ReplicationFactor, st.MinInsyncReplicas)
	}
	for _, p := range problems {
		fmt.Fprintf(out, "FAIL  %s\n", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("kafka topic: %d problem(s) with topic %s", len(problems), spec.Name)
	}
	return nil
}
