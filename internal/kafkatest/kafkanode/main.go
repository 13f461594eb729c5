// Command kafkanode runs an Apache Kafka cluster of one or three nodes
// (internal/kafkatest) in the foreground for .ci/run and for developers:
// it prints the brokers ("host:port,host:port") on stdout once every node
// serves, and stops the nodes on SIGINT or SIGTERM. Its JVMs die with it
// in any way. Test support only.
//
//	go run ./internal/kafkatest/kafkanode -libs "$(.ci/kafka/fetch.sh)" -dir /tmp/kafka
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/yidu-io/yidu/internal/kafkatest"
)

func main() {
	libs := flag.String("libs", os.Getenv(kafkatest.LibsEnv), "folder of Kafka's jars (.ci/kafka/fetch.sh prints it)")
	dir := flag.String("dir", "", "data folder (default: a new temporary one)")
	nodes := flag.Int("nodes", 1, "nodes: 1 or 3")
	heap := flag.Int("heap-mb", 512, "heap of each JVM, MB")
	flag.Parse()
	if err := run(*libs, *dir, *nodes, *heap); err != nil {
		fmt.Fprintln(os.Stderr, "kafkanode:", err)
		os.Exit(1)
	}
}

func run(libs, dir string, nodes, heap int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "yidu-kafka-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	start, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := kafkatest.Start(start, kafkatest.Options{Libs: libs, Dir: dir, Nodes: nodes, HeapMB: heap})
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Println(strings.Join(c.Brokers(), ","))
	<-ctx.Done()
	return nil
}
