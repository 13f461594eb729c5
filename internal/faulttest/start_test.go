package faulttest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// listenBound is how soon a receiver started during an outage must take
// callbacks (issue 32): well inside the 5 s between WeCom's tries.
const listenBound = 2 * time.Second

// TestReceiverStartsDuringOutage: the receiver is killed and started
// again while Redis, Kafka or MySQL is down, frozen (it answers nothing)
// or refusing (connections refused or reset). Each time it answers
// within 2 s, /readyz stays 200 and names the missing dependency, and
// the presses WeCom delivers meanwhile (its exact retry policy) go
// through the degraded paths (unmarked, the spool, by UserID); once the
// dependency is back every press is in MySQL and the dashboard without
// `yidu reconcile`.
func TestReceiverStartsDuringOutage(t *testing.T) {
	testenv.Long(t)
	type outage struct {
		down, up func()
	}
	tests := []struct {
		name string
		dep  string // as /readyz names it
		o    outageOptions
		// fault takes the dependency down and returns how to bring it back.
		fault func(t *testing.T, e *env, rs *redisServer) outage
	}{
		{"redis frozen", "redis", outageOptions{OwnRedis: true}, func(t *testing.T, e *env, rs *redisServer) outage {
			return outage{rs.freeze, rs.thaw}
		}},
		{"redis refusing", "redis", outageOptions{OwnRedis: true}, func(t *testing.T, e *env, rs *redisServer) outage {
			return outage{func() { rs.proc.Kill() }, func() { rs.restart() }}
		}},
		{"kafka frozen", "kafka", outageOptions{}, func(t *testing.T, e *env, rs *redisServer) outage {
			return outage{e.kafka.freeze, func() { e.kafka.thaw(t) }}
		}},
		{"kafka refusing", "kafka", outageOptions{}, func(t *testing.T, e *env, rs *redisServer) outage {
			return outage{e.kafka.stop, func() { e.kafka.start(t) }}
		}},
		{"mysql frozen", "mysql", outageOptions{MySQLProxy: true}, func(t *testing.T, e *env, rs *redisServer) outage {
			return outage{e.proxy.freeze, e.proxy.thaw}
		}},
		{"mysql refusing", "mysql", outageOptions{MySQLProxy: true}, func(t *testing.T, e *env, rs *redisServer) outage {
			return outage{e.proxy.cut, e.proxy.restore}
		}},
	}
	for i, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			t.Parallel() // mostly waiting on WeCom's 5 s retries
			tt.o.envOptions = envOptions{Notices: 1, Members: 160}
			e, rs, dash := newOutageEnv(t, tt.o)
			old := e.receivers[0]
			f := tt.fault(t, e, rs)
			old.kill9(t)
			f.down()
			down := time.Now()
			start := time.Now()
			rcv := e.startReceiver("receiver-2", old.addr)
			listened := time.Since(start)
			e.receivers[0] = rcv
			if listened > listenBound {
				t.Errorf("the receiver took %s to answer with %s; want at most %s", listened.Round(time.Millisecond), tt.name, listenBound)
			}
			done := e.goPressStorm(context.Background(), e.reads, 20) // 160 presses, 8 s
			code, body := readyz(t, rcv)
			if code != http.StatusOK || !strings.Contains(body, tt.dep) {
				t.Errorf("/readyz with %s = %d %q; want 200 naming %s", tt.name, code, body, tt.dep)
			}
			time.Sleep(10 * time.Second)
			f.up()
			up := time.Now()
			<-done
			// Recorded through a degraded path is recorded: the member's
			// button still turns into "已读 ✓" (issue 32).
			if bare := e.wecom.bare.Load(); bare > 0 {
				t.Errorf("%d presses answered 200 without the passive reply (%d with it)", bare, e.wecom.replies.Load())
			}
			e.verifyHealed(fmt.Sprintf("%d. receiver started, %s", 20+i, tt.name),
				fmt.Sprintf("receiver kill -9, %s, new receiver answered in %s (/readyz %d %q); %s %.0f s",
					tt.name, listened.Round(10*time.Millisecond), code, strings.TrimSpace(body), tt.dep, up.Sub(down).Seconds()), dash)
		})
	}
}

// readyz returns p's /readyz status and body.
func readyz(t *testing.T, p *proc) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.addr + "/readyz")
	if err != nil {
		t.Fatalf("readyz of %s: %v", p.Name(), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// restart starts a killed redis-server again, empty, on its port.
func (r *redisServer) restart() {
	r.t.Helper()
	bin, _ := exec.LookPath("redis-server")
	var err error
	for range 50 {
		if err = r.start(bin); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.t.Fatalf("restart redis-server: %v", err)
}
