package main

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux this runs on.
const clockTicks = 100

// selfCPU is this process's user+system CPU time (getrusage).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system CPU time of pid from /proc (0 when unreadable).
func procCPU(pid int) time.Duration { return statCPU("/proc/" + strconv.Itoa(pid) + "/stat") }

// threadsCPU is the CPU time of each thread of pids (/proc/PID/task/TID).
func threadsCPU(pids []int) map[int]time.Duration {
	out := map[int]time.Duration{}
	for _, p := range pids {
		stats, _ := filepath.Glob("/proc/" + strconv.Itoa(p) + "/task/[0-9]*/stat")
		for _, st := range stats {
			if tid, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
				out[tid] = statCPU(st)
			}
		}
	}
	return out
}

// dbThreadsCPU is the CPU time, since before (threadsCPU), of the mysqld
// threads serving connections to database name: MariaDB runs one thread
// per connection and lists its OS thread id (information_schema
// .PROCESSLIST.TID), so the work the bench's own database asks of mysqld
// is counted apart from other engineers' queries on the shared server.
// InnoDB's background threads (page cleaner, purge, log writer) are not
// counted, nor a connection closed before the end.
func dbThreadsCPU(ctx context.Context, db *sql.DB, name string, pids []int, before map[int]time.Duration) (time.Duration, error) {
	rows, err := db.QueryContext(ctx, "SELECT TID FROM information_schema.PROCESSLIST WHERE DB = ?", name)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	now := threadsCPU(pids)
	var t time.Duration
	for rows.Next() {
		var tid int
		if err := rows.Scan(&tid); err != nil {
			return 0, err
		}
		t += now[tid] - before[tid]
	}
	return t, rows.Err()
}

// statCPU is the user+system CPU time in a /proc stat file (0 when
// unreadable).
func statCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	// Fields after the command name, which may hold spaces: state is
	// field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / clockTicks
}

// procsNamed returns the pids whose command name is one of names
// (mariadbd, mysqld, redis-server): the shared services whose CPU the
// arms spend. Other engineers' work on the same servers counts too.
func procsNamed(names ...string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		comm := strings.TrimSpace(string(b))
		for _, n := range names {
			if comm == n {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
					pids = append(pids, pid)
				}
			}
		}
	}
	return pids
}

func sumCPU(pids []int) time.Duration {
	var t time.Duration
	for _, p := range pids {
		t += procCPU(p)
	}
	return t
}

// memKB returns a "VmXXX:" line of this process's /proc status in KiB
// (0 when unreadable).
func memKB(field string) int64 {
	kb, _ := rig.StatusKB(os.Getpid(), field)
	return kb
}

// resetPeakRSS starts VmHWM again from the current RSS (Linux ≥ 4.0), so
// each arm's peak is its own; it reports whether the kernel allowed it.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}
