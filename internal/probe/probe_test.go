package probe

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func get(tb testing.TB, h http.Handler, path string) (int, string) {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func ok(context.Context) error { return nil }

func TestProbes(t *testing.T) {
	down := func(context.Context) error { return errors.New("dial tcp 10.0.0.7:6379: refused") }
	hang := func(context.Context) error { select {} }
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "yidu_probe_test_total"}))
	tests := []struct {
		name      string
		opts      Options
		path      string
		code      int
		body      string
		notInBody string
	}{
		{name: "healthz", path: "/healthz", code: 200, body: "ok\n"},
		{name: "healthz after the loop stopped", opts: Options{Alive: func() error { return errors.New("flushd stopped") }},
			path: "/healthz", code: 503, body: "not alive: flushd stopped\n"},
		{name: "ready", opts: Options{Ready: map[string]Check{"mysql": ok, "redis": ok}}, path: "/readyz", code: 200, body: "ready\n"},
		{name: "no checks is ready", path: "/readyz", code: 200, body: "ready\n"},
		{name: "names the failing check, never its error", opts: Options{Ready: map[string]Check{"mysql": ok, "redis": down}},
			path: "/readyz", code: 503, body: "not ready: redis\n", notInBody: "10.0.0.7"},
		{name: "a check ignoring ctx times out", opts: Options{Ready: map[string]Check{"kafka": hang, "redis": down}, Timeout: 50 * time.Millisecond},
			path: "/readyz", code: 503, body: "not ready: kafka (timeout), redis\n"},
		{name: "metrics", opts: Options{Gatherer: reg}, path: "/metrics", code: 200, body: "yidu_probe_test_total 0"},
		{name: "no gatherer: /metrics is the role's", path: "/metrics", code: 418, body: "role"},
		{name: "other paths reach the role", path: "/wecom/callback/hr", code: 418, body: "role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			role := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusTeapot)
				_, _ = w.Write([]byte("role"))
			})
			code, body := get(t, Wrap(role, tt.opts), tt.path)
			if code != tt.code || !strings.Contains(body, tt.body) {
				t.Errorf("GET %s = %d %q; want %d containing %q", tt.path, code, body, tt.code, tt.body)
			}
			if tt.notInBody != "" && strings.Contains(body, tt.notInBody) {
				t.Errorf("GET %s leaks %q: %q", tt.path, tt.notInBody, body)
			}
		})
	}
}

// TestReadyParallel proves the checks run at once: each waits for the
// other to have started, which a sequential loop would never allow.
func TestReadyParallel(t *testing.T) {
	aStarted, bStarted := make(chan struct{}), make(chan struct{})
	barrier := func(mine, other chan struct{}) Check {
		return func(ctx context.Context) error {
			close(mine)
			select {
			case <-other:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	h := Wrap(http.NotFoundHandler(), Options{
		Ready:   map[string]Check{"a": barrier(aStarted, bStarted), "b": barrier(bStarted, aStarted)},
		Timeout: 10 * time.Second,
	})
	if code, body := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %q; want 200 (checks ran one after the other)", code, body)
	}
}

func TestReadyStatusGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	g, err := NewStatus(reg)
	if err != nil {
		t.Fatal(err)
	}
	down := func(context.Context) error { return errors.New("refused") }
	h := Wrap(http.NotFoundHandler(), Options{Ready: map[string]Check{"mysql": ok, "redis": down}, Gatherer: reg, Status: g})
	get(t, h, "/readyz")
	_, body := get(t, h, "/metrics")
	for _, want := range []string{`yidu_ready{check="mysql"} 1`, `yidu_ready{check="redis"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics after /readyz lacks %s:\n%s", want, body)
		}
	}
	if _, err := NewStatus(reg); err == nil {
		t.Errorf("NewStatus twice on one registry = nil; want the duplicate reported")
	}
}
