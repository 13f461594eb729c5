package faulttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/yidu-io/yidu/internal/testenv"
)

// spoolBytes returns the bytes of the spool segments in dir.
func spoolBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.spool"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// endOffsets returns the sum of the deltas topic's end offsets: the
// deltas Kafka holds. -1 while no broker answers.
func (e *env) endOffsets() int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(e.admin()).ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			n += o.Offset
		}
	})
	return n
}

// TestKafkaStopped25s: the broker stops for 25 s — longer than WeCom's
// three tries — in the middle of a storm played with WeCom's exact retry
// policy. The receiver spools the deltas no broker acknowledges (fsync
// before the 200) and forwards them once the broker is back: every press
// is answered 200, reaches MySQL with its CreateTime, and the dashboard
// equals MySQL without `yidu reconcile`.
func TestKafkaStopped25s(t *testing.T) {
	testenv.Long(t)
	t.Parallel() // mostly waiting out the outage
	spool := t.TempDir()
	e, _, dash := newOutageEnv(t, outageOptions{envOptions: envOptions{Notices: 2, Members: 450},
		Receiver: map[string]any{"spool_dir": spool, "spool_max_bytes": 64 << 20}})
	done := e.goPressStorm(context.Background(), e.reads, 20) // 900 presses, 45 s
	time.Sleep(10 * time.Second)
	e.kafka.stop()
	down := time.Now()
	at := e.wecom.sent.Load()
	time.Sleep(25 * time.Second)
	peak := spoolBytes(t, spool)
	e.kafka.start(t)
	up := time.Now()
	<-done
	if peak == 0 {
		t.Error("nothing was spooled while the broker was stopped")
	}
	spooled := metricSum(t, e.receivers[0], "yidu_receiver_spool_spooled_total")
	e.verifyHealed("8. broker stopped 25 s (spool)",
		fmt.Sprintf("kfake stopped %.0f s after %d presses, restarted on its port with its log; %.0f deltas spooled (%d bytes at the restart)",
			up.Sub(down).Seconds(), at, spooled, peak), dash)
	waitSpoolEmpty(t, spool)
}

func waitSpoolEmpty(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for spoolBytes(t, dir) != 0 {
		if time.Now().After(deadline) {
			t.Errorf("spool still holds %d bytes", spoolBytes(t, dir))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReceiverKilledDuringSpoolDrain: presses arrive while the broker is
// stopped and are spooled; the broker comes back and the receiver is
// killed with SIGKILL as soon as the drain has forwarded the first deltas
// (the spool still holds the rest), then started again on its address and
// spool directory. It forwards the spool again (at least once; flushd's
// guard makes the duplicates no-ops): 0 presses lost, no row twice.
func TestReceiverKilledDuringSpoolDrain(t *testing.T) {
	testenv.Long(t)
	t.Parallel()
	spool := t.TempDir()
	e, _, dash := newOutageEnv(t, outageOptions{envOptions: envOptions{Notices: 2, Members: 1500},
		Receiver: map[string]any{"spool_dir": spool, "spool_max_bytes": 64 << 20}})
	rcv := e.receivers[0]
	before := e.endOffsets()
	e.kafka.stop()
	// 2400 presses at 300/s, all during the outage: all spooled.
	done := e.goPressStorm(context.Background(), e.reads[:2400], 300)
	<-done
	spooled := spoolBytes(t, spool)
	if spooled == 0 {
		t.Fatal("nothing was spooled while the broker was stopped")
	}
	e.kafka.start(t)
	// Kill as soon as the drain has moved the end offsets.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := e.endOffsets(); n > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the spool did not start draining within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	rcv.kill9(t)
	forwarded, left := e.endOffsets()-before, spoolBytes(t, spool)
	t.Logf("killed mid-drain: %d deltas forwarded, %d of %d spool bytes still on disk", forwarded, left, spooled)
	if left == 0 {
		t.Log("the drain finished before the kill: the replay proves nothing this run")
	}
	rcv = e.startReceiver("receiver-2", rcv.addr)
	e.wecom.setPhase("after")
	e.pressStorm(context.Background(), e.reads[2400:], 100)
	e.verifyHealed("9. receiver kill -9 during the spool drain",
		fmt.Sprintf("2400 presses spooled while kfake was stopped (%d bytes); kill -9 of the receiver after %d deltas were forwarded, %d bytes still on disk; restarted on its spool", spooled, forwarded, left), dash)
	waitSpoolEmpty(t, spool)
	_ = rcv
}
