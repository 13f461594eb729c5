package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond every 20 ms until it holds, failing tb after
// timeout: a test waits on a condition, never sleeps then asserts. Give a
// generous timeout (the CI machine is loaded); it does not measure time.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	WaitEvery(tb, timeout, 20*time.Millisecond, what, cond)
}

// WaitEvery is WaitFor polling every interval. A condition that reads
// InnoDB's information_schema tables (innodb_trx, innodb_lock_waits)
// needs an interval over 100 ms: MariaDB refreshes their cache only
// when nobody has read it for 100 ms, so a faster poll keeps reading the
// snapshot taken at its first look.
func WaitEvery(tb testing.TB, timeout, interval time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(interval)
	}
}
