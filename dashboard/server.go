// Package dashboard serves the /api/v1 JSON API and the web page that show
// who has read a tracked message: live counts from the Redis bitmaps, the
// per-department breakdown, the unread list, CSV export and reminders.
//
// People sign in with a password (bcrypt) and get a session kept in memory
// on the server; programs use bearer tokens. Both see only their corps.
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/singleflight"

	"github.com/yidu-io/yidu/config"
	"github.com/yidu-io/yidu/tracker"
)

//go:embed web/templates/*.html web/static/*
var webFS embed.FS

// Options configures a Server.
type Options struct {
	Messages  Messages
	Bitmaps   Bitmaps
	Directory Directory
	Config    config.Dashboard
	// Apps are the WeCom applications: POST /messages may register only for
	// an app of a granted corp, and the tracker sends through it.
	Apps       []config.App
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxStreams bounds concurrent /events streams; 0 means 256.
	MaxStreams int
	// Ready are the readiness checks of /readyz by name (mysql, redis):
	// ready only when every one returns nil within two seconds.
	Ready map[string]func(context.Context) error
	// Gatherer is served at /metrics; nil serves no /metrics.
	Gatherer prometheus.Gatherer
}

// Server is the dashboard. Build it with New, serve Routes, Close it to end
// the live streams before shutting the HTTP server down.
type Server struct {
	ready    map[string]func(context.Context) error
	gatherer prometheus.Gatherer
	msgs     Messages
	bms      Bitmaps
	dir      Directory
	cfg      config.Dashboard
	apps     map[string]config.App
	log      *slog.Logger
	met      *metrics
	now      func() time.Time
	pages    *template.Template
	auth     *authenticator

	restoring singleflight.Group
	depts     *deptCache
	curves    *curveCache

	remindMu       sync.Mutex
	remindInFlight map[string]bool

	streams     chan struct{}
	sseInterval time.Duration
	done        chan struct{}
	closeOnce   sync.Once
}

// New checks opts and builds a Server.
func New(opts Options) (*Server, error) {
	if opts.Messages == nil || opts.Bitmaps == nil || opts.Directory == nil {
		return nil, errors.New("dashboard: Messages, Bitmaps and Directory are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 256
	}
	if opts.Config.SessionTTL <= 0 {
		opts.Config.SessionTTL = config.Duration(12 * time.Hour)
	}
	if opts.Config.RemindInterval <= 0 {
		opts.Config.RemindInterval = config.Duration(time.Hour)
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	auth, err := newAuthenticator(opts.Config, opts.Now)
	if err != nil {
		return nil, err
	}
	pages, err := template.New("").Funcs(templateFuncs).ParseFS(webFS, "web/templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: templates: %w", err)
	}
	s := &Server{
		msgs: opts.Messages, bms: opts.Bitmaps, dir: opts.Directory,
		cfg: opts.Config, apps: map[string]config.App{},
		log: opts.Logger.With("component", "dashboard"), met: met, now: opts.Now,
		pages: pages, auth: auth,
		depts:          newDeptCache(opts.Directory, opts.Now, time.Minute),
		curves:         newCurveCache(opts.Messages, opts.Now, 5*time.Second),
		remindInFlight: map[string]bool{},
		streams:        make(chan struct{}, opts.MaxStreams),
		sseInterval:    time.Second,
		done:           make(chan struct{}),
		ready:          opts.Ready,
		gatherer:       opts.Gatherer,
	}
	for _, a := range opts.Apps {
		s.apps[a.Name] = a
	}
	return s, nil
}

// Close ends every live /events stream; call it before http.Server.Shutdown,
// which would otherwise wait for streams that never go idle.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// handleReady answers 200 when every readiness check passes, else 503
// naming the failing ones (not their errors, which may carry addresses).
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var failed []string
	for name, check := range s.ready {
		if err := check(ctx); err != nil {
			failed = append(failed, name)
			s.log.Warn("readiness check failed", "check", name, "err", err)
		}
	}
	if len(failed) > 0 {
		sort.Strings(failed)
		http.Error(w, "not ready: "+strings.Join(failed, ", "), http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ready\n"))
}

// Routes returns the handler for the page, its assets and /api/v1.
func (s *Server) Routes() http.Handler {
	static, _ := fs.Sub(webFS, "web/static")
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))

	r := chi.NewRouter()
	r.Use(s.instrument, securityHeaders, cop.Handler)
	r.Handle("/static/*", http.StripPrefix("/static/", http.FileServerFS(static)))
	// Probes and metrics for the orchestrator: no employee data, no auth.
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) })
	r.Get("/readyz", s.handleReady)
	if s.gatherer != nil {
		r.Handle("/metrics", promhttp.HandlerFor(s.gatherer, promhttp.HandlerOpts{}))
	}
	r.Get("/login", s.handleLoginPage)
	r.Post("/login", s.handleLogin)
	r.Group(func(r chi.Router) {
		r.Use(s.requirePage)
		r.Post("/logout", s.handleLogout)
		r.Get("/", s.handleListPage)
		r.Get("/m/{msgid}", s.handleMessagePage)
	})
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(s.requireAPI)
		r.Get("/messages", s.handleListMessages)
		r.Post("/messages", s.handleRegister)
		r.Route("/messages/{msgid}", func(r chi.Router) {
			r.Get("/", s.handleGetMessage)
			r.Get("/progress", s.handleProgress)
			r.Get("/departments", s.handleDepartments)
			r.Get("/recipients", s.handleRecipients)
			r.Get("/export.csv", s.handleExport)
			r.Post("/remind", s.handleRemind)
			r.Get("/events", s.handleEvents)
		})
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusNotFound, "not found") })
	return r
}

