package testenv

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// OwnRedis is a redis-server of one test's own: what a test does to it
// (SCRIPT FLUSH, a crash) touches no other test. It listens on a unix
// socket only (--port 0), so there is no TCP port to pick and race for.
type OwnRedis struct {
	// Client talks to it over the socket and never retries a command.
	Client *redis.Client
	cmd    *exec.Cmd
	done   chan struct{}
}

// StartRedis starts an empty redis-server without persistence and returns
// it once it answers; it is killed when the test ends. Without
// redis-server on PATH the test is skipped, or fails with YIDU_TEST_REAL=1.
func StartRedis(tb testing.TB) *OwnRedis {
	tb.Helper()
	bin := LookPath(tb, "redis-server")
	// Not tb.TempDir(): a unix socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "yr")
	Check(tb, "MkdirTemp", err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "r.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no", "--dir", dir)
	Check(tb, "start redis-server", cmd.Start())
	o := &OwnRedis{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(o.done) }()
	tb.Cleanup(func() { o.Kill(tb) })
	o.Client = redis.NewClient(&redis.Options{Network: "unix", Addr: sock, MaxRetries: -1, DialerRetries: 1})
	tb.Cleanup(func() { o.Client.Close() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := o.Client.Ping(ctx).Err()
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

// Kill stops the server at once (SIGKILL, as a crashed Redis) and waits
// until it is gone, so the next command fails for certain.
func (o *OwnRedis) Kill(tb testing.TB) {
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
