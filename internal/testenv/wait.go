package testenv

import (
	"testing"
	"time"
)

// WaitFor polls cond until it holds, failing tb after timeout: a test
// waits on a condition, never sleeps then asserts. Give a generous timeout
// (the CI machine is loaded); it does not measure time.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
