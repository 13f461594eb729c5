// Package kafkatest runs Apache Kafka itself for tests and benchmarks: a
// KRaft cluster of one or three combined broker/controller nodes on
// loopback, each its own JVM started from the broker's jars
// (.ci/kafka/fetch.sh puts them in a cache; YIDU_TEST_KAFKA_LIBS names
// the folder), with the settings a managed Kafka ships: topics are not
// auto-created, a three-node cluster replicates 3 times and requires 2 in
// sync. A node can be killed with -9, frozen (SIGSTOP), stopped and
// started again on the same ports and data, so the fault tests can do to
// Kafka what a bad day does.
//
// Test and benchmark support only: no production binary imports it.
package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// LibsEnv names the environment variable that holds the folder of the
// broker's jars (.ci/kafka/fetch.sh prints it).
const LibsEnv = "YIDU_TEST_KAFKA_LIBS"

// Options shape a cluster. Zero fields take the defaults noted.
type Options struct {
	// Libs is the folder of Kafka's jars (default $YIDU_TEST_KAFKA_LIBS).
	Libs string
	// Dir holds each node's data, configuration and log (required).
	Dir string
	// Nodes is 1 or 3 (default 1).
	Nodes int
	// HeapMB is each JVM's heap (default 512, the most the CI allows).
	HeapMB int
	// Java is the java binary (default: java on PATH).
	Java string
}

// Cluster is a running KRaft cluster.
type Cluster struct {
	opts      Options
	clusterID string
	nodes     []*Node
}

// Node is one combined broker and controller.
type Node struct {
	ID       int
	Addr     string // the broker listener, 127.0.0.1:port
	ctrlAddr string
	dir      string
	c        *Cluster

	mu   sync.Mutex
	proc *rig.Proc
}

// Start formats and starts a cluster and returns once every broker is
// registered and unfenced. Close stops it.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	if o.Libs == "" {
		o.Libs = os.Getenv(LibsEnv)
	}
	if o.Libs == "" {
		return nil, fmt.Errorf("kafkatest: no broker jars: set %s (.ci/kafka/fetch.sh prints it)", LibsEnv)
	}
	if _, err := os.Stat(o.Libs); err != nil {
		return nil, fmt.Errorf("kafkatest: broker jars: %w", err)
	}
	if o.Dir == "" {
		return nil, errors.New("kafkatest: Options.Dir is required")
	}
	if o.Nodes == 0 {
		o.Nodes = 1
	}
	if o.Nodes != 1 && o.Nodes != 3 {
		return nil, fmt.Errorf("kafkatest: %d nodes: 1 or 3", o.Nodes)
	}
	if o.HeapMB == 0 {
		o.HeapMB = 512
	}
	if o.Java == "" {
		var err error
		if o.Java, err = exec.LookPath("java"); err != nil {
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
	}
	c := &Cluster{opts: o, clusterID: newClusterID()}
	ports, err := freePorts(2 * o.Nodes)
	if err != nil {
		return nil, err
	}
	for i := range o.Nodes {
		c.nodes = append(c.nodes, &Node{
			ID: i + 1, c: c,
			Addr:     net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i])),
			ctrlAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1])),
			dir:      filepath.Join(o.Dir, "node-"+strconv.Itoa(i+1)),
		})
	}
	for _, n := range c.nodes {
		if err := n.format(ctx); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := n.launch(); err != nil {
			c.Close()
			return nil, err
		}
	}
	if err := c.WaitReady(ctx, c.nodes...); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Brokers returns every node's broker address.
func (c *Cluster) Brokers() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr
	}
	return out
}

// Nodes returns the cluster's nodes, in id order (ids from 1).
func (c *Cluster) Nodes() []*Node { return c.nodes }

// Node returns the node of id.
func (c *Cluster) Node(id int) *Node { return c.nodes[id-1] }

// Close stops every node (SIGTERM, then -9 after 10 s).
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(func() { n.Stop(10 * time.Second) })
	}
	wg.Wait()
}

// Pids returns the running nodes' process ids (for CPU accounting).
func (c *Cluster) Pids() []int {
	var out []int
	for _, n := range c.nodes {
		if p := n.Pid(); p != 0 {
			out = append(out, p)
		}
	}
	return out
}

// Admin returns an admin client of the cluster; close its kgo client.
func (c *Cluster) Admin() (*kadm.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
	if err != nil {
		return nil, fmt.Errorf("kafkatest: admin client: %w", err)
	}
	return kadm.NewClient(cl), nil
}

