package main

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunServesAndExitsOnEOF starts the broker as the bench does, produces
// and consumes one record through the printed address, and checks that
// closing stdin stops it.
func TestRunServesAndExitsOnEOF(t *testing.T) {
	stdinR, stdinW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"-listen", "127.0.0.1:0", "-topic", "t1", "-partitions", "2", "-exit-on-eof"},
			stdinR, outW, io.Discard)
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("read address: %v", err)
	}
	addr := strings.TrimSpace(line)
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("address %q; want 127.0.0.1:port", addr)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("t1"), kgo.ConsumeTopics("t1"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	fetches := cl.PollRecords(ctx, 1)
	if errs := fetches.Errors(); len(errs) > 0 {
		t.Fatalf("fetch: %v", errs)
	}
	if recs := fetches.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("fetched %v; want one record hello", recs)
	}

	stdinW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run = %v; want nil after stdin closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after stdin closed")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"zero partitions", []string{"-partitions", "0"}},
		{"unknown flag", []string{"-nope"}},
		{"bad listen", []string{"-listen", "256.0.0.1:x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := run(context.Background(), tt.args, strings.NewReader(""), io.Discard, io.Discard); err == nil {
				t.Errorf("run(%q) = nil; want an error", tt.args)
			}
		})
	}
}
