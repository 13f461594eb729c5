package bitmap

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/internal/testenv"
)

// ownRedis is a redis-server of one test's own: what a test does to it
// (SCRIPT FLUSH, a crash) touches no other test. It listens on a unix
// socket only (--port 0), so there is no TCP port to pick and race for.
type ownRedis struct {
	cmd  *exec.Cmd
	done chan struct{}
	rdb  *redis.Client
}

// startRedis starts an empty redis-server without persistence and returns
// it once it answers; it is stopped when the test ends.
func startRedis(tb testing.TB) *ownRedis {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if testenv.Real() {
			tb.Fatalf("redis-server not found with YIDU_TEST_REAL=1: %v", err)
		}
		tb.Skipf("redis-server not found (%v)", err)
	}
	// Not tb.TempDir(): a unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "yr")
	testenv.Check(tb, "MkdirTemp", err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "r.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	testenv.Check(tb, "start redis-server", cmd.Start())
	o := &ownRedis{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(o.done) }()
	tb.Cleanup(func() { o.kill(tb) })
	o.rdb = redis.NewClient(&redis.Options{Network: "unix", Addr: sock, MaxRetries: -1, DialerRetries: 1})
	tb.Cleanup(func() { o.rdb.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := o.rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return o
		}
		if time.Now().After(deadline) {
			tb.Fatalf("own redis-server did not answer: %v", err)
		}
		select {
		case <-o.done:
			tb.Fatalf("own redis-server exited: %v", cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kill stops the server at once (SIGKILL, as a crashed Redis) and waits
// until it is gone, so the next command fails for certain.
func (o *ownRedis) kill(tb testing.TB) {
	tb.Helper()
	select {
	case <-o.done:
		return
	default:
	}
	_ = o.cmd.Process.Kill()
	select {
	case <-o.done:
	case <-time.After(30 * time.Second):
		tb.Errorf("own redis-server did not exit after SIGKILL")
	}
}

// ownStore returns a started Store on a fresh redis-server of its own.
func ownStore(tb testing.TB, opts Options) (*Store, *ownRedis) {
	tb.Helper()
	o := startRedis(tb)
	opts.Prefix = "own"
	if opts.RoundTripTimeout == 0 {
		opts.RoundTripTimeout = 10 * time.Second
	}
	s, err := New(o.rdb, opts)
	testenv.Check(tb, "New", err)
	tb.Cleanup(s.Close)
	return s, o
}