// WaitReady returns once each of nodes answers metadata itself and is in
// it as an unfenced broker, or ctx is done (bounded at 90 s).
func (c *Cluster) WaitReady(ctx context.Context, nodes ...*Node) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	for _, n := range nodes {
		for {
			err := n.ready(ctx)
			if err == nil {
				break
			}
			if p := n.current(); p != nil && !p.Running() {
				return fmt.Errorf("kafkatest: node %d exited: %v\n%s", n.ID, p.Err(), n.logTail())
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kafkatest: node %d not ready: %v\n%s", n.ID, err, n.logTail())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	return nil
}

// ready asks the node alone (a client seeded with it, no retries) for
// the brokers: a node that answers and names itself is an unfenced
// broker. A killed node's peers may still name it until they fence it,
// so the answer must come from the node itself.
func (n *Node) ready(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr), kgo.RequestRetries(0))
	if err != nil {
		return err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	bm, err := kadm.NewClient(cl).BrokerMetadata(rctx)
	if err != nil {
		return err
	}
	for _, b := range bm.Brokers {
		if b.NodeID == int32(n.ID) {
			return nil
		}
	}
	return fmt.Errorf("broker %d not in its own metadata yet", n.ID)
}

// replication is the replication factor and min.insync.replicas of the
// cluster's topics: 3 and 2 on three nodes, 1 and 1 on one.
func (c *Cluster) replication() (rf int16, isr int) {
	if len(c.nodes) >= 3 {
		return 3, 2
	}
	return 1, 1
}

// Leader returns the node leading partition of topic.
func (c *Cluster) Leader(ctx context.Context, topic string, partition int32) (*Node, error) {
	adm, err := c.Admin()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: metadata of %s: %w", topic, err)
	}
	p, ok := td[topic].Partitions[partition]
	if !ok || p.Leader < 1 || int(p.Leader) > len(c.nodes) {
		return nil, fmt.Errorf("kafkatest: %s/%d has no leader", topic, partition)
	}
	return c.Node(int(p.Leader)), nil
}

func (n *Node) current() *rig.Proc {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.proc
}

// Pid is the node's JVM process id, or 0 when it is not running.
func (n *Node) Pid() int {
	if p := n.current(); p != nil && p.Running() {
		return p.Pid()
	}
	return 0
}

// Kill kills the node's JVM with SIGKILL and waits for it to be gone.
func (n *Node) Kill() {
	if p := n.current(); p != nil {
		p.Kill()
	}
}

// Stop stops the node (SIGTERM, a controlled shutdown) and kills it after
// grace.
func (n *Node) Stop(grace time.Duration) {
	if p := n.current(); p != nil {
		if p.Running() {
			_ = syscall.Kill(p.Pid(), syscall.SIGCONT) // a frozen JVM cannot stop
		}
		_ = p.Stop(grace)
	}
}

// Freeze stops the node's JVM with SIGSTOP: its ports accept nothing
// new and answer nothing, as a host that stalls (GC, a hung disk).
func (n *Node) Freeze() error {
	p := n.current()
	if p == nil || !p.Running() {
		return fmt.Errorf("kafkatest: node %d is not running", n.ID)
	}
	return syscall.Kill(p.Pid(), syscall.SIGSTOP)
}

// Thaw resumes a frozen node.
func (n *Node) Thaw() error {
	p := n.current()
	if p == nil || !p.Running() {
		return fmt.Errorf("kafkatest: node %d is not running", n.ID)
	}
	return syscall.Kill(p.Pid(), syscall.SIGCONT)
}

// Restart starts a stopped or killed node again on its ports and data and
// returns once it is an unfenced broker again.
func (n *Node) Restart(ctx context.Context) error { return n.c.Restart(ctx, n) }

// Restart starts stopped or killed nodes again, all at once (a node alone
// cannot serve while the quorum lacks its voters), and returns once each
// is an unfenced broker again.
func (c *Cluster) Restart(ctx context.Context, nodes ...*Node) error {
	for _, n := range nodes {
		if p := n.current(); p != nil && p.Running() {
			return fmt.Errorf("kafkatest: node %d is running", n.ID)
		}
	}
	for _, n := range nodes {
		if err := n.launch(); err != nil {
			return err
		}
	}
	return c.WaitReady(ctx, nodes...)
}

func (n *Node) propsPath() string { return filepath.Join(n.dir, "server.properties") }

