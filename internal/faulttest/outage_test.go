package faulttest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// The outage scenarios (docs/reliability.md, "Outages longer than WeCom's
// patience") play WeCom's retry policy exactly — three tries in all, 5 s
// apart, each given up after 5 s (doc path 90238) — while one dependency
// is down for longer than those 15 s, and check without `yidu reconcile`
// that every press is in MySQL with its CreateTime and that the
// dashboard's numbers equal MySQL's within the documented bound.

// WeCom's retry policy (doc path 90238): no answer within 5 s is a
// failed try; three tries in all, 5 s apart.
const (
	wecomTries   = 3
	wecomSpacing = 5 * time.Second
	wecomTimeout = 5 * time.Second
)

// liveBound is how long after the last press the dashboard may take to
// equal MySQL in these scenarios: two flush intervals (300 ms each here)
// plus the time to write what is pending, generous for a loaded CI
// machine. The figure measured is in the report.
const liveBound = 10 * time.Second

// redisServer is a redis-server of the scenario's own, so it can be
// stopped (SIGSTOP: frozen, data intact, as in a failover) and killed with
// its data lost (no persistence: it restarts empty).
type redisServer struct {
	t    *testing.T
	port int
	proc *rig.Proc
}

func startRedis(t *testing.T) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("YIDU_TEST_REAL") != "" {
			t.Fatalf("redis-server: %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	r := &redisServer{t: t}
	for try := 0; try < 20; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.port = l.Addr().(*net.TCPAddr).Port
		l.Close()
		if r.start(bin) == nil {
			t.Cleanup(func() {
				if r.proc != nil && r.proc.Running() {
					_ = syscall.Kill(r.proc.Pid(), syscall.SIGCONT)
					r.proc.Kill()
				}
			})
			return r
		}
	}
	t.Fatal("redis-server did not start on a free port")
	return nil
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// start runs redis-server on r.port, without persistence, and waits until
// it answers PING.
func (r *redisServer) start(bin string) error {
	p, err := rig.Start(rig.Spec{Name: "redis-server", Path: bin,
		Args:     []string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"},
		Announce: func(string) (string, string, bool) { return "", "", false }})
	if err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: r.addr()})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !p.Running() {
			return fmt.Errorf("redis-server exited: %s", p.Tail(5))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		if err == nil {
			r.proc = p
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Kill()
	return fmt.Errorf("redis-server on %d: no PONG: %w", r.port, err)
}

// freeze stops the server (SIGSTOP): connections stay open, nothing is
// answered, the data is kept. thaw resumes it.
func (r *redisServer) freeze() {
	testenv.Check(r.t, "SIGSTOP", syscall.Kill(r.proc.Pid(), syscall.SIGSTOP))
}
func (r *redisServer) thaw() {
	testenv.Check(r.t, "SIGCONT", syscall.Kill(r.proc.Pid(), syscall.SIGCONT))
}

// killRestart kills the server with SIGKILL and starts it again, empty,
// on the same port.
func (r *redisServer) killRestart() {
	r.t.Helper()
	r.proc.Kill()
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

// outageOptions shape an outage scenario.
type outageOptions struct {
	envOptions
	// OwnRedis runs a redis-server of the scenario's own (else the shared
	// one, under a prefix).
	OwnRedis bool
	// Receiver adds settings to the receiver's configuration.
	Receiver map[string]any
	// MySQLProxy puts every yidu process's MySQL behind a TCP proxy the
	// scenario can cut (env.proxy); the test's own checks go direct.
	MySQLProxy bool
}

// newOutageEnv is newEnv with the scenario's own Redis when asked, a
// dashboard process kept running (the live numbers are read through its
// API) and the receiver settings given.
func newOutageEnv(t *testing.T, o outageOptions) (*env, *redisServer, *proc) {
	t.Helper()
	o.setDefaults()
	e := &env{t: t, started: time.Now()}
	e.dsn = testenv.MySQLDSN(t)
	var rs *redisServer
	redisAddr := ""
	if o.OwnRedis {
		rs = startRedis(t)
		redisAddr = rs.addr()
		e.rdb = redis.NewClient(&redis.Options{Addr: redisAddr})
		t.Cleanup(func() { e.rdb.Close() })
		e.prefix = "yidu"
	} else {
		redisAddr = testenv.RedisAddr(t)
		e.rdb, e.prefix = testenv.Redis(t)
	}
	yiduDSN := e.dsn
	if o.MySQLProxy {
		c, err := mysql.ParseDSN(e.dsn)
		testenv.Check(t, "parse dsn", err)
		e.proxy = newProxy(t, c.Addr)
		c.Addr = e.proxy.addr
		yiduDSN = c.FormatDSN()
	}
	e.start(o.envOptions, redisAddr, yiduDSN, o.Receiver)
	e.wecom.client = &http.Client{Timeout: wecomTimeout}
	if o.Serve {
		return e, rs, e.serveDash
	}
	dash := e.startServer("dashboard-live", "dashboard", "/login")
	return e, rs, dash
}

// pressStorm delivers reads at rate per second, open loop (each press on
// its own goroutine, as WeCom's callbacks arrive whatever yidu does), each
// with WeCom's exact retry policy. It returns when every press was
// answered 200 or given up.
func (e *env) pressStorm(ctx context.Context, reads []readEvent, rate int) {
	w := e.wecom
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for _, r := range reads {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		wg.Go(func() { w.deliverExact(ctx, r) })
	}
	wg.Wait()
}

// goPressStorm runs pressStorm in the background; done closes at its end.
func (e *env) goPressStorm(ctx context.Context, reads []readEvent, rate int) <-chan struct{} {
	return goDone(func() { e.pressStorm(ctx, reads, rate) })
}

// deliverExact is one press as WeCom delivers it: try k starts 5 s·k after
// the first (k = 0, 1, 2), each waits at most 5 s for the answer; the
// first 200 ends it.
func (w *wecom) deliverExact(ctx context.Context, r readEvent) {
	start := time.Now()
	w.deliverTries(ctx, r, wecomTries, func(try int) string {
		if d := time.Until(start.Add(time.Duration(try) * wecomSpacing)); d > 0 {
			time.Sleep(d)
		}
		return w.urls[try%len(w.urls)]
	})
}

// dashboardRead returns the read count the dashboard shows for msgID
// (GET /api/v1/messages/{msgid}/progress).
func dashboardRead(ctx context.Context, dash *proc, msgID string) (int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dash.addr+"/api/v1/messages/"+msgID+"/progress", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("progress of %s: %s", msgID, resp.Status)
	}
	var p struct {
		Read int64 `json:"read"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return 0, err
	}
	return p.Read, nil
}

// metricSum scrapes p's /metrics and sums the samples of series name
// whose labels contain every one of labels (`outcome="unmarked"`).
func metricSum(t *testing.T, p *proc, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/metrics")
	if err != nil {
		t.Fatalf("metrics of %s: %v", p.Name(), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// healed is what verifyHealed measured.
type healed struct {
	// Converged is how long after the last press was answered the
	// dashboard, Redis and MySQL all held every press.
	Converged time.Duration
	// Backwards counts samples where a message's dashboard count went
	// down.
	Backwards int
}

// verifyHealed checks, without `yidu reconcile`, that every press was
// answered 200 within WeCom's three tries and reached MySQL with its
// CreateTime, that Redis's read bits and the dashboard's count equal
// MySQL's within liveBound of the last answer, and then that nothing is
// counted twice or left orphaned. It records the report (repaired: 0).
func (e *env) verifyHealed(name, faults string, dash *proc) healed {
	e.t.Helper()
	ctx := context.Background()
	res, statuses := e.wecom.snapshot()
	rep := newReport(name, faults, res)
	last := time.Now()
	var h healed
	var st state
	var err error
	dashOK := false
	prev := map[string]int64{}
	bound := cmp.Or(e.liveBound, liveBound)
	deadline := last.Add(bound)
	for {
		if st, err = e.load(ctx, e.msgs); err != nil {
			e.t.Fatalf("load: %v", err)
		}
		dashOK = true
		for _, m := range e.msgs {
			n, err := dashboardRead(ctx, dash, m.ID)
			if err != nil {
				e.t.Fatalf("dashboard: %v", err)
			}
			if n < prev[m.ID] {
				h.Backwards++
			}
			prev[m.ID] = n
			want := 0
			for k := range st.mysql {
				if k.MsgID == m.ID {
					want++
				}
			}
			if n != int64(want) {
				dashOK = false
			}
		}
		allIn := len(st.mysql) == len(res)
		if allIn && dashOK && len(st.redis) == len(st.mysql) {
			h.Converged = time.Since(last)
			break
		}
		if time.Now().After(deadline) {
			h.Converged = -1
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep.atRest(e, st)
	var problems []string
	lost := 0
	for k, r := range res {
		row, in := st.mysql[k]
		switch {
		case !in:
			lost++
			problems = append(problems, fmt.Sprintf("%v: pressed (200: %v after %d tries), not in MySQL", k, r.OK, r.Tries))
		case row.At != r.At:
			lost++
			problems = append(problems, fmt.Sprintf("%v: CreateTime %d, MySQL read_time %d (source %d)", k, r.At, row.At, row.Source))
		case !st.redis[k]:
			problems = append(problems, fmt.Sprintf("%v: in MySQL, read bit not set in Redis %s after the last answer", k, bound))
		}
		if !r.OK {
			problems = append(problems, fmt.Sprintf("%v: WeCom gave up after %d tries", k, r.Tries))
		}
	}
	for k := range st.redis {
		if _, ok := st.mysql[k]; !ok {
			problems = append(problems, fmt.Sprintf("%v: read bit in Redis, not in MySQL", k))
		}
	}
	if !dashOK {
		problems = append(problems, fmt.Sprintf("dashboard read counts %v differ from MySQL's %d reads %s after the last answer", prev, len(st.mysql), bound))
	}
	if h.Backwards > 0 {
		problems = append(problems, fmt.Sprintf("the dashboard's count went down %d times while converging", h.Backwards))
	}
	problems = append(problems, st.leftovers()...)
	rep.Lost = lost
	if h.Converged >= 0 {
		rep.Faults += fmt.Sprintf("; dashboard = MySQL %s after the last answer, no reconcile", h.Converged.Round(10*time.Millisecond))
	} else {
		rep.Faults += fmt.Sprintf("; dashboard ≠ MySQL %s after the last answer", bound)
	}
	addReport(rep)
	e.t.Logf("%s: reads=%d tries=%d retries=%d 200s=%d gave_up=%d lost=%d dupes=%d in_mysql=%d converged=%s elapsed=%s statuses=%v",
		name, rep.Reads, rep.Tries, rep.Retries, rep.OK, rep.GaveUp, rep.Lost, rep.Dupes, rep.Landed,
		h.Converged, rep.Elapsed.Round(100*time.Millisecond), statuses)
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
		}
		e.t.Errorf("invariant broken:\n  %s", joinLines(problems))
	}
	return h
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n  "
		}
		out += l
	}
	return out
}

// TestRedisKilledDataLost: the scenario's Redis is killed with SIGKILL
// mid-storm and restarts empty (no persistence). The receiver restores a
// message from MySQL on its next read; the reads that were in Kafka at
// that moment get their bits from flushd as it writes them, so the
// dashboard converges to MySQL without `yidu reconcile`.
func TestRedisKilledDataLost(t *testing.T) {
	testenv.Long(t)
	t.Parallel() // mostly waiting on WeCom's 5 s retries
	e, rs, dash := newOutageEnv(t, outageOptions{envOptions: envOptions{Notices: 2, Members: 300}, OwnRedis: true})
	done := e.goPressStorm(context.Background(), e.reads, 40)
	kills := 0
	for i := 1; i <= 2; i++ {
		e.wecom.waitSent(int64(len(e.reads)*i/3), done)
		rs.killRestart()
		kills++
	}
	<-done
	e.verifyHealed("7. Redis killed, data lost", fmt.Sprintf("%d× kill -9 of Redis mid-storm, restarted empty; WeCom's exact retry policy", kills), dash)
}

// TestRedisStopped25s: the scenario's Redis is frozen (SIGSTOP: no answer,
// data kept, as in a failover) for 25 s — longer than WeCom's three tries —
// in the middle of a storm played with WeCom's exact retry policy. The
// receiver publishes the presses it cannot mark unmarked; flushd writes
// them (recipient rows only) and sets their bits once Redis answers again:
// every press is answered 200 and in MySQL, and the dashboard equals MySQL
// without `yidu reconcile`.
func TestRedisStopped25s(t *testing.T) {
	testenv.Long(t)
	t.Parallel() // mostly waiting out the outage
	e, rs, dash := newOutageEnv(t, outageOptions{envOptions: envOptions{Notices: 2, Members: 450}, OwnRedis: true})
	done := e.goPressStorm(context.Background(), e.reads, 20) // 900 presses, 45 s
	time.Sleep(10 * time.Second)
	rs.freeze()
	down := time.Now()
	at := e.wecom.sent.Load()
	rowsAtFreeze := e.readRows()
	time.Sleep(25 * time.Second)
	rowsDuring := e.readRows() - rowsAtFreeze
	rs.thaw()
	up := time.Now()
	<-done
	if rowsDuring == 0 {
		t.Error("no read reached MySQL while Redis was stopped")
	}
	unmarked := metricSum(t, e.receivers[0], "yidu_bitmap_reads_total", `outcome="unmarked"`)
	if unmarked == 0 {
		t.Error("no read was published unmarked")
	}
	e.verifyHealed("10. Redis stopped 25 s",
		fmt.Sprintf("redis-server stopped (SIGSTOP) %.0f s after %d presses, then resumed with its data; %.0f presses published unmarked, %d reads reached MySQL meanwhile",
			up.Sub(down).Seconds(), at, unmarked, rowsDuring), dash)
}

// TestMySQLStopped25s: every yidu process reaches MySQL through a proxy,
// cut for 25 s — longer than WeCom's three tries — in the middle of a
// storm played with WeCom's exact retry policy. Members the receiver has
// in its idmap cache are marked in Redis as usual; the others are
// published by UserID, and flushd maps and writes them once MySQL is back
// (retrying meanwhile): every press is answered 200 and in MySQL, and the
// dashboard equals MySQL without `yidu reconcile`.
func TestMySQLStopped25s(t *testing.T) {
	testenv.Long(t)
	t.Parallel() // mostly waiting out the outage
	// A cold cache (receiver.warm false): the members the receiver has
	// not met before the cut are the ones published by UserID.
	e, _, dash := newOutageEnv(t, outageOptions{envOptions: envOptions{Notices: 2, Members: 450}, MySQLProxy: true,
		Receiver: map[string]any{"warm": false}})
	done := e.goPressStorm(context.Background(), e.reads, 20) // 900 presses, 45 s
	time.Sleep(10 * time.Second)
	e.proxy.cut()
	down := time.Now()
	at := e.wecom.sent.Load()
	rowsAtCut := e.readRows()
	time.Sleep(25 * time.Second)
	rowsDuring := e.readRows() - rowsAtCut
	e.proxy.restore()
	up := time.Now()
	<-done
	if rowsDuring != 0 {
		t.Errorf("%d rows changed while MySQL was cut; want 0 (is the proxy in the way?)", rowsDuring)
	}
	byUser := metricSum(t, e.receivers[0], "yidu_bitmap_reads_total", `outcome="by_userid"`)
	if byUser == 0 {
		t.Error("no read was published by UserID")
	}
	e.verifyHealed("11. MySQL stopped 25 s",
		fmt.Sprintf("proxy to MySQL (every process) cut %.0f s after %d presses; %.0f presses of members not in the receiver's cache published by UserID; 0 rows written meanwhile",
			up.Sub(down).Seconds(), at, byUser), dash)
}
