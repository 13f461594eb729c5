// Package loop keeps a background loop alive through its items: each item
// runs under its own recover, and an item that panics or fails is logged
// with its id, counted, and backed off (capped), so one poisoned notice
// neither stops the others nor takes the process down (prometheus's
// rule-group evaluation does the same per rule). docs/reliability.md has
// the rule; the alerts (YiduLoopPanics, YiduLoopItemsBackedOff) are in
// deploy/monitoring/prometheusrule.yaml, what to do about them in
// docs/deploy.md.
package loop

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/internal/opt"
)

// Backoff bounds: an item's first retry waits MinBackoff, each failure
// after doubles it, up to MaxBackoff.
const (
	MinBackoff = 5 * time.Second
	MaxBackoff = 5 * time.Minute
)

// PanicError is an item's panic, recovered: its value and stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Guard runs the items of one loop. Safe for concurrent use.
type Guard struct {
	name  string
	log   *slog.Logger
	now   func() time.Time
	min   time.Duration
	max   time.Duration
	m     metrics
	mu    sync.Mutex
	items map[string]*item
	// panics counts the recovered panics (Panics).
	panics atomic.Int64
}

type item struct {
	fails int
	until time.Time
}

type metrics struct {
	panics, failures prometheus.Counter
	backedOff        prometheus.Gauge
}

// Options are a Guard's. Every field has a default.
type Options struct {
	// Registerer takes the yidu_loop_* series (shared between the loops
	// of a process); nil registers nothing.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
	// Now is the clock of the backoff (the loop's own, in tests).
	Now func() time.Time
	// MinBackoff and MaxBackoff override the package's.
	MinBackoff, MaxBackoff time.Duration
}

// New returns the Guard of the loop name (a metric label: "rounds",
// "runner", …), its series preset to 0.
func New(name string, o Options) (*Guard, error) {
	reg := o.Registerer
	if reg != nil {
		reg = metric.Shared(reg) // every loop of the process counts into one family
	}
	f := metric.New(reg)
	panics := f.CounterVec("yidu_loop_panics_total", "Items of a background loop that panicked (recovered; the item is backed off).", "loop")
	failures := f.CounterVec("yidu_loop_item_failures_total", "Items of a background loop that failed or panicked (the item is backed off).", "loop")
	backedOff := f.GaugeVec("yidu_loop_items_backed_off", "Items of a background loop waiting out a backoff after failing.", "loop")
	if err := f.Err("loop " + name); err != nil {
		return nil, err
	}
	g := &Guard{name: name, log: o.Logger, now: o.Now, min: o.MinBackoff, max: o.MaxBackoff, items: map[string]*item{},
		m: metrics{panics: panics.WithLabelValues(name), failures: failures.WithLabelValues(name), backedOff: backedOff.WithLabelValues(name)}}
	opt.Logger(&g.log)
	g.log = g.log.With("loop", name)
	opt.Clock(&g.now)
	if g.min <= 0 {
		g.min = MinBackoff
	}
	if g.max < g.min {
		g.max = max(MaxBackoff, g.min)
	}
	return g, nil
}

// Nop is a Guard that counts nowhere and logs nowhere: a loop built
// without one (a test's) still recovers and backs off.
func Nop(name string) *Guard {
	g, _ := New(name, Options{}) // nothing is registered: no error
	return g
}

// Do runs fn for the item id unless id is backed off (then ran is false
// and fn is not called). A panic in fn is recovered and returned as a
// *PanicError. A failure (error or panic) is logged with id, counted and
// backs id off; a success clears its backoff. ctx's end is not a failure.
func (g *Guard) Do(ctx context.Context, id string, fn func(context.Context) error) (ran bool, err error) {
	now := g.now()
	g.mu.Lock()
	it := g.items[id]
	if it != nil && now.Before(it.until) {
		g.mu.Unlock()
		return false, nil
	}
	g.mu.Unlock()
	err = g.run(ctx, fn)
	if err != nil && ctx.Err() != nil {
		return true, err // shutting down: not the item's fault
	}
	g.settle(id, now, err)
	return true, err
}

// Run is Do for an item that is not retried by id (a periodic chore): a
// panic is recovered, and a failure logged and counted.
func (g *Guard) Run(ctx context.Context, what string, fn func(context.Context) error) error {
	err := g.run(ctx, fn)
	if err != nil && ctx.Err() == nil {
		g.count(err)
		g.log.Error("loop item failed", "item", what, "err", err)
	}
	return err
}

// Recover runs fn for the item what and turns a panic into a
// *PanicError, logged and counted; fn's own errors pass through
// uncounted, for a loop that retries its failures its own way (flushd
// backs off a failed flush and keeps its offsets).
func (g *Guard) Recover(what string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
			g.m.failures.Inc()
			g.m.panics.Inc()
			g.panics.Add(1)
			g.log.Error("loop item panicked; recovered", "item", what, "err", err, "stack", string(err.(*PanicError).Stack))
		}
	}()
	return fn()
}

func (g *Guard) run(ctx context.Context, fn func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return fn(ctx)
}

func (g *Guard) count(err error) {
	g.m.failures.Inc()
	if pe, ok := err.(*PanicError); ok {
		g.m.panics.Inc()
		g.panics.Add(1)
		g.log.Error("loop item panicked; recovered", "err", err, "stack", string(pe.Stack))
	}
}

// settle records the outcome of id's run started at now.
func (g *Guard) settle(id string, now time.Time, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	it := g.items[id]
	if err == nil {
		if it != nil {
			delete(g.items, id)
			g.m.backedOff.Set(float64(len(g.items)))
		}
		return
	}
	if it == nil {
		it = &item{}
		g.items[id] = it
	}
	it.fails++
	wait := g.min << min(it.fails-1, 30)
	if wait <= 0 || wait > g.max {
		wait = g.max
	}
	it.until = now.Add(wait)
	g.prune(now)
	g.m.backedOff.Set(float64(len(g.items)))
	g.count(err)
	g.log.Error("loop item failed; backed off", "item", id, "failures", it.fails, "retry_in", wait, "err", err)
}

// prune forgets items whose backoff ended long ago (an item that went
// away, a cancelled notice, never succeeds to be cleared).
func (g *Guard) prune(now time.Time) {
	for id, it := range g.items {
		if now.Sub(it.until) > 2*g.max {
			delete(g.items, id)
		}
	}
}

// Panics returns how many of the loop's items panicked (and were
// recovered) since g was made.
func (g *Guard) Panics() int64 { return g.panics.Load() }

// BackedOff reports whether id waits out a backoff now.
func (g *Guard) BackedOff(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	it := g.items[id]
	return it != nil && g.now().Before(it.until)
}
