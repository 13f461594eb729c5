package delta

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSpoolConcurrent: many callbacks publish at once while Kafka goes
// down and comes back twice; every Publish that returned nil is
// acknowledged by Kafka in the end (group fsync, sealing and draining
// racing the writers), and the spool ends empty.
func TestSpoolConcurrent(t *testing.T) {
	k := &fakeKafka{}
	s := newTestSpool(t, k, t.TempDir(), SpoolOptions{SegmentBytes: 4 << 10, DrainInterval: 5 * time.Millisecond})
	const writers, each = 16, 200
	var ok atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				k.setDown(false)
				return
			case <-time.After(3 * time.Millisecond):
				k.setDown(i%20 < 10)
			}
		}
	}()
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Publish(context.Background(), spoolDeltas(w*each+i, 1)); err != nil {
					t.Errorf("Publish: %v", err)
					return
				}
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	close(stop)
	waitUntil(t, "spool drained", func() bool { return s.Bytes() == 0 })
	set, _ := ackedSet(k)
	if int64(len(set)) != ok.Load() || ok.Load() != writers*each {
		t.Errorf("Kafka acknowledged %d distinct deltas of %d published (%d calls)", len(set), ok.Load(), writers*each)
	}
}

// BenchmarkSpoolWrite: deltas spooled per second while Kafka is down, by
// concurrent callbacks sharing fsyncs (b.RunParallel, GOMAXPROCS × -cpu
// goroutines; run with -cpu 1,16,64 for more callers).
func BenchmarkSpoolWrite(b *testing.B) {
	k := &fakeKafka{down: true}
	s, err := NewSpool(k, SpoolOptions{Dir: b.TempDir(), DrainInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ds := spoolDeltas(0, 1)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Publish(context.Background(), ds); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
}
