package metric

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestFactory(t *testing.T) {
	tests := []struct {
		name    string
		reg     *prometheus.Registry
		twice   bool
		wantErr bool
		wantN   int // series gathered from reg
	}{
		{name: "registers", reg: prometheus.NewRegistry(), wantN: 1},
		{name: "nil registerer registers nothing", reg: nil},
		{name: "duplicate name is an error, not a panic", reg: prometheus.NewRegistry(), twice: true, wantErr: true, wantN: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f *Factory
			if tt.reg == nil {
				f = New(nil)
			} else {
				f = New(tt.reg)
			}
			c := f.Counter("yidu_test_total", "help")
			c.Inc()
			if tt.twice {
				f.Counter("yidu_test_total", "help")
			}
			if got := testutil.ToFloat64(c); got != 1 {
				t.Errorf("counter = %v; want 1", got)
			}
			err := f.Err("test")
			if (err != nil) != tt.wantErr {
				t.Fatalf("Err() = %v; want error %v", err, tt.wantErr)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "test: register metrics: ") {
				t.Errorf("Err() = %q; want the component prefix", err)
			}
			if tt.reg != nil {
				if n, err := testutil.GatherAndCount(tt.reg); err != nil || n != tt.wantN {
					t.Errorf("GatherAndCount = %d, %v; want %d", n, err, tt.wantN)
				}
			}
		})
	}
}

func TestPreset(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := New(reg)
	v := f.CounterVec("yidu_test_events_total", "help", "source", "outcome")
	Preset(v.MetricVec, []string{"card", "link"}, []string{"new", "duplicate", "in_flight"})
	if n := testutil.CollectAndCount(v); n != 6 {
		t.Errorf("series after Preset = %d; want 2×3 = 6", n)
	}
	if got := testutil.ToFloat64(v.WithLabelValues("link", "in_flight")); got != 0 {
		t.Errorf("preset series = %v; want 0", got)
	}
}

// TestShared: a second instance registering through Shared counts into the
// first one's series; a name taken with another type is still an error.
func TestShared(t *testing.T) {
	reg := prometheus.NewRegistry()
	first := New(reg)
	a := first.CounterVec("yidu_test_total", "help", "op")
	g := first.Gauge("yidu_test_entries", "help")
	second := New(Shared(reg))
	b := second.CounterVec("yidu_test_total", "help", "op")
	g2 := second.Gauge("yidu_test_entries", "help")
	if err := second.Err("second"); err != nil {
		t.Fatalf("Err() = %v; want nil", err)
	}
	a.WithLabelValues("x").Inc()
	b.WithLabelValues("x").Inc()
	g.Inc()
	g2.Inc()
	if got := testutil.ToFloat64(a.WithLabelValues("x")); got != 2 {
		t.Errorf("shared counter = %v; want 2", got)
	}
	if got := testutil.ToFloat64(g); got != 2 {
		t.Errorf("shared gauge = %v; want 2", got)
	}
	third := New(Shared(reg))
	third.Counter("yidu_test_entries", "help") // a gauge's name
	if third.Err("third") == nil {
		t.Error("a name taken by another type: want an error")
	}
}
