package bitmap

import (
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// ownRedis is a redis-server of one test's own (testenv.StartRedis).
type ownRedis = testenv.OwnRedis

// ownStore returns a started Store on a fresh redis-server of its own.
func ownStore(tb testing.TB, opts Options) (*Store, *ownRedis) {
	tb.Helper()
	o := testenv.StartRedis(tb)
	opts.Prefix = "own"
	if opts.RoundTripTimeout == 0 {
		opts.RoundTripTimeout = 10 * time.Second
	}
	s, err := New(o.Client, opts)
	testenv.Check(tb, "New", err)
	tb.Cleanup(s.Close)
	return s, o
}
