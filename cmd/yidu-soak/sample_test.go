package main

import (
	"os"
	"strings"
	"testing"
	"time"
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
		{"unclosed labels skipped", "x{a=\"1\" 2\ny 1\n", map[string]float64{"y": 1}},
		{"garbage value skipped", "x abc\ny NaN\n", map[string]float64{}},
		{"blank lines and tabs", "\n\tz\t5\n", map[string]float64{"z": 5}},
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

// FuzzParseMetrics: whatever /metrics answers, the parser returns.
func FuzzParseMetrics(f *testing.F) {
	f.Add("go_goroutines 42\n")
	f.Add("x{a=\"}\"} 1\n")
	f.Add("x{a=\"\\")
	f.Add("{} 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, _ := parseMetrics(strings.NewReader(in))
		for k := range m {
			if k == "" {
				t.Errorf("parseMetrics(%q) has an empty name", in)
			}
		}
	})
}

func TestProcStatusKB(t *testing.T) {
	kb, err := procStatusKB(os.Getpid(), "VmRSS")
	if err != nil || kb <= 0 {
		t.Errorf("procStatusKB(self, VmRSS) = %d, %v; want > 0", kb, err)
	}
	if _, err := procStatusKB(os.Getpid(), "VmNoSuch"); err == nil {
		t.Error("procStatusKB(self, VmNoSuch) = nil error")
	}
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
