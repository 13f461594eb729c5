// Package dashboard serves the /api/v1 JSON API and the web page that show
// who has read a tracked message: live counts from the Redis bitmaps, the
// per-department breakdown, the unread list, CSV export and reminders.
//
// Who is asking is package access's (password users, bearer tokens,
// WeCom sign-in, sessions in Redis shared by every replica); the
// dashboard keeps the session cookie and the CSRF check.
package dashboard

import (
	"cmp"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/progress"
)

//go:embed web/templates/*.html web/static/* web/i18n/*.json
var webFS embed.FS

// Options configures a Server.
type Options struct {
	// Audit records the audited actions (nil: none).
	Audit Auditor
	// AuditLog reads them for GET /api/v1/audit and /audit (nil: 404).
	AuditLog AuditLog
	// WeCom enables sign-in with WeCom (nil: password sign-in only).
	WeCom *WeComLogin
	// TrustedProxies are the networks of the reverse proxies (an ingress
	// controller) whose X-Forwarded-For and X-Forwarded-Proto are
	// believed: for the per-address sign-in limit and the cookie's Secure
	// flag. Empty trusts no header.
	TrustedProxies []netip.Prefix
	// PublicURL is the dashboard as browsers reach it; an https URL makes
	// the session cookie Secure whatever the dashboard itself sees (TLS
	// ended at an ingress that sets no X-Forwarded-Proto).
	PublicURL string
	// Apps are the WeCom applications: POST /messages may register only for
	// an app of a granted corp, and the tracker sends through it.
	Apps       []yidu.App
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// MaxStreams bounds concurrent /events streams (default
	// DefaultMaxStreams; 503 beyond).
	MaxStreams int
	// MaxStreamsPerPrincipal bounds one token's or one person's concurrent
	// /events streams (default DefaultMaxStreamsPerPrincipal; 429 beyond),
	// so that one principal cannot hold all MaxStreams.
	MaxStreamsPerPrincipal int
	// StreamRecheck is how often a live stream checks again that its
	// caller's session and scope still admit it (default
	// DefaultStreamRecheck); it ends when they do not.
	StreamRecheck time.Duration
	// StreamWriteTimeout bounds writing one event of a live stream
	// (default DefaultStreamWriteTimeout): a client that does not take its
	// events is dropped and its slots freed.
	StreamWriteTimeout time.Duration
	// MaxQueries bounds the heavy queries (recipients, departments,
	// export.csv) running at once in this dashboard (default
	// DefaultMaxQueries); one waits up to QueryWait for a slot, then 503.
	// Sized below the MySQL pool, it keeps connections for the other roles.
	MaxQueries int
	// MaxQueriesPerPrincipal bounds one principal's heavy queries at once
	// (default DefaultMaxQueriesPerPrincipal; 429 beyond).
	MaxQueriesPerPrincipal int
	// QueryWait is how long a heavy query waits for one of MaxQueries
	// (default DefaultQueryWait).
	QueryWait time.Duration
	// WriteTimeout bounds writing one answer (default DefaultWriteTimeout);
	// the live stream, exports and sending registrations set their own.
	WriteTimeout time.Duration
	// ExportStall is how long one chunk of a CSV export may take to reach
	// a client (default DefaultExportStall): an export lasts as long as
	// the client keeps reading.
	ExportStall time.Duration
	// Attachments keeps uploaded attachments (attachment.Store); nil:
	// POST /api/v1/attachments answers 404.
	Attachments Attachments
	// Evidence makes members' evidence records, PDFs and ZIPs
	// (evidence.Service); nil: the evidence endpoints answer 404.
	Evidence EvidenceRecords
	// ConfirmOver is dashboard.confirm_over (default DefaultConfirmOver):
	// above it the page asks to type the recipient count (GET /apps).
	ConfirmOver int
}

