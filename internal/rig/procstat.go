package rig

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LoadAvg returns the 1-, 5- and 15-minute load averages (zeros when
// /proc/loadavg cannot be read): a run's figures are read against what
// else the machine was doing.
func LoadAvg() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	f := strings.Fields(string(b))
	for i := 0; i < 3 && i < len(f); i++ {
		l[i], _ = strconv.ParseFloat(f[i], 64)
	}
	return l
}

// StatusKB returns a "VmXXX:" line of /proc/<pid>/status (VmRSS, VmHWM)
// in KiB.
func StatusKB(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}