// properties is the node's server.properties: KRaft combined mode on
// loopback, static voters, the settings of a managed Kafka (no topic
// auto-creation) and what keeps a small test machine quick (few
// partitions of the internal topics, no initial rebalance delay).
func (n *Node) properties() string {
	var voters []string
	for _, o := range n.c.nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", o.ID, o.ctrlAddr))
	}
	rf, isr := n.c.replication()
	lines := []string{
		"process.roles=broker,controller",
		"node.id=" + strconv.Itoa(n.ID),
		"controller.quorum.voters=" + strings.Join(voters, ","),
		"listeners=PLAINTEXT://" + n.Addr + ",CONTROLLER://" + n.ctrlAddr,
		"advertised.listeners=PLAINTEXT://" + n.Addr,
		"controller.listener.names=CONTROLLER",
		"inter.broker.listener.name=PLAINTEXT",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs=" + filepath.Join(n.dir, "data"),
		"auto.create.topics.enable=false",
		"unclean.leader.election.enable=false",
		"default.replication.factor=" + strconv.Itoa(int(rf)),
		"min.insync.replicas=" + strconv.Itoa(isr),
		"offsets.topic.replication.factor=" + strconv.Itoa(int(rf)),
		"offsets.topic.num.partitions=4",
		"transaction.state.log.replication.factor=" + strconv.Itoa(int(rf)),
		"transaction.state.log.min.isr=" + strconv.Itoa(isr),
		"transaction.state.log.num.partitions=4",
		"share.coordinator.state.topic.replication.factor=" + strconv.Itoa(int(rf)),
		"share.coordinator.state.topic.min.isr=" + strconv.Itoa(isr),
		"group.initial.rebalance.delay.ms=0",
		"num.network.threads=2",
		"num.io.threads=2",
		"background.threads=2",
		"num.recovery.threads.per.data.dir=1",
		"log.segment.bytes=16777216",
	}
	return strings.Join(lines, "\n") + "\n"
}

const log4j2 = `status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.state.name = state.change.logger
logger.state.level = WARN
`

// format writes the node's configuration and formats its storage with
// the cluster's id (bin/kafka-storage.sh format).
func (n *Node) format(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Join(n.dir, "logs"), 0o755); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.WriteFile(n.propsPath(), []byte(n.properties()), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	if err := os.WriteFile(filepath.Join(n.dir, "log4j2.properties"), []byte(log4j2), 0o644); err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	args := append(n.jvmArgs(128), "kafka.tools.StorageTool", "format", "-t", n.c.clusterID, "-c", n.propsPath())
	out, err := exec.CommandContext(ctx, n.c.opts.Java, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kafkatest: format node %d: %w\n%s", n.ID, err, out)
	}
	return nil
}

func (n *Node) jvmArgs(heapMB int) []string {
	return []string{
		"-Xmx" + strconv.Itoa(heapMB) + "m", "-Xms" + strconv.Itoa(min(heapMB, 128)) + "m",
		"-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(n.dir, "log4j2.properties"),
		"-Dkafka.logs.dir=" + filepath.Join(n.dir, "logs"),
		"-cp", filepath.Join(n.c.opts.Libs, "*"),
	}
}

// launch starts the node's JVM; WaitReady says when it serves.
func (n *Node) launch() error {
	args := append(n.jvmArgs(n.c.opts.HeapMB), "kafka.Kafka", n.propsPath())
	p, err := rig.Start(rig.Spec{
		Name: fmt.Sprintf("kafka-%d", n.ID), Path: n.c.opts.Java, Args: args,
		DieWithParent: true,
		Announce:      func(string) (string, string, bool) { return "", "", false },
	})
	if err != nil {
		return fmt.Errorf("kafkatest: start node %d: %w", n.ID, err)
	}
	n.mu.Lock()
	n.proc = p
	n.mu.Unlock()
	return nil
}

// logTail is the end of the node's server.log and its console, for errors.
func (n *Node) logTail() string {
	var b strings.Builder
	if p := n.current(); p != nil {
		b.WriteString(p.Tail(20))
	}
	if data, err := os.ReadFile(filepath.Join(n.dir, "logs", "server.log")); err == nil {
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		b.WriteString(strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
	return b.String()
}

// newClusterID is a random KRaft cluster id: 16 bytes, base64 URL
// without padding (what kafka-storage.sh random-uuid prints). Like
// Kafka's Uuid.randomUuid it never starts with '-': kafka-storage
// would read such an id as an option and refuse to format.
func newClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// freePorts returns n distinct free loopback ports. They are free when
// asked; a node binds them a moment later.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kafkatest: free port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ForTest starts a three-node Apache Kafka cluster (KRaft, on
// loopback, replication 3, min.insync.replicas 2, no topic
// auto-creation) of the test's own, from the jars in
// YIDU_TEST_KAFKA_LIBS, stopped when the test ends. Without the jars the
// test is skipped, or fails with YIDU_TEST_LONG=1 (.ci/run).
func ForTest(tb testing.TB) *Cluster {
	tb.Helper()
	if os.Getenv(LibsEnv) == "" {
		err := fmt.Errorf("%s is not set (.ci/kafka/fetch.sh prints the folder)", LibsEnv)
		if os.Getenv(testenv.LongEnv) == "1" {
			tb.Fatalf("kafkatest: Apache Kafka unavailable with %s=1: %v", testenv.LongEnv, err)
		}
		tb.Skipf("kafkatest: Apache Kafka unavailable: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: tb.TempDir(), Nodes: 3})
	if err != nil {
		tb.Fatalf("kafkatest: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}