// Server is the dashboard. Build it with New, serve Routes, Close it to end
// the live streams before shutting the HTTP server down.
type Server struct {
	// writeTimeout and exportStall: Options.WriteTimeout, ExportStall.
	writeTimeout, exportStall time.Duration
	apps                      map[string]yidu.App
	log                       *slog.Logger
	met                       *metrics
	now                       func() time.Time
	pages                     map[string]*template.Template
	cats                      map[string]catalogue
	audit                     Auditor
	auditLog                  AuditLog
	auth                      Identities
	proxies                   clientip.Proxies
	// httpsOnly: PublicURL is https, every cookie is Secure.
	httpsOnly bool
	// publicURL and wecomLogin: sign-in with WeCom (wecomlogin.go).
	publicURL  string
	wecomLogin *WeComLogin

	status statusLine
	// prog answers every count and page of people within the caller's
	// View; acts decides every act on a notice.
	prog Progress
	acts Campaign

	streams chan struct{}
	// scopedStreams: half of streams, what scoped callers hold together.
	scopedStreams chan struct{}
	// exports: half of queries, what exports hold together.
	exports     chan struct{}
	userStreams *perKey
	streamWrite time.Duration
	sseInterval time.Duration
	// streamRecheck: Options.StreamRecheck.
	streamRecheck time.Duration

	queries     chan struct{}
	userQueries *perKey
	queryWait   time.Duration
	done        chan struct{}
	// confirmOver: Options; appList the apps in config order.
	attachments Attachments
	confirmOver int
	appList     []yidu.App
	closeOnce   sync.Once
	// evidence: Options.Evidence (evidence.go).
	evidence EvidenceRecords
	// wecomLimits bound WeCom sign-in per address and in total.
	wecomLimits *access.WeComLimiter
}

// New checks opts and builds a Server that translates HTTP for the
// three services cmd builds: who is asking (ids), what may be done to a
// notice (acts) and how far it is (prog).
func New(ids Identities, acts Campaign, prog Progress, opts Options) (*Server, error) {
	if ids == nil || acts == nil || prog == nil {
		return nil, errors.New("dashboard: identities, campaign and progress are required")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	cats, err := loadCatalogues()
	if err != nil {
		return nil, err
	}
	pages, err := parsePages(cats)
	if err != nil {
		return nil, err
	}
	s := &Server{
		prog: prog, acts: acts,
		apps:         map[string]yidu.App{},
		writeTimeout: cmp.Or(opts.WriteTimeout, DefaultWriteTimeout), exportStall: cmp.Or(opts.ExportStall, DefaultExportStall),
		log: opts.Logger.With("component", "dashboard"), met: met, now: opts.Now,
		pages: pages, cats: cats, audit: cmp.Or[Auditor](opts.Audit, noAudit{}), auditLog: opts.AuditLog, auth: ids, proxies: clientip.Proxies(opts.TrustedProxies),
		publicURL: opts.PublicURL, wecomLogin: opts.WeCom,
		httpsOnly:     strings.HasPrefix(strings.ToLower(opts.PublicURL), "https://"),
		streams:       make(chan struct{}, opts.MaxStreams),
		scopedStreams: make(chan struct{}, max(1, opts.MaxStreams/2)),
		exports:       make(chan struct{}, max(1, opts.MaxQueries/2)),
		userStreams:   newPerKey(opts.MaxStreamsPerPrincipal),
		streamWrite:   cmp.Or(opts.StreamWriteTimeout, DefaultStreamWriteTimeout),
		sseInterval:   time.Second,
		streamRecheck: cmp.Or(opts.StreamRecheck, DefaultStreamRecheck),
		queries:       make(chan struct{}, opts.MaxQueries),
		userQueries:   newPerKey(opts.MaxQueriesPerPrincipal),
		queryWait:     cmp.Or(opts.QueryWait, DefaultQueryWait),
		done:          make(chan struct{}),
	}
	for _, a := range opts.Apps {
		s.apps[a.Name] = a
	}
	s.confirmOver, s.appList = cmp.Or(opts.ConfirmOver, DefaultConfirmOver), opts.Apps
	s.wecomLimits = access.NewWeComLimiter(opts.Now)
	s.attachments = opts.Attachments
	s.evidence = opts.Evidence
	return s, nil
}

// Close ends every live /events stream; call it before http.Server.Shutdown,
// which would otherwise wait for streams that never go idle.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
}

