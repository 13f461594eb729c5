package delta

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicSpec is what the deltas topic must be. A managed Kafka creates no
// topic on first use (auto.create.topics.enable=false), so `yidu kafka
// topic` creates it from this, or checks the one there.
type TopicSpec struct {
	Name string
	// Partitions bound how many flushd replicas share the work (default
	// 12). An existing topic with fewer is reported, not changed: adding
	// partitions moves messages' keys to other partitions.
	Partitions int32
	// ReplicationFactor is how many brokers keep each delta (default 3).
	ReplicationFactor int16
	// MinInsyncReplicas is how many of them must have a delta before the
	// producer's acks=all returns (default 2): with 3 and 2, one broker
	// may be lost without losing an acknowledged read or refusing writes.
	MinInsyncReplicas int
}

// Topic defaults (docs/deploy.md, "Kafka").
const (
	DefaultPartitions        = 12
	DefaultReplicationFactor = 3
	DefaultMinInsyncReplicas = 2
)

func (s TopicSpec) withDefaults() TopicSpec {
	if s.Partitions <= 0 {
		s.Partitions = DefaultPartitions
	}
	if s.ReplicationFactor <= 0 {
		s.ReplicationFactor = DefaultReplicationFactor
	}
	if s.MinInsyncReplicas <= 0 {
		s.MinInsyncReplicas = DefaultMinInsyncReplicas
	}
	return s
}

// Validate reports a spec that cannot keep acknowledged reads: a
// min.insync.replicas above the replication factor refuses every write,
// one of 1 with a replication factor above 1 lets acks=all return with a
// single copy.
func (s TopicSpec) Validate() error {
	s = s.withDefaults()
	switch {
	case s.Name == "":
		return errors.New("delta: topic: a name is required")
	case s.MinInsyncReplicas > int(s.ReplicationFactor):
		return fmt.Errorf("delta: topic %s: min.insync.replicas %d above the replication factor %d refuses every write", s.Name, s.MinInsyncReplicas, s.ReplicationFactor)
	case s.ReplicationFactor > 1 && s.MinInsyncReplicas < 2:
		return fmt.Errorf("delta: topic %s: min.insync.replicas 1 lets acks=all return with one copy; want at least 2", s.Name)
	}
	return nil
}

// TopicState is what a topic on the cluster is.
type TopicState struct {
	Exists            bool
	Partitions        int32
	ReplicationFactor int16
	MinInsyncReplicas int // the topic's own, or the broker's default
}

// Problems compares the topic on the cluster with the spec: each string
// says what is wrong, in words an operator acts on. None: the topic keeps
// an acknowledged read as the spec asks.
func (st TopicState) Problems(s TopicSpec) []string {
	s = s.withDefaults()
	if !st.Exists {
		return []string{fmt.Sprintf("topic %s does not exist (yidu kafka topic creates it)", s.Name)}
	}
	var out []string
	if st.ReplicationFactor < s.ReplicationFactor {
		out = append(out, fmt.Sprintf("topic %s has replication factor %d; want %d (a broker lost can lose acknowledged reads)", s.Name, st.ReplicationFactor, s.ReplicationFactor))
	}
	if st.MinInsyncReplicas < s.MinInsyncReplicas {
		out = append(out, fmt.Sprintf("topic %s has min.insync.replicas=%d; want %d (acks=all returns before enough brokers hold a read)", s.Name, st.MinInsyncReplicas, s.MinInsyncReplicas))
	}
	if st.MinInsyncReplicas > int(st.ReplicationFactor) {
		out = append(out, fmt.Sprintf("topic %s has min.insync.replicas=%d above its replication factor %d: every write is refused", s.Name, st.MinInsyncReplicas, st.ReplicationFactor))
	}
	if st.Partitions < s.Partitions {
		out = append(out, fmt.Sprintf("topic %s has %d partitions; want %d (fewer flushd replicas can share the work)", s.Name, st.Partitions, s.Partitions))
	}
	return out
}

// DescribeTopic reads the topic's partitions, replication and effective
// min.insync.replicas from the cluster cl reaches (Describe ACL on the
// topic and DescribeConfigs).
func DescribeTopic(ctx context.Context, cl *kgo.Client, name string) (TopicState, error) {
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, name)
	if err != nil {
		return TopicState{}, fmt.Errorf("delta: describe topic %s: %w", name, err)
	}
	d, ok := td[name]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return TopicState{}, nil
	}
	if d.Err != nil {
		return TopicState{}, fmt.Errorf("delta: describe topic %s: %w", name, d.Err)
	}
	st := TopicState{Exists: true, Partitions: int32(len(d.Partitions)), ReplicationFactor: -1}
	for _, p := range d.Partitions {
		if rf := int16(len(p.Replicas)); st.ReplicationFactor < 0 || rf < st.ReplicationFactor {
			st.ReplicationFactor = rf
		}
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, name)
	if err != nil {
		return TopicState{}, fmt.Errorf("delta: describe configs of %s: %w", name, err)
	}
	rc, err := rcs.On(name, nil)
	if err == nil {
		err = rc.Err
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		// The broker that answered for the configs has not learnt of a
		// topic just created; to the caller it does not exist yet.
		return TopicState{}, nil
	}
	if err != nil {
		return TopicState{}, fmt.Errorf("delta: describe configs of %s: %w", name, err)
	}
	st.MinInsyncReplicas = 1 // Kafka's default when nothing says otherwise
	for _, c := range rc.Configs {
		if c.Key == "min.insync.replicas" && c.Value != nil {
			if n, err := strconv.Atoi(*c.Value); err == nil {
				st.MinInsyncReplicas = n
			}
		}
	}
	return st, nil
}

// EnsureTopic creates the topic of spec when it does not exist, and
// returns what is there afterwards with its problems against spec. An
// existing topic is never changed.
func EnsureTopic(ctx context.Context, cl *kgo.Client, spec TopicSpec) (created bool, st TopicState, problems []string, err error) {
	if err := spec.Validate(); err != nil {
		return false, TopicState{}, nil, err
	}
	spec = spec.withDefaults()
	st, err = DescribeTopic(ctx, cl, spec.Name)
	if err != nil {
		return false, st, nil, err
	}
	if !st.Exists {
		isr := strconv.Itoa(spec.MinInsyncReplicas)
		resp, err := kadm.NewClient(cl).CreateTopic(ctx, spec.Partitions, spec.ReplicationFactor,
			map[string]*string{"min.insync.replicas": &isr}, spec.Name)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return false, st, nil, fmt.Errorf("delta: create topic %s: %w", spec.Name, err)
		}
		created = err == nil
		// The brokers learn of a new topic a moment after the
		// controller created it.
		for {
			if st, err = DescribeTopic(ctx, cl, spec.Name); err != nil {
				return created, st, nil, err
			}
			if st.Exists {
				break
			}
			select {
			case <-ctx.Done():
				return created, st, nil, fmt.Errorf("delta: topic %s created but not in metadata: %w", spec.Name, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return created, st, st.Problems(spec), nil
}
