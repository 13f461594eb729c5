package yidu

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// opsRoutes serves /healthz (alive until done is closed), and /metrics:
// the probes of a process with no other HTTP (yidu flushd).
func opsRoutes(g prometheus.Gatherer, done <-chan struct{}) http.Handler {
	r := chi.NewRouter()
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
			http.Error(w, "flushd stopped", http.StatusServiceUnavailable)
		default:
			w.Write([]byte("ok\n"))
		}
	})
	r.Handle("/metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	return r
}