// Routes returns the handler for the page, its assets and /api/v1 (cmd adds
// the probes, internal/probe).
func (s *Server) Routes() http.Handler {
	static, _ := fs.Sub(webFS, "web/static")
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))

	r := chi.NewRouter()
	r.Use(s.instrument, s.writeDeadline, securityHeaders, cop.Handler)
	r.Handle("/static/*", http.StripPrefix("/static/", noListing(http.FileServerFS(static))))
	r.Get("/login", s.handleLoginPage)
	r.Get("/lang", s.handleLang)
	r.Get("/i18n/*", s.handleCatalogue)
	r.Post("/login", s.handleLogin)
	r.Get("/login/wecom", s.handleWeComStart)
	r.Get("/login/wecom/callback", s.handleWeComCallback)
	r.Group(func(r chi.Router) {
		r.Use(s.requirePage)
		r.Post("/logout", s.handleLogout)
		r.Get("/", s.handleListPage)
		r.Get("/m/{msgid}", s.handleMessagePage)
		r.Get("/new", s.handleComposePage)
		r.Get("/audit", s.handleAuditPage)
		r.Get("/approve/{msgid}", s.handleApprovePage)
	})
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(s.requireAPI, s.auditRefusals)
		r.Get("/messages", s.handleListMessages)
		r.Post("/messages", s.handleRegister)
		r.Get("/apps", s.handleApps)
		r.Route("/messages/{msgid}", func(r chi.Router) {
			r.Get("/", s.handleGetNotice)
			r.Patch("/", s.handlePatchNotice)
			r.Post("/cancel", s.handleCancelNotice)
			r.Post("/send", s.handleSendNotice)
			r.Get("/approval", s.handleGetApproval)
			r.Post("/approval", s.handleDecide)
			r.Post("/approval/preview", s.handlePreviewToMe)
			r.Get("/progress", s.withMessage(s.handleProgress))
			r.Get("/content", s.handleContent)
			r.With(s.heavyQuery).Get("/departments", s.withMessage(s.handleDepartments))
			r.With(s.heavyQuery).Get("/recipients", s.withMessage(s.handleRecipients))
			r.With(s.heavyQuery, s.exportSlot).Get("/export.csv", s.withMessage(s.handleExport))
			r.With(s.heavyQuery).Get("/evidence/{file}", s.withMessage(s.handleEvidence))
			r.With(s.heavyQuery, s.exportSlot).Get("/evidence.zip", s.withMessage(s.handleEvidenceZIP))
			r.Post("/remind", s.withMessage(s.handleRemind))
			r.Post("/recall", s.withMessage(s.handleRecall))
			r.Get("/events", s.withMessage(s.handleEvents))
			r.Get("/follow_up", s.withMessage(s.handleGetFollowUp))
			r.Put("/follow_up", s.withMessage(s.handlePutFollowUp))
			r.Post("/follow_up/cancel-round", s.withMessage(s.handleCancelRound))
		})
		r.Get("/directory/departments", s.handleDirectoryDepartments)
		r.Get("/directory/tags", s.handleDirectoryTags)
		r.Get("/directory/people", s.handleDirectoryPeople)
		r.Post("/audience/preview", s.handleAudiencePreview)
		r.Post("/audience/parse-list", s.handleParseList)
		r.Get("/audit", s.handleAudit)
		// An upload holds up to 20 MB in memory: bounded like a heavy query.
		r.With(s.heavyQuery).Post("/attachments", s.handleUploadAttachment)
		r.Post("/content/preview", s.handlePreviewContent)
		r.Get("/templates", s.handleListTemplates)
		r.Post("/templates", s.handleCreateTemplate)
		r.Get("/templates/{id}", s.handleTemplate)
		r.Put("/templates/{id}", s.handleTemplate)
		r.Delete("/templates/{id}", s.handleTemplate)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusNotFound, "not found") })
	return r
}

