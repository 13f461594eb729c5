package main

import (
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestParseMetrics(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]float64
	}{
		{"plain", "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 42\n", map[string]float64{"go_goroutines": 42}},
		{"series summed", "yidu_flushd_consumer_lag{partition=\"0\"} 3\nyidu_flushd_consumer_lag{partition=\"1\"} 4\n",
			map[string]float64{"yidu_flushd_consumer_lag": 7}},
		{"exponent and timestamp", "process_resident_memory_bytes 3.3554432e+07 1700000000000\n",
			map[string]float64{"process_resident_memory_bytes": 33554432}},
		{"quoted brace and space in a label", "x{a=\"} y\",b=\"\\\"q\"} 2\n", map[string]float64{"x": 2}},
		{"NaN left out", "y NaN\nz 1\n", map[string]float64{"z": 1}},
		{"blank lines and tabs", "\n\tz\t5\n", map[string]float64{"z": 5}},
		{"counter", "# TYPE yidu_callback_requests_total counter\nyidu_callback_requests_total{outcome=\"ok\"} 9\n",
			map[string]float64{"yidu_callback_requests_total": 9}},
		{"summary gives sum and count", "# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds{quantile=\"0.5\"} NaN\n" +
			"go_gc_duration_seconds_sum 0.25\ngo_gc_duration_seconds_count 5\n",
			map[string]float64{"go_gc_duration_seconds_sum": 0.25, "go_gc_duration_seconds_count": 5}},
		{"histogram gives sum and count", "# TYPE yidu_bitmap_publish_seconds histogram\n" +
			"yidu_bitmap_publish_seconds_bucket{le=\"0.1\"} 3\nyidu_bitmap_publish_seconds_bucket{le=\"+Inf\"} 4\n" +
			"yidu_bitmap_publish_seconds_sum 0.5\nyidu_bitmap_publish_seconds_count 4\n",
			map[string]float64{"yidu_bitmap_publish_seconds_sum": 0.5, "yidu_bitmap_publish_seconds_count": 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMetrics(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("parseMetrics: %v", err)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("parseMetrics(%q)[%s] = %v; want %v", tt.in, k, got[k], v)
				}
			}
			for k := range got {
				if _, ok := tt.want[k]; !ok {
					t.Errorf("parseMetrics(%q) has %s; want only %v", tt.in, k, tt.want)
				}
			}
		})
	}
}

// TestParseMetricsRefuses: what is not the text format is an error (the
// sample records it), never a guess.
func TestParseMetricsRefuses(t *testing.T) {
	for _, in := range []string{"x{a=\"1\" 2\n", "x abc\n", "{} 1\n"} {
		if m, err := parseMetrics(strings.NewReader(in)); err == nil {
			t.Errorf("parseMetrics(%q) = %v, nil; want an error", in, m)
		}
	}
}

// FuzzParseMetrics: whatever /metrics answers, the parser returns, and
// what it accepts agrees with expfmt's encoder: the families expfmt reads
// from the input, written back out by expfmt.MetricFamilyToText (the text
// a Prometheus client serves), parse to the same values.
func FuzzParseMetrics(f *testing.F) {
	f.Add("go_goroutines 42\n")
	f.Add("x{a=\"}\"} 1\n")
	f.Add("x{a=\"\\")
	f.Add("{} 1\n")
	f.Add("# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_sum 4.5\nh_count 3\n# TYPE s summary\ns{quantile=\"0.5\"} 1\ns_sum 2\ns_count 1\n")
	f.Add("# TYPE c counter\nc{a=\"1\"} 1e300\nc{a=\"2\"} NaN\nc{a=\"3\"} -0.25 1700000000000\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := parseMetrics(strings.NewReader(in))
		if err != nil {
			return
		}
		ref := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := ref.TextToMetricFamilies(strings.NewReader(in))
		if err != nil {
			t.Fatalf("expfmt refuses %q that parseMetrics accepted: %v", in, err)
		}
		var out strings.Builder
		for _, name := range slices.Sorted(maps.Keys(mfs)) {
			if _, err := expfmt.MetricFamilyToText(&out, mfs[name]); err != nil {
				return // a family expfmt cannot write back (e.g. no metrics): nothing to compare
			}
		}
		back, err := parseMetrics(strings.NewReader(out.String()))
		if err != nil {
			t.Fatalf("parseMetrics of expfmt's own text %q: %v (input %q)", out.String(), err, in)
		}
		if !maps.EqualFunc(m, back, func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }) {
			t.Fatalf("parseMetrics(%q) = %v; of expfmt's re-encoding %q = %v", in, m, out.String(), back)
		}
		for k := range m {
			if k == "" {
				t.Errorf("parseMetrics(%q) has an empty name", in)
			}
		}
	})
}

func TestRecorderWindow(t *testing.T) {
	r := &recorder{}
	for i := 1; i <= 100; i++ {
		r.lat = append(r.lat, time.Duration(i)*time.Millisecond)
	}
	r.ok, r.bad, r.okTotal = 98, 2, 500
	ok, bad, p99, total := r.window()
	if ok != 98 || bad != 2 || p99 != 99*time.Millisecond || total != 500 {
		t.Errorf("window() = %d, %d, %v, %d; want 98, 2, 99ms, 500", ok, bad, p99, total)
	}
	ok, bad, p99, total = r.window()
	if ok != 0 || bad != 0 || p99 != 0 || total != 500 {
		t.Errorf("second window() = %d, %d, %v, %d; want 0, 0, 0, 500", ok, bad, p99, total)
	}
}
