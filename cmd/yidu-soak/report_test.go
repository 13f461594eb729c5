package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// steady returns n load samples 10 s apart with the given memory and
// goroutines, the whole run answered and written.
func steady(n int, rss, heap float64, goroutines int64) []Sample {
	ss := make([]Sample, n)
	for i := range ss {
		ss[i] = Sample{At: time.Duration(i+1) * 10 * time.Second, RSSMB: rss, ProcRSSMB: rss, HeapMB: heap,
			Goroutines: goroutines, Lag: 10, Pending: 1000, OK: int64(i+1) * 1000, MySQL: int64(i) * 1000}
	}
	return ss
}

// passing is a report every check passes.
func passing() *Report {
	return &Report{
		Rate: 1000, FlushInterval: time.Second, Warmup: 30 * time.Second, Callbacks: 20_000,
		Push:    pushTotals{Callbacks: 20_000, Attempts: 20_000, OK: 20_000, Elapsed: 20 * time.Second},
		Drained: true, DrainAfter: time.Second, MySQLFinal: 20_000, DashboardRead: 20_000, RowsChecked: 20_000,
		ExitCode: 0, StopTook: 2 * time.Second,
		Samples: steady(20, 100, 40, 200),
	}
}

// ramp returns a change that sets field of sample i to from + i*step.
func ramp[T int64 | float64](field func(*Sample) *T, from, step T) func(*Report) {
	return func(r *Report) {
		for i := range r.Samples {
			*field(&r.Samples[i]) = from + T(i)*step
		}
	}
}

// The sample fields ramp sets.
var (
	rss        = func(s *Sample) *float64 { return &s.RSSMB }
	heap       = func(s *Sample) *float64 { return &s.HeapMB }
	goroutines = func(s *Sample) *int64 { return &s.Goroutines }
)

func failed(r *Report) []string {
	var names []string
	for _, c := range r.Checks {
		if !c.Pass {
			names = append(names, c.Name)
		}
	}
	return names
}

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name   string
		change func(r *Report)
		fail   []string // the checks that must fail, in order
	}{
		{"steady run", func(*Report) {}, nil},
		{"RSS grows 50%", ramp(rss, 100, 5), []string{"memory flat (RSS)"}},
		{"RSS grows 15%", ramp(rss, 100, 0.8), nil},
		{"small heap moves 5 MB (below the slack)", func(r *Report) {
			for i := range r.Samples {
				r.Samples[i].HeapMB = 6 + float64(i%2)*5
			}
		}, nil},
		{"heap doubles", ramp(heap, 40, 4), []string{"memory flat (heap in use)"}},
		{"warm-up peak is left out", func(r *Report) {
			r.Samples[0].RSSMB, r.Samples[1].RSSMB = 400, 300 // before 30 s
		}, nil},
		{"goroutine leak", ramp(goroutines, 200, 10), []string{"goroutines flat"}},
		{"goroutines ramp up in the first third after the warm-up", func(r *Report) {
			for i := 3; i < 9; i++ {
				r.Samples[i].Goroutines = 200 + int64(i-2)*20 // up to 320
			}
			for i := 9; i < len(r.Samples); i++ {
				r.Samples[i].Goroutines = 330
			}
		}, nil},
		{"goroutines +40 at 200 (within +50)", func(r *Report) {
			r.Samples[len(r.Samples)-1].Goroutines = 240
		}, nil},
		{"goroutines at the end of the drain do not count", func(r *Report) {
			r.Samples = append(r.Samples, Sample{At: 210 * time.Second, Draining: true, RSSMB: 100, HeapMB: 40, Goroutines: 900})
		}, nil},
		{"consumer lag over N", func(r *Report) { r.Samples[7].Lag = 6000 }, []string{"lag bounded"}},
		{"pending over N", func(r *Report) { r.Samples[7].Pending = 6000 }, []string{"lag bounded"}},
		{"MySQL trailing is reported only", func(r *Report) { r.Samples[7].MySQL = 0 }, nil},
		{"a read lost", func(r *Report) { r.MySQLFinal, r.RowsChecked, r.Drained = 19_999, 19_999, false }, []string{"zero lost"}},
		{"a wrong read_time", func(r *Report) { r.BadReadTime = 1 }, []string{"zero lost"}},
		{"a read never sent", func(r *Report) { r.Unexpected = 1 }, []string{"zero lost"}},
		{"dashboard short", func(r *Report) { r.DashboardRead = 19_000 }, []string{"zero lost"}},
		{"WeCom gave up once", func(r *Report) { r.Push.Failures = 1 }, []string{"every callback delivered"}},
		{"SIGTERM exit 1", func(r *Report) { r.ExitCode = 1 }, []string{"SIGTERM exit 0"}},
		{"killed after 30 s", func(r *Report) { r.ExitCode, r.StopTook = -1, 30*time.Second }, []string{"SIGTERM exit 0"}},
		{"never stopped", func(r *Report) { r.StopTook = 0 }, []string{"SIGTERM exit 0"}},
		{"a sample unread", func(r *Report) { r.Samples[3].Err = "metrics: refused" }, []string{"every sample read"}},
		{"too few samples", func(r *Report) { r.Samples = r.Samples[:4] }, []string{"memory flat (RSS)", "memory flat (heap in use)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := passing()
			tt.change(r)
			r.evaluate()
			got := failed(r)
			if strings.Join(got, ",") != strings.Join(tt.fail, ",") {
				var b bytes.Buffer
				r.WriteMarkdown(&b)
				t.Errorf("failed checks %q; want %q\n%s", got, tt.fail, b.String())
			}
			if r.Passed() != (len(tt.fail) == 0) {
				t.Errorf("Passed() = %v with failed checks %q", r.Passed(), got)
			}
		})
	}
}

func TestPassedNeedsChecks(t *testing.T) {
	if (&Report{}).Passed() {
		t.Error("a report without checks passed")
	}
}

func TestWriteMarkdown(t *testing.T) {
	r := passing()
	r.Samples[2].Err = "mysql: timeout"
	r.Samples = append(r.Samples, Sample{At: 205 * time.Second, Draining: true})
	r.evaluate()
	var b bytes.Buffer
	r.WriteMarkdown(&b)
	out := b.String()
	for _, want := range []string{
		"| 10s | 100.0 | 100.0 | 40.0 | 200 | 10 | 1000 |",
		"| 30s ⚠ mysql: timeout |",
		"| 3m25s (drain) |",
		"Verdict: **FAIL**",
		"- every sample read: **FAIL**",
		"- zero lost: pass",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
}
