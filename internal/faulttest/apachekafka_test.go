package faulttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/kafkatest"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The scenarios on Apache Kafka itself (issue 36): a three-node KRaft
// cluster of the scenario's own, replication 3, min.insync.replicas 2, no
// topic auto-creation, the deltas topic made by `yidu kafka topic`. WeCom
// presses with its exact retry policy (3 tries, 5 s apart, 5 s timeout);
// every press must be answered 200 within them, and the dashboard, Redis
// and MySQL must hold exactly the acknowledged reads within 60 s of the
// last answer, without `yidu reconcile`. They run one at a time (three
// JVMs each on a two-core machine) and only with YIDU_TEST_LONG=1.

// apacheBound is how long after the last answer the three may take to
// agree on Apache Kafka: a restarted cluster elects, fences and hands the
// group back before flushd writes again.
const apacheBound = 60 * time.Second

// newApacheEnv is newOutageEnv on a three-node Apache Kafka cluster.
func newApacheEnv(t *testing.T, o envOptions) (*env, *proc) {
	t.Helper()
	testenv.Long(t)
	o.ApacheKafka = true
	e, _, dash := newOutageEnv(t, outageOptions{envOptions: o})
	e.liveBound = apacheBound
	return e, dash
}

// leader is the node leading partition 0 of the deltas topic.
func (e *env) leader() *kafkatest.Node {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := e.ak.Leader(ctx, topic, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// restart starts nodes again, failing the test when they do not serve.
func (e *env) restart(nodes ...*kafkatest.Node) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.ak.Restart(ctx, nodes...); err != nil {
		e.t.Fatal(err)
	}
}

// TestApacheKafkaLeaderKilled: 1,200 presses while the leader of a
// partition is killed with -9 and restarted, and one of two flushd
// replicas is killed with -9 too. The producer's idempotent acks=all
// retries on the new leader (or the receiver spools), flushd's group hands
// the dead replica's partitions to the other, which resumes from the
// committed offsets (committed only after MySQL held the batch).
func TestApacheKafkaLeaderKilled(t *testing.T) {
	e, dash := newApacheEnv(t, envOptions{Notices: 2, Members: 600, Flushd: []string{"flushd-a", "flushd-b"}})
	done := e.goPressStorm(context.Background(), e.reads, 40) // 1,200 presses, 30 s
	e.wecom.waitSent(int64(len(e.reads)/3), done)
	node := e.leader()
	node.Kill()
	killed := time.Now()
	at := e.wecom.sent.Load()
	e.wecom.waitSent(int64(len(e.reads)*2/3), done)
	e.flushd[0].kill9(t)
	if d := time.Until(killed.Add(10 * time.Second)); d > 0 {
		time.Sleep(d)
	}
	e.restart(node)
	back := time.Since(killed)
	<-done
	e.verifyHealed("A1. Kafka: a partition leader killed",
		fmt.Sprintf("three-node Apache Kafka 4.4 (RF 3, min.insync.replicas 2); the leader of partition 0 (node %d) killed with -9 after %d presses, serving again %.0f s later; flushd-a of two killed with -9 at 2/3",
			node.ID, at, back.Seconds()), dash)
}

// TestApacheKafkaNodeFrozen25s: the leader of a partition stops answering
// (SIGSTOP) for 25 s, longer than WeCom's three tries: its connections
// hang until the controller fences it (broker.session.timeout.ms) and
// another replica leads.
func TestApacheKafkaNodeFrozen25s(t *testing.T) {
	e, dash := newApacheEnv(t, envOptions{Notices: 2, Members: 450})
	done := e.goPressStorm(context.Background(), e.reads, 20) // 900 presses, 45 s
	time.Sleep(10 * time.Second)
	node := e.leader()
	testenv.Check(t, "freeze", node.Freeze())
	at := e.wecom.sent.Load()
	time.Sleep(25 * time.Second)
	testenv.Check(t, "thaw", node.Thaw())
	<-done
	spooled := metricSum(t, e.receivers[0], "yidu_receiver_spool_spooled_total")
	e.verifyHealed("A2. Kafka: a node frozen 25 s",
		fmt.Sprintf("three-node Apache Kafka 4.4; the leader of partition 0 (node %d) stopped (SIGSTOP) 25 s after %d presses, then resumed; %.0f deltas spooled",
			node.ID, at, spooled), dash)
}

// TestApacheKafkaTwoNodesDown: two of the three nodes are killed at once
// for 25 s: below min.insync.replicas no write is acknowledged, so the
// receiver spools (fsync before the 200) and forwards once they are back.
func TestApacheKafkaTwoNodesDown(t *testing.T) {
	e, dash := newApacheEnv(t, envOptions{Notices: 2, Members: 450})
	done := e.goPressStorm(context.Background(), e.reads, 20) // 900 presses, 45 s
	time.Sleep(10 * time.Second)
	lead := e.leader()
	other := e.ak.Node(lead.ID%3 + 1)
	lead.Kill()
	other.Kill()
	down := time.Now()
	at := e.wecom.sent.Load()
	time.Sleep(25 * time.Second)
	e.restart(lead, other)
	up := time.Since(down)
	<-done
	spooled := metricSum(t, e.receivers[0], "yidu_receiver_spool_spooled_total")
	if spooled == 0 {
		t.Error("nothing was spooled while two of three nodes were down")
	}
	e.verifyHealed("A3. Kafka: two of three nodes down",
		fmt.Sprintf("three-node Apache Kafka 4.4; nodes %d and %d killed with -9 after %d presses (below min.insync.replicas), serving again %.0f s later; %.0f deltas spooled",
			lead.ID, other.ID, at, up.Seconds(), spooled), dash)
}

// TestApacheKafkaClusterStopped30s: the whole cluster is stopped for
// 30 s and started again with its data: the spool holds every press of
// the outage and drains into the restarted cluster.
func TestApacheKafkaClusterStopped30s(t *testing.T) {
	e, dash := newApacheEnv(t, envOptions{Notices: 2, Members: 450})
	done := e.goPressStorm(context.Background(), e.reads, 20) // 900 presses, 45 s
	time.Sleep(10 * time.Second)
	e.ak.Close()
	down := time.Now()
	at := e.wecom.sent.Load()
	time.Sleep(30 * time.Second)
	e.restart(e.ak.Nodes()...)
	up := time.Since(down)
	<-done
	spooled := metricSum(t, e.receivers[0], "yidu_receiver_spool_spooled_total")
	if spooled == 0 {
		t.Error("nothing was spooled while the cluster was stopped")
	}
	e.verifyHealed("A4. Kafka: the whole cluster stopped 30 s",
		fmt.Sprintf("three-node Apache Kafka 4.4 stopped after %d presses, started again with its data, serving %.0f s later; %.0f deltas spooled",
			at, up.Seconds(), spooled), dash)
}
