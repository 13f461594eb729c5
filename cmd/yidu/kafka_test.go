package main

import (
	"strings"
	"testing"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestKafkaTopic runs `yidu kafka topic` as an operator preparing a
// Kafka that auto-creates nothing: it creates the deltas topic once,
// leaves it alone after, and says what is wrong with one that keeps
// fewer copies than the configuration asks for (exit 1), as does
// `yidu doctor`. On Apache Kafka in CI (one node here: replication 1 is
// all it can hold), kfake elsewhere.
func TestKafkaTopic(t *testing.T) {
	brokers := strings.Join(testenv.KafkaBrokers(t), ",")
	topic := testenv.RandomName("yidu.reads.")
	single := map[string]string{"YIDU_KAFKA_BROKERS": brokers, "YIDU_KAFKA_TOPIC": topic,
		"YIDU_KAFKA_REPLICATION_FACTOR": "1", "YIDU_KAFKA_MIN_INSYNC_REPLICAS": "1"}
	defaults := map[string]string{"YIDU_KAFKA_BROKERS": brokers, "YIDU_KAFKA_TOPIC": topic}
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		fails bool
		want  []string
		not   []string
	}{
		{"check before it exists", single, []string{"--check"}, true,
			[]string{"FAIL  topic " + topic + " does not exist (yidu kafka topic creates it)"}, []string{"created"}},
		{"create", single, nil, false,
			[]string{"created topic " + topic + ": 12 partitions, replication factor 1, min.insync.replicas 1"}, nil},
		{"again: left alone", single, nil, false,
			[]string{"topic " + topic + ": 12 partitions, replication factor 1, min.insync.replicas 1"}, []string{"created", "FAIL"}},
		{"the defaults want three copies, two in sync", defaults, []string{"--check"}, true,
			[]string{"FAIL  topic " + topic + " has replication factor 1; want 3", "FAIL  topic " + topic + " has min.insync.replicas=1; want 2"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCmd(t, tt.env, "", append([]string{"kafka", "topic"}, tt.args...)...)
			if (err != nil) != tt.fails {
				t.Fatalf("yidu kafka topic %v = %v; want failure %v\n%s", tt.args, err, tt.fails, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
	t.Run("refused settings", func(t *testing.T) {
		env := map[string]string{"YIDU_KAFKA_BROKERS": brokers, "YIDU_KAFKA_TOPIC": testenv.RandomName("yidu.reads."),
			"YIDU_KAFKA_REPLICATION_FACTOR": "3", "YIDU_KAFKA_MIN_INSYNC_REPLICAS": "1"}
		out, _, err := runCmd(t, env, "", "kafka", "topic")
		if err == nil || !strings.Contains(err.Error(), "min.insync.replicas 1 lets acks=all return with one copy") {
			t.Errorf("kafka topic with replication 3, min.insync.replicas 1 = %v; want refused\n%s", err, out)
		}
	})
	t.Run("doctor", func(t *testing.T) {
		cfg := kafkaTopicCheck(t.Context(), kafkaConfig(t, defaults))
		if cfg.Status != "FAIL" || !strings.Contains(cfg.Detail, "replication factor 1; want 3") {
			t.Errorf("doctor's kafka topic check = %s %q; want FAIL naming the replication factor", cfg.Status, cfg.Detail)
		}
		cfg = kafkaTopicCheck(t.Context(), kafkaConfig(t, single))
		if cfg.Status != "ok" {
			t.Errorf("doctor's kafka topic check = %s %q; want ok", cfg.Status, cfg.Detail)
		}
	})
}

// kafkaConfig is the configuration the environment env makes.
func kafkaConfig(t *testing.T, env map[string]string) config.Kafka {
	t.Helper()
	cfg, err := config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Kafka
}
