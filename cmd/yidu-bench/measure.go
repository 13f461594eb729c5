package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
)

// arm is what measure needs to know about one system under test.
type arm struct {
	name string
	host string // the receiver
	// dashboard and mysql return the reads shown and stored (nil: ceiling).
	dashboard, mysql func(ctx context.Context) (int64, error)
	// written is the arm's own count of the reads it has committed to
	// MySQL (no query): what poll reads during the load instead of mysql.
	written    func() int64
	statements func() (updates, txs int64)
	pids       []int  // child processes whose CPU counts (yidu-kfake)
	profile    string // CPU profile file
}

// poll calls f every interval until it returns want, and returns when
// that was first seen (zero when never).
//
// Until loaded is closed it polls every slow instead, and when the arm
// has a counter of its own (during, not nil) it reads that rather than
// calling f, and calls f only once the counter reaches want: a COUNT(*)
// over the notice's rows costs MySQL ~50 ms of CPU at R = 100k while most
// are unread, so ten a second during the storm charged the arm half a
// core of the bench's own making, and one a second still a fifth of
// mysqld's work in the storm (issue 16). Exactness is timed after the
// last 200, where f is called every interval, so this loses nothing but
// the timeline's source: during the load it is the arm's own count.
func poll(ctx context.Context, interval, slow time.Duration, loaded <-chan struct{}, want int64, last *atomic.Int64, f func(context.Context) (int64, error), during func() int64) time.Time {
	var at time.Time
	pprof.Do(ctx, pprof.Labels("role", "poller"), func(ctx context.Context) {
		t := time.NewTicker(slow)
		defer t.Stop()
		for {
			cheap := false
			if loaded != nil && during != nil {
				n := during()
				last.Store(n)
				cheap = n < want
			}
			if !cheap {
				qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				n, err := f(qctx)
				cancel()
				if err == nil {
					last.Store(n)
				}
				if err == nil && n == want {
					at = time.Now()
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-loaded:
				loaded = nil
				t.Reset(interval)
			case <-t.C:
			}
		}
	})
	return at
}

// measure runs the storm against a and collects the figures.
func (b *bench) measure(ctx context.Context, a arm, w *workload) (ArmResult, error) {
	client := newClient(b.cfg.Conns)
	defer client.CloseIdleConnections()
	if err := warm(ctx, client, a.host, b.cfg.Conns); err != nil {
		return ArmResult{}, fmt.Errorf("warm up: %w", err)
	}
	runtime.GC()
	resetPeakRSS()
	r := ArmResult{Arm: a.name, StartRSSMB: float64(memKB("VmRSS")) / 1024}
	c0 := b.costs(a)
	if a.profile != "" {
		stop, err := startProfile(a.profile)
		if err != nil {
			return r, err
		}
		defer stop()
	}

	var e *exactness
	if a.dashboard != nil {
		e = b.watch(ctx, a, int64(b.cfg.Recipients))
		defer e.stop()
	}

	b.logf("%s: storm of %d callbacks on %d connections", a.name, len(w.reqs), b.cfg.Conns)
	lctx, cancel := context.WithTimeout(ctx, b.cfg.ArmTimeout)
	lr := runLoad(lctx, client, a.host, callbackURL, w.reqs, b.cfg.Conns, b.cfg.Rate)
	cancel()
	if e != nil {
		close(e.loaded)
	}
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	// Wait for exactness: one flush interval plus a generous margin. CPU
	// counts until then, so flushd's work is included.
	var dashAt, mysqlAt time.Time
	if e != nil {
		r.Timeline = e.wait(b.cfg.FlushInterval+30*time.Second, lr.Start)
		dashAt, mysqlAt = e.dashAt, e.mysqlAt
	}
	c1 := b.costs(a)
	myDB, err := dbThreadsCPU(ctx, b.db, b.scratch.DBName, b.mysqld, c0.threads)
	if err != nil {
		return r, fmt.Errorf("mysqld threads of %s: %w", b.scratch.DBName, err)
	}
	r.fill(lr, dashAt, mysqlAt)
	r.charge(c0, c1, myDB, lr.OK)
	return r, nil
}

// costs are the CPU and statement counters measure reads before and after
// an arm's storm.
type costs struct {
	self, ext, mysqld, redisd time.Duration
	threads                   map[int]time.Duration // mysqld's threads
	updates, txs              int64
}

// costs reads the counters now. Only the first reading's threads are
// used (dbThreadsCPU reads the threads again itself).
func (b *bench) costs(a arm) costs {
	c := costs{self: selfCPU(), ext: sumCPU(a.pids), mysqld: sumCPU(b.mysqld), redisd: sumCPU(b.redisd), threads: threadsCPU(b.mysqld)}
	if a.statements != nil {
		c.updates, c.txs = a.statements()
	}
	return c
}

// startProfile starts a CPU profile into path; stop ends it. The heap's
// allocations at the start and at the stop go to path.allocs0 and
// path.allocs (go tool pprof -base path.allocs0 path.allocs: what the
// span allocated).
func startProfile(path string) (stop func(), err error) {
	if err := writeAllocs(path + ".allocs0"); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
		_ = writeAllocs(path + ".allocs")
	}, nil
}

