package main

import (
	"fmt"
	"io"
	"time"
)

// Thresholds of the verdict.
const (
	// memoryGrowth bounds the last third's peak memory against the first
	// third's (after the warm-up): more is a leak, not noise.
	memoryGrowth = 1.20
	// memorySlackMB is the least growth allowed: a process of a few tens
	// of MB moves by a few MB between two GC cycles.
	memorySlackMB = 8
	// goroutineGrowth and goroutineSlack bound the last sample's
	// goroutines against the warm-up level: the larger of +10 % and +50.
	goroutineGrowth = 0.10
	goroutineSlack  = 50
	// lagSlack is added to the flush interval for the lag bound:
	// N = rate × (flush interval + lagSlack).
	lagSlack = 5 * time.Second
)

// Report is one soak run.
type Report struct {
	When          time.Time     `json:"when"`
	GoVersion     string        `json:"go_version"`
	GOMAXPROCS    int           `json:"gomaxprocs"`
	Rate          float64       `json:"rate"`
	MaxRate       float64       `json:"max_rate"`
	Duration      time.Duration `json:"duration"`
	FlushInterval time.Duration `json:"flush_interval"`
	Messages      int           `json:"messages"`
	Recipients    int           `json:"recipients"`
	Callbacks     int           `json:"callbacks"`
	Conns         int           `json:"conns"`
	Warmup        time.Duration `json:"warmup"`
	LoadAvgStart  [3]float64    `json:"loadavg_start"`
	LoadAvgEnd    [3]float64    `json:"loadavg_end"`
	// Database and RedisPrefix are what the run created (and removed).
	Database    string `json:"database"`
	RedisPrefix string `json:"redis_prefix"`

	Push pushTotals `json:"push"`
	// Drained: MySQL held exactly the reads answered 200, DrainAfter the
	// last callback. MySQLFinal is its last count.
	Drained    bool          `json:"drained"`
	DrainAfter time.Duration `json:"drain_after"`
	MySQLFinal int64         `json:"mysql_final"`
	// DashboardRead is the notices' read counts summed (Redis).
	DashboardRead int64  `json:"dashboard_read"`
	DashboardErr  string `json:"dashboard_err,omitempty"`
	// RowsChecked rows with is_read = 1: Unexpected ones were never sent,
	// BadReadTime ones hold another time than their CreateTime, BadSource
	// ones a source other than the card button.
	RowsChecked, Unexpected, BadReadTime, BadSource int64
	// ExitCode of yidu after SIGTERM (-1: killed after 30 s), StopTook.
	ExitCode int           `json:"exit_code"`
	StopTook time.Duration `json:"stop_took"`

	Samples []Sample `json:"samples"`
	Checks  []Check  `json:"checks"`
}

// Check is one line of the verdict.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Detail string `json:"detail"`
}

// Passed reports whether every check passed (and there were checks).
func (r *Report) Passed() bool {
	if len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// LagBound is N = rate × (flush interval + 5 s): flushd may hold one
// interval of reads plus the time one flush takes.
func (r *Report) LagBound() int64 {
	return int64(r.Rate * (r.FlushInterval + lagSlack).Seconds())
}

// evaluate fills r.Checks from the samples and the end state.
func (r *Report) evaluate() {
	r.Checks = nil
	add := func(name string, pass bool, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, Pass: pass, Detail: fmt.Sprintf(format, args...)})
	}
	var load, warm, post []Sample
	bad := 0
	for _, s := range r.Samples {
		if s.Err != "" {
			bad++
		}
		if s.Draining {
			continue
		}
		load = append(load, s)
		if s.At <= r.Warmup {
			warm = append(warm, s)
		} else {
			post = append(post, s)
		}
	}
	add("every sample read", bad == 0 && len(load) > 0, "%d samples during the load, %d with a read error", len(load), bad)

	// Memory: the peak of the last third after the warm-up against the
	// peak of the first third.
	if len(post) < 3 {
		add("memory flat (RSS)", false, "%d samples after the %s warm-up; need 3", len(post), r.Warmup)
		add("memory flat (heap in use)", false, "%d samples after the warm-up; need 3", len(post))
	} else {
		third := len(post) / 3
		first, last := post[:third], post[len(post)-third:]
		for _, m := range []struct {
			name string
			f    func(Sample) float64
		}{
			{"memory flat (RSS)", func(s Sample) float64 { return s.RSSMB }},
			{"memory flat (heap in use)", func(s Sample) float64 { return s.HeapMB }},
		} {
			a, b := peak(first, m.f), peak(last, m.f)
			bound := max(a*memoryGrowth, a+memorySlackMB)
			add(m.name, b <= bound && a > 0, "last third's peak %.1f MB ≤ %.1f MB (first third's peak %.1f MB + max(%.0f%%, %d MB)): %+.1f%%",
				b, bound, a, (memoryGrowth-1)*100, memorySlackMB, (b/a-1)*100)
		}
	}

	// Goroutines: the last sample of the load against the level reached
	// by the end of the first third after the warm-up. Most of yidu's
	// goroutines serve the Pusher's keep-alive connections, whose number
	// settles only after the first latency spikes have opened them.
	if len(load) == 0 {
		add("goroutines flat", false, "no samples")
	} else {
		ref := append(append([]Sample(nil), warm...), post[:len(post)/3]...)
		if len(ref) == 0 {
			ref = load[:1]
		}
		g := func(s Sample) float64 { return float64(s.Goroutines) }
		level := int64(peak(ref, g))
		bound := level + max(int64(float64(level)*goroutineGrowth), goroutineSlack)
		lastG := load[len(load)-1].Goroutines
		maxLast := int64(peak(load[len(load)-len(load)/3-1:], g))
		add("goroutines flat", lastG <= bound && lastG > 0, "last sample %d ≤ %d (level %d by the end of the first third + max(10%%, %d)); peak of the last third %d",
			lastG, bound, level, goroutineSlack, maxLast)
	}

	// Lag: flushd's two gauges at every sample. Pending holds at most one
	// interval of reads (flushd stops fetching while it writes); the
	// consumer lag grows while a flush runs. Both stay below N while
	// flushd writes an interval's reads in less than the interval + 5 s.
	// How far MySQL trails the 200s is their sum plus the statement in
	// flight: reported, not judged (it is what HR sees in MySQL-based
	// reports; the dashboard reads Redis).
	n := r.LagBound()
	var maxLag, maxPending, maxGap int64
	var gapAt time.Duration
	for _, s := range r.Samples {
		maxLag, maxPending = max(maxLag, s.Lag), max(maxPending, s.Pending)
		if s.OK-s.MySQL > maxGap {
			maxGap, gapAt = s.OK-s.MySQL, s.At
		}
	}
	add("lag bounded", maxLag < n && maxPending < n,
		"max consumer lag %d, max pending %d < N = %.0f/s × (%s + %s) = %d; MySQL trailed the 200s by at most %d reads (%.1f s of load, at t=%s)",
		maxLag, maxPending, r.Rate, r.FlushInterval, lagSlack, n, maxGap, float64(maxGap)/r.Rate, gapAt)

	lost := max(0, r.Push.OK-r.MySQLFinal)
	exact := r.Drained && r.MySQLFinal == r.Push.OK && r.DashboardRead == r.Push.OK &&
		r.Unexpected == 0 && r.BadReadTime == 0 && r.BadSource == 0 && r.RowsChecked == r.Push.OK
	drain := "never"
	if r.Drained {
		drain = r.DrainAfter.Round(100 * time.Millisecond).String()
	}
	add("zero lost", exact, "%d answered 200; MySQL %d (lost %d, exact %s after the last callback), dashboard %d%s; rows checked %d: never sent %d, read_time ≠ CreateTime %d, source ≠ 1 %d",
		r.Push.OK, r.MySQLFinal, lost, drain, r.DashboardRead, errNote(r.DashboardErr), r.RowsChecked, r.Unexpected, r.BadReadTime, r.BadSource)
	add("every callback delivered", r.Push.Failures == 0 && r.Push.Callbacks == int64(r.Callbacks),
		"%d of %d callbacks sent, %d given up after 3 tries, %d retries", r.Push.Callbacks, r.Callbacks, r.Push.Failures, r.Push.Retries)
	add("SIGTERM exit 0", r.ExitCode == 0 && r.StopTook > 0 && r.StopTook <= stopWait,
		"exit %d after %s (bound %s)", r.ExitCode, r.StopTook.Round(time.Millisecond), stopWait)
}

