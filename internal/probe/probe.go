// Package probe serves the endpoints every yidu role answers for its
// orchestrator: /healthz (the process is alive), /readyz (its
// dependencies answer) and /metrics. One implementation for the receiver,
// the dashboard and flushd; cmd mounts it in front of each role's routes.
package probe

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu/internal/opt"
)

// Check reports whether one dependency answers; it must honour ctx.
type Check func(ctx context.Context) error

// DefaultTimeout bounds each readiness check.
const DefaultTimeout = 2 * time.Second

// Options configure the probes.
type Options struct {
	// Ready are the readiness checks by name (mysql, redis, kafka). They
	// run in parallel, each bounded by Timeout; /readyz is 200 only when
	// every one returns nil.
	Ready map[string]Check
	// Degraded are checks that do not make /readyz fail: a failing one is
	// named in the 200's body ("ready, degraded: redis"), so an operator
	// sees which dependency is missing while the role still does its job
	// (the receiver without Redis or MySQL).
	Degraded map[string]Check
	// Timeout bounds each check (default DefaultTimeout).
	Timeout time.Duration
	// Alive, when set, makes /healthz 503 with its error's text once it
	// returns one (flushd's loop has stopped).
	Alive func() error
	// Gatherer is served at /metrics; nil serves none.
	Gatherer prometheus.Gatherer
	// Logger receives failed checks, at most one line per check every
	// ten seconds; nil discards.
	Logger *slog.Logger
	// Status, when set, gets each check's last result at every /readyz
	// (label check; 1 passed, 0 failed), so alerts see readiness without
	// the orchestrator's own metrics.
	Status *prometheus.GaugeVec
}

// NewStatus returns the yidu_ready gauge for Options.Status, registered on
// reg (nil: nowhere).
func NewStatus(reg prometheus.Registerer) (*prometheus.GaugeVec, error) {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "yidu_ready",
		Help: "Result of each readiness check at the last /readyz: 1 passed, 0 failed.",
	}, []string{"check"})
	if reg != nil {
		if err := reg.Register(g); err != nil {
			return nil, fmt.Errorf("probe: register metrics: %w", err)
		}
	}
	return g, nil
}

// Wrap returns a handler serving the probes and h for everything else.
func Wrap(h http.Handler, o Options) http.Handler {
	r := chi.NewRouter()
	Mount(r, o)
	r.Mount("/", h)
	return r
}

// Mount adds /healthz, /readyz and (with a Gatherer) /metrics to r.
func Mount(r chi.Router, o Options) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	opt.Logger(&o.Logger)
	p := &prober{o: o, warn: map[string]*rate.Sometimes{}}
	for name := range o.Ready {
		p.warn[name] = &rate.Sometimes{Interval: 10 * time.Second}
	}
	for name := range o.Degraded {
		p.warn[name] = &rate.Sometimes{Interval: 10 * time.Second}
	}
	r.Get("/healthz", p.handleHealth)
	r.Get("/readyz", p.handleReady)
	if o.Gatherer != nil {
		r.Handle("/metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}))
	}
}

type prober struct {
	o    Options
	warn map[string]*rate.Sometimes // read-only after Mount
}

func (p *prober) handleHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if p.o.Alive != nil {
		if err := p.o.Alive(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "not alive: %v\n", err)
			return
		}
	}
	_, _ = w.Write([]byte("ok\n"))
}

// handleReady answers 200 when every check passes, else 503 naming the
// failing checks (not their errors, which may carry addresses).
func (p *prober) handleReady(w http.ResponseWriter, r *http.Request) {
	failed := p.failing(r.Context(), p.o.Ready)
	var degraded []string
	if len(p.o.Degraded) > 0 {
		degraded = p.failing(r.Context(), p.o.Degraded)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "not ready: %s\n", strings.Join(append(failed, degraded...), ", "))
		return
	}
	if len(degraded) > 0 {
		fmt.Fprintf(w, "ready, degraded: %s\n", strings.Join(degraded, ", "))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// failing runs every one of checks in parallel and returns the names of those
// that failed, sorted; a check that outlives its timeout is named with
// "(timeout)" even if it ignores ctx.
func (p *prober) failing(ctx context.Context, checks map[string]Check) []string {
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(checks)) // buffered: a late check never blocks
	for name, check := range checks {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
			defer cancel()
			results <- result{name, check(cctx)}
		}()
	}
	deadline := time.NewTimer(p.o.Timeout + 100*time.Millisecond)
	defer deadline.Stop()
	pending := len(checks)
	answered := make(map[string]bool, pending)
	var failed []string
	for pending > 0 {
		select {
		case res := <-results:
			pending--
			answered[res.name] = true
			if res.err != nil {
				failed = append(failed, res.name)
				p.warn[res.name].Do(func() {
					p.o.Logger.Warn("readiness check failed", "check", res.name, "err", res.err)
				})
			}
		case <-deadline.C:
			for name := range checks {
				if !answered[name] {
					failed = append(failed, name+" (timeout)")
				}
			}
			pending = 0
		}
	}
	slices.Sort(failed)
	if g := p.o.Status; g != nil {
		for name := range checks {
			v := 1.0
			if slices.Contains(failed, name) || slices.Contains(failed, name+" (timeout)") {
				v = 0
			}
			g.WithLabelValues(name).Set(v)
		}
	}
	return failed
}