// Write deadlines. The dashboard's server has no WriteTimeout of its own
// (cmd builds it) because three routes outlive any fixed one: the live
// stream, the CSV export (each chunk gets ExportStall) and a registration
// that sends (registerTimeout).
const (
	DefaultWriteTimeout = time.Minute
	DefaultExportStall  = 30 * time.Second
)

// writeDeadline gives every request the write timeout to be answered; the
// long routes set their own.
func (s *Server) writeDeadline(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout))
		next.ServeHTTP(w, r)
	})
}

// noListing serves files only: a directory (its path ends in "/", or it is
// the root) is 404 instead of a listing of what the binary embeds.
func noListing(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			writeError(w, http.StatusNotFound, "not found")
			return
		}
		next.ServeHTTP(w, r)
	})
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
	// auditFailures counts audit writes that failed.
	auditFailures prometheus.Counter
}

// routeNames are the chi patterns, pre-set to 0 in the metrics. Requests
// refused before routing (401) count under "/api/v1/*".
var routeNames = []string{
	"/login", "/logout", "/", "/m/{msgid}", "/static/*", "/lang", "/i18n/*",
	"/api/v1/*", "/api/v1/messages", "/api/v1/messages/{msgid}", "/api/v1/messages/{msgid}/progress",
	"/api/v1/messages/{msgid}/departments", "/api/v1/messages/{msgid}/recipients",
	"/api/v1/messages/{msgid}/export.csv", "/api/v1/messages/{msgid}/remind", "/api/v1/messages/{msgid}/recall",
	"/api/v1/messages/{msgid}/events", "/api/v1/attachments", "/api/v1/messages/{msgid}/content", "/api/v1/content/preview",
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	m := &metrics{
		requests: f.CounterVec("yidu_dashboard_requests_total", "Dashboard HTTP requests by route pattern and status.", "route", "status"),
		duration: f.HistogramVec("yidu_dashboard_request_seconds", "Dashboard request time by route (SSE streams excluded).",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30}, "route"),
		streams:       f.Gauge("yidu_dashboard_sse_streams", "Open /events streams."),
		exportRows:    f.Counter("yidu_dashboard_export_rows_total", "CSV rows written by export.csv."),
		reminded:      f.Counter("yidu_dashboard_reminded_total", "People sent a reminder."),
		logins:        f.CounterVec("yidu_dashboard_logins_total", "Sign-in attempts by result.", "result"),
		auditFailures: f.Counter("yidu_dashboard_audit_failures_total", "Audit events that could not be written (each also logged at error level)."),
	}
	metric.Preset(m.requests.MetricVec, routeNames, []string{"200"})
	metric.Preset(m.duration.MetricVec, routeNames)
	metric.Preset(m.logins.MetricVec, []string{"ok", "bad_password", "rate_limited"})
	return m, f.Err("dashboard")
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
	errUnavailable = progress.ErrUnavailable
	// errForbidden: the caller sees the notice but its role may not
	// change it (a viewer, a leader, a sender of another app).
	errForbidden = errors.New("your role may not change this notice")
)

