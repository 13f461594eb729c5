package faulttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// startServe runs `yidu serve` with the scenario's configuration (no
// spool_dir: the default spool in $HOME/.local/state/yidu/spool, HOME
// the scenario's own) on rcvAddr and dashAddr ("" for free ports) and
// waits until its receiver answers. rcv and dash share one process.
func (e *env) startServe(name, rcvAddr, dashAddr string) (rcv, dash *proc) {
	e.t.Helper()
	extra := []string{"HOME=" + e.serveHome, "XDG_STATE_HOME=", "YIDU_DATA_DIR="}
	if rcvAddr != "" {
		extra = append(extra, "YIDU_RECEIVER_LISTEN="+rcvAddr, "YIDU_DASHBOARD_LISTEN="+dashAddr)
	}
	rcv, dash = &proc{}, &proc{}
	var err error
	rp, err := rig.StartReady(e.spec(name, extra, "serve"), func(rp *rig.Proc) error {
		ctx := context.Background()
		if rcv.addr, err = rp.Addr(ctx, "receiver", 15*time.Second); err != nil {
			return err
		}
		if dash.addr, err = rp.Addr(ctx, "dashboard", 15*time.Second); err != nil {
			return err
		}
		return rp.WaitHTTP(ctx, "http://"+rcv.addr+"/healthz", 15*time.Second)
	})
	if err != nil {
		e.t.Fatal(err)
	}
	rcv.Proc, dash.Proc = rp, rp
	return e.track(rcv), dash
}

// TestRestartsInsideOutages is issue 32's run, in docs/reliability.md
// ("Restarted inside an outage"): 1,200 presses over 60 s with WeCom's
// exact retry policy; Redis frozen (SIGSTOP) for 25 s and the receiver
// killed with -9 and started again 3 s into it; then Kafka frozen for
// 25 s and the receiver killed and started again 3 s into that. Every
// press is answered 200 within WeCom's three tries, and the dashboard
// and MySQL hold exactly the acknowledged reads without `yidu reconcile`.
// Once with the split roles (spool in the receiver's data directory),
// once with `yidu serve` and the default configuration.
func TestRestartsInsideOutages(t *testing.T) {
	testenv.Long(t)
	for _, serve := range []bool{false, true} {
		name := "split_roles"
		if serve {
			name = "serve_default_config"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel() // mostly waiting out the outages
			e, rs, dash := newOutageEnv(t, outageOptions{OwnRedis: true,
				envOptions: envOptions{Notices: 2, Members: 600, Serve: serve}})
			// restart kills the receiver (the whole process with serve)
			// and starts it again on its addresses; it returns how long
			// the new one took to answer.
			restart := func(name string) time.Duration {
				old := e.receivers[0]
				old.kill9(t)
				start := time.Now()
				if serve {
					e.receivers[0], dash = e.startServe(name, old.addr, dash.addr)
				} else {
					e.receivers[0] = e.startReceiver(name, old.addr)
				}
				return time.Since(start)
			}
			done := e.goPressStorm(context.Background(), e.reads, 20) // 1,200 presses, 60 s
			time.Sleep(5 * time.Second)
			rs.freeze()
			time.Sleep(3 * time.Second)
			inRedis := restart("restarted-in-redis-freeze")
			time.Sleep(22 * time.Second)
			rs.thaw()
			time.Sleep(2 * time.Second)
			e.kafka.freeze()
			time.Sleep(3 * time.Second)
			inKafka := restart("restarted-in-kafka-freeze")
			time.Sleep(22 * time.Second)
			e.kafka.thaw(t)
			<-done
			for what, d := range map[string]time.Duration{"Redis": inRedis, "Kafka": inKafka} {
				if d > listenBound {
					t.Errorf("the receiver restarted inside the %s freeze took %s to answer; want at most %s", what, d.Round(time.Millisecond), listenBound)
				}
			}
			scenario := "26. restarts inside outages, split roles"
			if serve {
				scenario = "27. restarts inside outages, yidu serve, default config"
			}
			e.verifyHealed(scenario,
				fmt.Sprintf("Redis SIGSTOP 25 s with a receiver kill -9 3 s in (answering again in %s), Kafka frozen 25 s with a kill -9 3 s in (%s)",
					inRedis.Round(10*time.Millisecond), inKafka.Round(10*time.Millisecond)), dash)
			if serve {
				waitSpoolEmpty(t, filepath.Join(e.serveHome, ".local", "state", "yidu", "spool"))
			}
		})
	}
}

// TestSpoolKeptAcrossSIGTERM: presses arrive while Kafka refuses and are
// spooled; the receiver gets SIGTERM (a rollout) while Kafka is still
// down and exits, leaving the spool on its volume, where a kill -9 in
// the middle of a write is simulated: a torn record at the tail of the
// last segment. A new receiver on the same directory detects and skips
// the torn record, logs it, and forwards the spool once Kafka is back:
// no press lost, none counted twice.
func TestSpoolKeptAcrossSIGTERM(t *testing.T) {
	testenv.Long(t)
	t.Parallel()
	e, _, dash := newOutageEnv(t, outageOptions{envOptions: envOptions{Notices: 2, Members: 300}})
	rcv := e.receivers[0]
	dir := filepath.Join(e.dataDirs[rcv.addr], "spool")
	e.kafka.stop()
	e.pressStorm(context.Background(), e.reads[:400], 100)
	rcv.stop(t) // SIGTERM; Close tries Kafka for 5 s, then leaves the spool
	left := spoolBytes(t, dir)
	if left == 0 {
		t.Fatal("the receiver stopped during the Kafka outage left no spool")
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.spool"))
	slices.Sort(segs)
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{60, 0xde, 0xad, 0xbe}); err != nil { // a 60-byte record cut after 3
		t.Fatal(err)
	}
	f.Close()
	rcv2 := e.startReceiver("receiver-2", rcv.addr)
	e.receivers[0] = rcv2
	e.kafka.start(t)
	e.wecom.setPhase("after")
	e.pressStorm(context.Background(), e.reads[400:], 100)
	e.verifyHealed("28. SIGTERM during a Kafka outage, spool kept",
		fmt.Sprintf("400 presses spooled while kfake refused; SIGTERM left %d bytes in %d segments, a torn record appended; a new receiver on the same directory forwarded them", left, len(segs)), dash)
	waitSpoolEmpty(t, dir)
	if !strings.Contains(rcv2.Tail(400), "torn") {
		t.Errorf("the new receiver did not log the torn record:\n%s", rcv2.Tail(30))
	}
}
