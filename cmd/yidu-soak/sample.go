package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/rig"
)

// Sample is what the soak saw of yidu at one moment.
type Sample struct {
	// At is the time since the first callback was due.
	At time.Duration `json:"at"`
	// Draining: the last callback was sent, MySQL is catching up.
	Draining bool `json:"draining,omitempty"`
	// RSSMB is VmRSS of the yidu process (/proc/<pid>/status); ProcRSSMB
	// and HeapMB are its own process_resident_memory_bytes and
	// go_memstats_heap_inuse_bytes (/metrics).
	RSSMB, ProcRSSMB, HeapMB float64
	Goroutines               int64
	// Lag is yidu_flushd_consumer_lag summed over partitions; Pending is
	// yidu_flushd_pending_uids.
	Lag, Pending int64
	// AcceptedPerS is callbacks answered 200 per second over the window,
	// P99ms the p99 latency of its attempts, NonOK its other answers and
	// transport errors.
	AcceptedPerS, P99ms float64
	NonOK               int
	// OK is the callbacks answered 200 since the start, MySQL the rows
	// with is_read = 1 (every callback is a first read: the two meet once
	// flushd has caught up).
	OK, MySQL int64
	// Err says what could not be read (the fields stay 0).
	Err string `json:"err,omitempty"`
}

// sampler takes a Sample every period until stopped.
type sampler struct {
	s      *soak
	rec    *recorder
	start  time.Time
	client *http.Client

	takeMu sync.Mutex // one take at a time: windows and rows in order

	mu       sync.Mutex
	samples  []Sample
	draining bool
	last     time.Time
}

func (sp *sampler) run(ctx context.Context, period time.Duration) {
	loop.Every(ctx, period, sp.take)
}

func (sp *sampler) setDraining() {
	sp.mu.Lock()
	sp.draining = true
	sp.mu.Unlock()
}

func (sp *sampler) take(ctx context.Context) {
	sp.takeMu.Lock()
	defer sp.takeMu.Unlock()
	now := time.Now()
	sp.mu.Lock()
	prev, draining := sp.last, sp.draining
	sp.last = now
	sp.mu.Unlock()
	ok, bad, p99, okTotal := sp.rec.window()
	smp := Sample{At: now.Sub(sp.start).Round(time.Second), Draining: draining, NonOK: bad, OK: okTotal,
		P99ms: float64(p99.Microseconds()) / 1000}
	if secs := now.Sub(prev).Seconds(); secs > 0 {
		smp.AcceptedPerS = float64(ok) / secs
	}
	var errs []string
	if kb, err := rig.StatusKB(sp.s.yidu.Pid(), "VmRSS"); err == nil {
		smp.RSSMB = float64(kb) / 1024
	} else {
		errs = append(errs, err.Error())
	}
	if m, err := scrape(ctx, sp.client, "http://"+sp.s.receiver+"/metrics"); err == nil {
		smp.ProcRSSMB = m["process_resident_memory_bytes"] / (1 << 20)
		smp.HeapMB = m["go_memstats_heap_inuse_bytes"] / (1 << 20)
		smp.Goroutines = int64(m["go_goroutines"])
		smp.Lag = int64(m["yidu_flushd_consumer_lag"])
		smp.Pending = int64(m["yidu_flushd_pending_uids"])
	} else {
		errs = append(errs, err.Error())
	}
	if n, err := sp.s.mysqlReads(ctx); err == nil {
		smp.MySQL = n
	} else {
		errs = append(errs, err.Error())
	}
	smp.Err = strings.Join(errs, "; ")
	sp.mu.Lock()
	sp.samples = append(sp.samples, smp)
	sp.mu.Unlock()
	sp.s.logf("t=%s rss %.0f MB heap %.0f MB goroutines %d lag %d pending %d accepted %.0f/s p99 %.1f ms 200s %d mysql %d%s",
		smp.At, smp.RSSMB, smp.HeapMB, smp.Goroutines, smp.Lag, smp.Pending, smp.AcceptedPerS, smp.P99ms, smp.OK, smp.MySQL,
		map[bool]string{true: " err: " + smp.Err, false: ""}[smp.Err != ""])
}

func (sp *sampler) all() []Sample {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return append([]Sample(nil), sp.samples...)
}

// mysqlReads counts the soak's rows with is_read = 1 (the mrr_read index
// answers it per notice).
func (s *soak) mysqlReads(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []any{app.CorpID}
	for _, m := range s.sched.msgs {
		args = append(args, m)
	}
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid IN (?"+
		strings.Repeat(", ?", len(s.sched.msgs)-1)+") AND is_read = 1", args...).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("mysql: %w", err)
	}
	return n, nil
}

// scrape fetches a Prometheus text exposition and sums each metric's
// series (parseMetrics).
func scrape(ctx context.Context, c *http.Client, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	return parseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// parseMetrics reads the Prometheus text format and returns, per sample
// name, the sum of its series' values: a gauge per partition becomes
// their total; a summary or histogram gives <name>_sum and <name>_count.
// NaN is left out: a summary's empty quantile would poison the sum.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	out := map[string]float64{}
	add := func(name string, v float64) {
		if !math.IsNaN(v) {
			out[name] += v
		}
	}
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.Gauge != nil:
				add(name, m.GetGauge().GetValue())
			case m.Counter != nil:
				add(name, m.GetCounter().GetValue())
			case m.Untyped != nil:
				add(name, m.GetUntyped().GetValue())
			case m.Summary != nil:
				add(name+"_sum", m.GetSummary().GetSampleSum())
				add(name+"_count", float64(m.GetSummary().GetSampleCount()))
			case m.Histogram != nil:
				add(name+"_sum", m.GetHistogram().GetSampleSum())
				add(name+"_count", float64(m.GetHistogram().GetSampleCount()))
			}
		}
	}
	return out, nil
}