// writeAllocs writes the allocs profile to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("allocs").WriteTo(f, 0)
}

// exactness polls an arm's dashboard and MySQL until both show every read,
// and samples both once a second for the timeline.
type exactness struct {
	stop            context.CancelFunc
	polls           sync.WaitGroup
	dashAt, mysqlAt time.Time
	dashN, mysqlN   atomic.Int64
	timeline        [][3]int64
	sampled         chan struct{}
	loaded          chan struct{} // closed when the load phase ends
}

// watch starts polling a, which has a dashboard, for want reads.
func (b *bench) watch(ctx context.Context, a arm, want int64) *exactness {
	pctx, stop := context.WithCancel(ctx)
	e := &exactness{stop: stop, sampled: make(chan struct{}), loaded: make(chan struct{})}
	// The dashboard is polled as the live page would, throughout;
	// MySQL's count is read from the arm's own counter once a second
	// per 100,000 recipients until the load ends (see poll): the
	// query scans the unread rows, ~0.5 µs of mysqld each, so at
	// R = 1M one a second was half a core.
	slow := time.Second * time.Duration(max(1, b.cfg.Recipients/100_000))
	e.polls.Go(func() {
		e.dashAt = poll(pctx, 100*time.Millisecond, 100*time.Millisecond, nil, want, &e.dashN, a.dashboard, nil)
	})
	e.polls.Go(func() {
		e.mysqlAt = poll(pctx, 100*time.Millisecond, slow, e.loaded, want, &e.mysqlN, a.mysql, a.written)
	})
	start := time.Now()
	go func() {
		defer close(e.sampled)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case now := <-t.C:
				e.timeline = append(e.timeline, [3]int64{now.Sub(start).Milliseconds(), e.dashN.Load(), e.mysqlN.Load()})
			}
		}
	}()
	return e
}

// wait waits until both polls saw every read or margin passed, and returns
// the timeline with a last sample, its times since start.
func (e *exactness) wait(margin time.Duration, start time.Time) [][3]int64 {
	deadline := time.AfterFunc(margin, e.stop)
	e.polls.Wait()
	deadline.Stop()
	e.stop()
	<-e.sampled
	return append(e.timeline, [3]int64{time.Since(start).Milliseconds(), e.dashN.Load(), e.mysqlN.Load()})
}

// fill sets r's figures of the load lr and of the times the dashboard
// and MySQL were first exact (zero: never).
func (r *ArmResult) fill(lr loadResult, dashAt, mysqlAt time.Time) {
	r.Requests, r.Accepted, r.Errors, r.Failed, r.Status = lr.Requests, lr.OK, lr.Errors, lr.Failed, lr.Status
	r.Seconds = lr.Elapsed.Seconds()
	if r.Seconds > 0 {
		r.PerSecond = float64(lr.OK) / r.Seconds
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r.P50ms, r.P99ms, r.P999ms = ms(rig.Percentile(lr.Lat, .50)), ms(rig.Percentile(lr.Lat, .99)), ms(rig.Percentile(lr.Lat, .999))
	if len(lr.Lat) > 0 {
		r.MaxMs = ms(lr.Lat[len(lr.Lat)-1])
	}
	after := func(t time.Time) *float64 {
		if t.IsZero() {
			return nil
		}
		v := ms(t.Sub(lr.LastOK))
		return &v
	}
	r.DashboardExactMs, r.MySQLExactMs = after(dashAt), after(mysqlAt)
}

// charge sets r's costs between c0 and c1 (myDB: the mysqld threads of the
// bench's database), per 1000 accepted callbacks.
func (r *ArmResult) charge(c0, c1 costs, myDB time.Duration, ok int) {
	ext := c1.ext - c0.ext
	cpu := c1.self - c0.self + ext
	my, rd := c1.mysqld-c0.mysqld, c1.redisd-c0.redisd
	r.MySQLUpdates, r.MySQLTxs = c1.updates-c0.updates, c1.txs-c0.txs
	r.PeakRSSMB = float64(memKB("VmHWM")) / 1024
	if ok > 0 {
		r.CPUPer1000 = cpu.Seconds() * 1000 / float64(ok)
		r.KafkaCPUPer1000 = ext.Seconds() * 1000 / float64(ok)
		r.MySQLdCPUPer1000 = my.Seconds() * 1000 / float64(ok)
		r.MySQLdDBCPUPer1000 = myDB.Seconds() * 1000 / float64(ok)
		r.RedisCPUPer1000 = rd.Seconds() * 1000 / float64(ok)
	}
	r.LoadAvg = rig.LoadAvg()
}
