package process

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// A process that receives sets its Go collector for the 9:00 storm
// (issue 50), as deploy/ had set it in the receiver's environment since
// issue 16: receiver.gogc (400) unless the environment sets GOGC, and a
// memory limit of 90 % of its container's (cgroup) unless it sets
// GOMEMLIMIT, so the heap that grows further between collections is
// collected harder near the limit instead of being killed at it. An
// environment's GOGC or GOMEMLIMIT always wins: Go's runtime has read it.

// TuneCollector sets this process's collector as a receiver's (gogc:
// receiver.gogc) and returns the target percent and memory limit in
// force. The receiver calls it at start; yidu-bench at its own, so every
// arm runs under the collector the receiver runs with.
func TuneCollector(gogc int, log *slog.Logger) (percent int, limit int64) {
	return collector{getenv: os.Getenv, provider: memlimit.FromCgroup, log: log}.tune(gogc)
}

// collector is what TuneCollector reads and sets; tests replace it.
type collector struct {
	getenv   func(string) string
	provider memlimit.Provider
	log      *slog.Logger
}

// tune applies gogc (0: Go's own) and the container's memory limit, and
// returns the collector's target percent and memory limit now in force.
func (c collector) tune(gogc int) (percent int, limit int64) {
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	if gogc > 0 && c.getenv("GOGC") == "" {
		debug.SetGCPercent(gogc)
		percent = gogc
	}
	limit = debug.SetMemoryLimit(-1)
	if c.getenv("GOMEMLIMIT") == "" && c.getenv("AUTOMEMLIMIT") != "off" {
		l, err := memlimit.Set(memlimit.WithProvider(c.provider), memlimit.WithRatio(0.9), memlimit.WithLogger(c.log))
		if err != nil {
			c.log.Warn("receiver: no memory limit taken from the container", "err", err)
		} else {
			limit = l
		}
	}
	c.log.Info("receiver: Go collector", "gogc", percent, "memory_limit_bytes", limit)
	return percent, limit
}