func httpStatus(err error) (int, string) {
	switch {
	case errors.Is(err, errBadParam):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, progress.ErrUnknownDepartment):
		return http.StatusBadRequest, errBadParam.Error() + ": " + err.Error()
	case errors.Is(err, errTooLarge):
		return http.StatusRequestEntityTooLarge, err.Error()
	case errors.Is(err, errNotFound):
		return http.StatusNotFound, "not found"
	case errors.Is(err, errForbidden):
		return http.StatusForbidden, errForbidden.Error()
	case errors.Is(err, yidu.ErrInvalid):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, yidu.ErrRateLimited):
		return http.StatusTooManyRequests, "WeCom's sending limit for this app is reached, try later"
	case errors.Is(err, yidu.ErrNoSender):
		return http.StatusServiceUnavailable, "sending through WeCom is not configured"
	case errors.Is(err, yidu.ErrConflict):
		return http.StatusConflict, "msgid exists with a different audience, title, body or url"
	case errors.Is(err, yidu.ErrNotEditable):
		return http.StatusConflict, "the notice started sending or ended: it can no longer be changed"
	case errors.Is(err, yidu.ErrNotFound):
		return http.StatusNotFound, "not found"
	case errors.Is(err, campaign.ErrForbidden):
		return http.StatusForbidden, strings.TrimPrefix(err.Error(), campaign.ErrForbidden.Error()+": ")
	case errors.Is(err, campaign.ErrBusy):
		return http.StatusTooManyRequests, campaign.ErrBusy.Error()
	case errors.Is(err, campaign.ErrApproval):
		return http.StatusConflict, err.Error()
	case errors.As(err, new(*campaign.TooSoonError)):
		return http.StatusTooManyRequests, err.Error()
	case errors.Is(err, campaign.ErrNoDirectory):
		return http.StatusNotImplemented, err.Error()
	case errors.Is(err, campaign.ErrNoCampaigns), errors.Is(err, campaign.ErrNoLedger), errors.Is(err, campaign.ErrNoRegistrar),
		errors.Is(err, campaign.ErrNoTemplates):
		return http.StatusServiceUnavailable, err.Error()
	case errors.Is(err, yidu.ErrRecalled):
		return http.StatusConflict, "the message was recalled"
	case errors.Is(err, yidu.ErrNotRecallable):
		return http.StatusConflict, err.Error()
	case errors.Is(err, yidu.ErrRecallIncomplete):
		return http.StatusBadGateway, err.Error()
	case errors.Is(err, context.Canceled):
		return 499, "client went away"
	case errors.Is(err, errUnavailable), errors.Is(err, context.DeadlineExceeded), backendDown(err):
		return http.StatusServiceUnavailable, "temporarily unavailable"
	}
	return http.StatusInternalServerError, "internal error"
}

// backendDown reports whether err is Redis or MySQL unreachable (refused,
// reset, closed under us): docs/api.md promises 503 for that, so clients
// retry, not a 500.
func backendDown(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// fail answers err; only 5xx is logged (without request data, which may
// hold employee names).
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := httpStatus(err)
	if code >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "route", r.URL.Path, "err", err)
	}
	if f := fieldOf(msg); f != "" && errors.Is(err, yidu.ErrInvalid) {
		writeJSON(w, code, map[string]string{"error": msg, "field": f})
		return
	}
	if ts := (*campaign.TooSoonError)(nil); errors.As(err, &ts) {
		// Everyone unread in the caller's scope was reminded within the
		// interval: when the first of them may be reminded again.
		wait := ts.Next.Sub(s.now())
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(wait.Seconds())))))
		writeJSON(w, code, map[string]any{"error": msg, "next_allowed_at": ts.Next.UTC()})
		return
	}
	if errors.Is(err, campaign.ErrBusy) {
		w.Header().Set("Retry-After", "5")
	}
	if ae := (*campaign.AudienceError)(nil); errors.As(err, &ae) {
		writeJSON(w, code, map[string]string{"error": msg, "field": ae.Field})
		return
	}
	if errors.Is(err, yidu.ErrNotEditable) {
		// The notice's state forbids it: the page shows it by the state.
		writeJSON(w, code, map[string]string{"error": msg, "field": "state"})
		return
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

// audiences is a's campaign.Audiences, nil without an Access (a nil
// *access.Access must not become a non-nil interface): campaign then
// refuses every act of a sender kept to an audience (issue 41).
