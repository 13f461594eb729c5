package dashboard

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

func TestProbes(t *testing.T) {
	redisUp := true
	reg := prometheus.NewRegistry()
	now := func() time.Time { return t0 }
	s, err := New(Options{
		Messages:   newFakeMessages(now),
		Bitmaps:    newFakeBitmaps(),
		Directory:  &fakeDirectory{},
		Now:        now,
		Registerer: reg,
		Gatherer:   reg,
		Ready: map[string]func(context.Context) error{
			"mysql": func(context.Context) error { return nil },
			"redis": func(context.Context) error {
				if redisUp {
					return nil
				}
				return errors.New("dial tcp 10.0.0.1:6379: refused")
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.Routes()
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	tests := []struct {
		name     string
		redisUp  bool
		path     string
		code     int
		contains string
	}{
		{"healthz", true, "/healthz", 200, "ok"},
		{"ready", true, "/readyz", 200, "ready"},
		{"not ready names the check only", false, "/readyz", 503, "not ready: redis"},
		{"metrics", true, "/metrics", 200, "yidu_dashboard_"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			redisUp = tt.redisUp
			code, body := get(tt.path)
			if code != tt.code || !strings.Contains(body, tt.contains) || strings.Contains(body, "10.0.0.1") {
				t.Errorf("GET %s = %d %q; want %d containing %q and no address", tt.path, code, body, tt.code, tt.contains)
			}
		})
	}
}
