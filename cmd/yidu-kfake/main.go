// Command yidu-kfake runs a single-broker kfake Kafka cluster as its own
// process, so a benchmark's broker does not share the Go runtime (GC,
// scheduler) of the receiver it measures. It prints the broker address on
// stdout, one line, once it is listening.
//
//	yidu-kfake -listen 127.0.0.1:0 -topic yidu.reads -partitions 4 [-data-dir DIR] [-exit-on-eof]
//
// It stops on SIGINT or SIGTERM, and with -exit-on-eof when its stdin
// closes: a parent that dies without cleaning up (even by SIGKILL) closes
// the pipe, so the broker never outlives it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "yidu-kfake:", err)
		os.Exit(1)
	}
}

// run is main without the process.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("yidu-kfake", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	topic := fs.String("topic", "yidu.reads", "topic to create")
	partitions := fs.Int("partitions", 4, "partitions of the topic")
	dataDir := fs.String("data-dir", "", "persist the log in this directory (default: memory only)")
	exitOnEOF := fs.Bool("exit-on-eof", false, "exit when stdin closes (set by a parent process)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *partitions < 1 || *partitions > 1024 {
		return fmt.Errorf("-partitions %d must be in 1..1024", *partitions)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.SeedTopics(int32(*partitions), *topic),
		// kfake asks for 127.0.0.1:<port>; listen where we were told instead.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, *listen) }),
	}
	if *dataDir != "" {
		opts = append(opts, kfake.DataDir(*dataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("kfake: %w", err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		return fmt.Errorf("kfake: %d brokers listening; want 1", len(addrs))
	}
	fmt.Fprintln(stdout, addrs[0])

	eof := make(chan struct{})
	if *exitOnEOF {
		go func() {
			_, _ = io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	select {
	case <-ctx.Done():
	case <-eof:
	}
	return nil
}
