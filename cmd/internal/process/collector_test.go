package process

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestCollectorTuned: a process that receives collects at receiver.gogc
// and under 90 % of its container's memory, unless its environment says
// otherwise (GOGC, GOMEMLIMIT, AUTOMEMLIMIT=off), and receiver.gogc 0
// leaves Go's own target.
func TestCollectorTuned(t *testing.T) {
	// The process's own environment stays out of it: memlimit reads it
	// too. (t.Setenv restores each at the end.)
	for _, k := range []string{"GOGC", "GOMEMLIMIT", "AUTOMEMLIMIT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	const container = 1 << 30
	percent0, limit0 := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(percent0); debug.SetMemoryLimit(limit0) })
	tests := []struct {
		name        string
		gogc        int
		env         map[string]string
		wantPercent int
		wantLimit   int64
	}{
		{"defaults", 400, nil, 400, container * 9 / 10},
		{"gogc set by the environment", 400, map[string]string{"GOGC": "150"}, 100, container * 9 / 10},
		{"memory limit set by the environment", 400, map[string]string{"GOMEMLIMIT": "300MiB"}, 400, math.MaxInt64},
		{"no automatic memory limit", 400, map[string]string{"AUTOMEMLIMIT": "off"}, 400, math.MaxInt64},
		{"go's own target", 0, nil, 100, container * 9 / 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			c := collector{getenv: func(k string) string { return tt.env[k] }, provider: memlimit.Limit(container), log: slog.New(slog.DiscardHandler)}
			percent, limit := c.tune(tt.gogc)
			if now := debug.SetGCPercent(100); percent != tt.wantPercent || now != tt.wantPercent {
				t.Errorf("tune(%d): percent %d, in force %d; want %d", tt.gogc, percent, now, tt.wantPercent)
			}
			if now := debug.SetMemoryLimit(-1); limit != tt.wantLimit || now != tt.wantLimit {
				t.Errorf("tune(%d): limit %d, in force %d; want %d", tt.gogc, limit, now, tt.wantLimit)
			}
		})
	}
}