// securityHeaders forbids framing, inline scripts and MIME sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// metrics of the dashboard.
type metrics struct {
	requests   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	streams    prometheus.Gauge
	exportRows prometheus.Counter
	reminded   prometheus.Counter
	logins     *prometheus.CounterVec
}

// routeNames are the chi patterns, pre-set to 0 in the metrics. Requests
// refused before routing (401) count under "/api/v1/*".
var routeNames = []string{
	"/login", "/logout", "/", "/m/{msgid}", "/static/*",
	"/api/v1/*", "/api/v1/messages", "/api/v1/messages/{msgid}", "/api/v1/messages/{msgid}/progress",
	"/api/v1/messages/{msgid}/departments", "/api/v1/messages/{msgid}/recipients",
	"/api/v1/messages/{msgid}/export.csv", "/api/v1/messages/{msgid}/remind",
	"/api/v1/messages/{msgid}/events",
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yidu_dashboard_requests_total", Help: "Dashboard HTTP requests by route pattern and status.",
		}, []string{"route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "yidu_dashboard_request_seconds", Help: "Dashboard request time by route (SSE streams excluded).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
		}, []string{"route"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "yidu_dashboard_sse_streams", Help: "Open /events streams.",
		}),
		exportRows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_dashboard_export_rows_total", Help: "CSV rows written by export.csv.",
		}),
		reminded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "yidu_dashboard_reminded_total", Help: "People sent a reminder.",
		}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "yidu_dashboard_logins_total", Help: "Sign-in attempts by result.",
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.streams, m.exportRows, m.reminded, m.logins} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("dashboard: register metrics: %w", err)
		}
	}
	for _, rt := range routeNames {
		m.requests.WithLabelValues(rt, "200")
		m.duration.WithLabelValues(rt)
	}
	for _, res := range []string{"ok", "bad_password", "rate_limited"} {
		m.logins.WithLabelValues(res)
	}
	return m, nil
}

// statusWriter records the status; Unwrap lets http.ResponseController
// reach the connection's Flush for SSE and export.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		s.met.requests.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		if route != "/api/v1/messages/{msgid}/events" {
			s.met.duration.WithLabelValues(route).Observe(s.now().Sub(start).Seconds())
		}
	})
}

// Request outcomes, mapped to HTTP status in one place (httpStatus).
var (
	errNotFound    = errors.New("not found")
	errUnavailable = errors.New("temporarily unavailable")
)

func httpStatus(err error) (int, string) {
	switch {
	case errors.Is(err, errBadParam):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, errNotFound):
		return http.StatusNotFound, "not found"
	case errors.Is(err, tracker.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, tracker.ErrRateLimited):
		return http.StatusTooManyRequests, "WeCom's sending limit for this app is reached, try later"
	case errors.Is(err, tracker.ErrNoSender):
		return http.StatusServiceUnavailable, "sending through WeCom is not configured"
	case errors.Is(err, tracker.ErrConflict):
		return http.StatusConflict, "msgid exists with a different audience or title"
	case errors.Is(err, context.Canceled):
		return 499, "client went away"
	case errors.Is(err, errUnavailable), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, "temporarily unavailable"
	}
	return http.StatusInternalServerError, "internal error"
}

// fail answers err; only 5xx is logged (without request data, which may
// hold employee names).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := httpStatus(err)
	if code >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "route", r.URL.Path, "err", err)
	}
	writeError(w, code, msg)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
