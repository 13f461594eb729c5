package process

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/yidu-io/yidu/internal/probe"
)

// readiness is what a role needs to answer: its MySQL pool (db) and Redis
// for the dashboard. The receiver is ready while a read can be made
// durable: Kafka answers, or the spool has room (docs/reliability.md);
// Redis, MySQL and Kafka are only named when down (probe.Options.Degraded),
// since the receiver records reads without each of them.
func (m *Main) readiness(db *sql.DB, receiver bool) probe.Options {
	mysqlUp := func(ctx context.Context) error { return db.PingContext(ctx) }
	redisUp := func(ctx context.Context) error { return m.Redis.Ping(ctx).Err() }
	kafkaUp := func(ctx context.Context) error {
		if m.Producer == nil {
			return errors.New("no producer")
		}
		return m.Producer.Ping(ctx)
	}
	if !receiver {
		return probe.Options{Ready: map[string]probe.Check{"mysql": mysqlUp, "redis": redisUp}}
	}
	// Without Redis button and link reads go to Kafka unmarked, without
	// MySQL by UserID (bitmap.Recorder): neither is a reason to take the
	// receiver out of WeCom's reach.
	o := probe.Options{Degraded: map[string]probe.Check{"mysql": mysqlUp, "redis": redisUp}}
	if m.Spool == nil {
		// Without a spool every read Kafka does not take is a 503.
		o.Ready = map[string]probe.Check{"kafka": kafkaUp}
		return o
	}
	// Kafka down is no reason to stop taking callbacks: the spool holds
	// their deltas. A full spool with Kafka down is.
	o.Degraded["kafka"] = kafkaUp
	o.Ready = map[string]probe.Check{"spool": func(ctx context.Context) error {
		err := m.Spool.Ready(ctx)
		if err == nil {
			return nil
		}
		if kafkaUp(ctx) == nil {
			return nil
		}
		return err
	}}
	return o
}

// withProbes puts /healthz, /readyz and /metrics in front of a role's
// routes; o carries the role's checks.
func (m *Main) withProbes(h http.Handler, o probe.Options, alive func() error) http.Handler {
	o.Alive, o.Gatherer, o.Logger, o.Status = alive, m.Registry, m.Logger, m.ready
	return probe.Wrap(h, o)
}

// Per-role HTTP server settings. All bound slow clients (slow-loris):
// headers within 5 s, at most 16 KiB of them, idle keep-alives closed.
func newServer(read, write, idle time.Duration) *http.Server {
	return &http.Server{
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       read,
		WriteTimeout:      write,
		IdleTimeout:       idle,
		MaxHeaderBytes:    16 << 10,
	}
}

// ReceiverServer returns the receiver's settings: it answers WeCom within
// its 5 s (doc path 90238), the whole request in 10 s, the answer written
// within 15 s.
func ReceiverServer() *http.Server { return newServer(10*time.Second, 15*time.Second, time.Minute) }

// dashboardServer has no WriteTimeout: live streams and exports outlive
// any fixed one, so the dashboard sets a deadline per request
// (dashboard.DefaultWriteTimeout) and the long routes extend theirs. A
// registration body of 8 MiB gets 60 s to arrive.
func dashboardServer() *http.Server { return newServer(time.Minute, 0, 2*time.Minute) }

// opsServer serves flushd's probes and metrics.
func opsServer() *http.Server { return newServer(10*time.Second, 30*time.Second, time.Minute) }

// serveRole serves role's routes behind the probes (ready its readiness
// checks) on listen and logs "<role> listening" with the address, which
// the harnesses read (internal/rig).
func (m *Main) serveRole(role string, srv *http.Server, listen string, routes http.Handler, ready probe.Options) (string, error) {
	if m.verifyName != "" {
		routes = verifyFile(m.verifyName, m.verifyBody, routes)
	}
	addr, err := m.serve(srv, listen, m.withProbes(routes, ready, nil))
	if err != nil {
		return "", fmt.Errorf("%s: %w", role, err)
	}
	m.Logger.Info(role+" listening", "addr", addr)
	return addr, nil
}

func (m *Main) serve(srv *http.Server, addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("listen %s: %w", addr, err)
	}
	srv.Addr, srv.Handler = ln.Addr().String(), h
	m.servers = append(m.servers, srv)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			m.Logger.Error("http server stopped", "addr", addr, "err", err)
		}
	}()
	return ln.Addr().String(), nil
}