func errNote(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

func peak(ss []Sample, f func(Sample) float64) float64 {
	var m float64
	for _, s := range ss {
		m = max(m, f(s))
	}
	return m
}

// WriteMarkdown prints the run, the samples and the verdict.
func (r *Report) WriteMarkdown(w io.Writer) {
	achieved := 0.0
	if r.Push.Elapsed > 0 {
		achieved = float64(r.Push.OK) / r.Push.Elapsed.Seconds()
	}
	fmt.Fprintf(w, "\nyidu-soak %s: %.0f callbacks/s (%.0f%% of %.0f/s) for %s, %d notices × %d recipients (%d callbacks, each a first read), flush interval %s, ≤ %d in flight, %s GOMAXPROCS=%d\n",
		r.When.Format("2006-01-02 15:04 MST"), r.Rate, r.Rate/max(r.MaxRate, 1)*100, r.MaxRate, r.Duration, r.Messages, r.Recipients,
		r.Callbacks, r.FlushInterval, r.Conns, r.GoVersion, r.GOMAXPROCS)
	fmt.Fprintf(w, "load average at start %.2f %.2f %.2f, at end %.2f %.2f %.2f\n\n",
		r.LoadAvgStart[0], r.LoadAvgStart[1], r.LoadAvgStart[2], r.LoadAvgEnd[0], r.LoadAvgEnd[1], r.LoadAvgEnd[2])
	fmt.Fprintln(w, "| t | RSS MB | RSS (metric) MB | heap in use MB | goroutines | consumer lag | pending | accepted/s | p99 ms | non-200 | 200s | MySQL is_read | 200s − MySQL |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range r.Samples {
		t := s.At.String()
		if s.Draining {
			t += " (drain)"
		}
		if s.Err != "" {
			t += " ⚠ " + s.Err
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %.1f | %d | %d | %d | %.0f | %.1f | %d | %d | %d | %d |\n",
			t, s.RSSMB, s.ProcRSSMB, s.HeapMB, s.Goroutines, s.Lag, s.Pending, s.AcceptedPerS, s.P99ms, s.NonOK, s.OK, s.MySQL, s.OK-s.MySQL)
	}
	fmt.Fprintf(w, "\nsent %d callbacks in %s (%.0f accepted/s), %d attempts, %d retries, %d given up\n\n",
		r.Push.Callbacks, r.Push.Elapsed.Round(time.Millisecond), achieved, r.Push.Attempts, r.Push.Retries, r.Push.Failures)
	verdict := "PASS"
	if !r.Passed() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "Verdict: **%s**\n\n", verdict)
	for _, c := range r.Checks {
		mark := "pass"
		if !c.Pass {
			mark = "**FAIL**"
		}
		fmt.Fprintf(w, "- %s: %s — %s\n", c.Name, mark, c.Detail)
	}
	fmt.Fprintln(w)
}
