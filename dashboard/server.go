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
	"github.com/yidu-io/yidu/dashboard/i18n"
	"github.com/yidu-io/yidu/dashboard/internal/compose"
	"github.com/yidu-io/yidu/dashboard/internal/disclose"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/dashboard/internal/trail"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/internal/webedge"
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
	// EvidenceLog answers the evidence log's checkpoints and consistency
	// proofs to the corp's admins (*ledger.Ledger); nil: 404.
	EvidenceLog EvidenceLog
	// Standing shows and ends standing notices (loops.StandingLoop,
	// issue 51); nil: their endpoints answer 404.
	Standing Standing
	// ConfirmOver is dashboard.confirm_over (default DefaultConfirmOver):
	// above it the page asks to type the recipient count (GET /apps).
	ConfirmOver int
}

// EvidenceRecords makes members' evidence records, PDFs and ZIPs
// (evidence.Service) and EvidenceLog answers the evidence log's
// checkpoints and proofs (*ledger.Ledger): disclose's.
type (
	EvidenceRecords = disclose.Records
	// Attachments keeps uploaded attachments (attachment.Store): the
	// compose page's.
	Attachments = compose.Attachments
	EvidenceLog = disclose.Log
)

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
	cats                      map[string]i18n.Catalogue
	// base is what the handler groups share: the audit, the client's
	// address, the answer of an error (dashboard/internal/handle).
	base *handle.Base
	// trail answers the audit trail (dashboard/internal/trail).
	trail   *trail.Handlers
	auth    Identities
	proxies clientip.Proxies
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
	confirmOver int
	appList     []yidu.App
	closeOnce   sync.Once
	// dis serves what discloses people's data: recipients, export,
	// evidence and the evidence log (dashboard/internal/disclose).
	dis *disclose.Handlers
	// comp serves the compose page's API: the directory, audience
	// previews, pasted lists and templates (dashboard/internal/compose).
	comp     *compose.Handlers
	standing Standing
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
		pages: pages, cats: cats, auth: ids, proxies: clientip.Proxies(opts.TrustedProxies),
		publicURL: opts.PublicURL, wecomLogin: opts.WeCom,
		httpsOnly:     webedge.HTTPS(opts.PublicURL),
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
	s.base = &handle.Base{Log: s.log, Now: s.now, Audit: cmp.Or[Auditor](opts.Audit, handle.NoAudit{}),
		AuditFailures: met.auditFailures, Proxies: s.proxies, Answer: s.fail}
	for _, a := range opts.Apps {
		s.apps[a.Name] = a
	}
	s.confirmOver, s.appList = cmp.Or(opts.ConfirmOver, DefaultConfirmOver), opts.Apps
	s.wecomLimits = access.NewWeComLimiter(opts.Now)
	s.trail = trail.New(s.base, opts.AuditLog)
	s.comp = compose.New(s.base, acts, s.apps, opts.Attachments)
	s.dis = disclose.New(s.base, prog, opts.Evidence, opts.EvidenceLog, s.apps, s.exportStall, met.exportRows)
	s.standing = opts.Standing
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
	crossOrigin := webedge.CrossOrigin(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))

	guard := s.guard()
	r := chi.NewRouter()
	r.Use(s.instrument, s.writeDeadline, securityHeaders.Middleware, crossOrigin)
	r.Handle("/static/*", http.StripPrefix("/static/", noListing(http.FileServerFS(static))))
	r.Get("/login", s.handleLoginPage)
	r.Get("/lang", i18n.HandleLang(s.httpsOnly))
	r.Get("/i18n/*", i18n.HandleCatalogue(s.cats))
	r.Post("/login", s.handleLogin)
	r.Get("/login/wecom", s.handleWeComStart)
	r.Get("/login/wecom/callback", s.handleWeComCallback)
	r.Group(func(r chi.Router) {
		r.Use(guard.Page)
		r.Post("/logout", s.handleLogout)
		r.Get("/", s.handleListPage)
		r.Get("/m/{msgid}", s.handleMessagePage)
		r.Get("/new", s.handleComposePage)
		r.Get("/audit", s.handleAuditPage)
		r.Get("/approve/{msgid}", s.handleApprovePage)
	})
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(guard.API)
		r.Get("/messages", s.handleListMessages)
		r.Post("/messages", s.handleRegister)
		r.Get("/apps", s.handleApps)
		// A write declares its act (act: gate decides it) or its handler
		// asks access.Decide, before anything runs (handleRegister,
		// handleDecide, handleNudge, handleWithdraw, uploads, templates).
		r.Route("/messages/{msgid}", func(r chi.Router) {
			r.Get("/", s.handleGetNotice)
			r.With(s.act(yidu.ActionEdit)).Patch("/", s.handlePatchNotice)
			r.With(s.act(yidu.ActionCancel)).Post("/cancel", s.handleCancelNotice)
			r.With(s.act(yidu.ActionSend)).Post("/send", s.handleSendNotice)
			r.Get("/approval", s.handleGetApproval)
			r.Post("/approval", s.handleDecide)
			r.Post("/approval/preview", s.handlePreviewToMe)
			r.Post("/approval/nudge", s.handleNudge)
			r.Post("/approval/withdraw", s.handleWithdraw)
			r.Get("/progress", s.withMessage(s.handleProgress))
			r.Get("/content", s.handleContent)
			r.With(s.heavyQuery).Get("/departments", s.withMessage(s.handleDepartments))
			r.With(s.heavyQuery, s.act(yidu.ActionRecipients)).Get("/recipients", s.withMessage(s.dis.HandleRecipients))
			r.With(s.heavyQuery, s.exportSlot, s.act(yidu.ActionExport)).Get("/export.csv", s.withMessage(s.dis.HandleExport))
			r.With(s.heavyQuery, s.act(yidu.ActionEvidence)).Get("/evidence/{file}", s.withMessage(s.dis.HandleEvidence))
			r.With(s.heavyQuery, s.exportSlot, s.act(yidu.ActionEvidence)).Get("/evidence.zip", s.withMessage(s.dis.HandleEvidenceZIP))
			r.With(s.act(yidu.ActionRemind)).Post("/remind", s.withMessage(s.handleRemind))
			r.Get("/reminders", s.withMessage(s.handleReminders))
			r.With(s.act(yidu.ActionRecall)).Post("/recall", s.withMessage(s.handleRecall))
			r.Get("/events", s.withMessage(s.handleEvents))
			r.Get("/follow_up", s.withMessage(s.handleGetFollowUp))
			r.With(s.act(yidu.ActionFollowUpChange)).Put("/follow_up", s.withMessage(s.handlePutFollowUp))
			r.With(s.act(yidu.ActionFollowUpChange)).Post("/follow_up/cancel-round", s.withMessage(s.handleCancelRound))
			r.Get("/standing", s.withMessage(s.handleStanding))
			r.With(s.act(yidu.ActionEdit, standingRule)).Patch("/standing", s.withMessage(s.handleEndStanding))
		})
		r.Get("/directory/departments", s.comp.HandleDirectoryDepartments)
		r.Get("/directory/tags", s.comp.HandleDirectoryTags)
		r.Get("/directory/people", s.comp.HandleDirectoryPeople)
		r.Post("/audience/preview", s.comp.HandleAudiencePreview)
		r.Post("/audience/parse-list", s.comp.HandleParseList)
		r.Get("/audit", s.trail.HandleAudit)
		r.Get("/ledger/{corp}/checkpoint", s.dis.HandleCheckpoint)
		r.Get("/ledger/{corp}/consistency", s.dis.HandleConsistency)
		r.With(s.heavyQuery).Get("/standing", s.handleStandingRules)
		r.With(s.heavyQuery, s.exportSlot).Get("/standing.csv", s.handleStandingRules)
		// An upload holds up to 20 MB in memory: bounded like a heavy query.
		r.With(s.heavyQuery).Post("/attachments", s.comp.HandleUploadAttachment)
		r.Post("/content/preview", s.handlePreviewContent)
		r.Get("/templates", s.comp.HandleListTemplates)
		r.Post("/templates", s.comp.HandleCreateTemplate)
		r.Get("/templates/{id}", s.comp.HandleTemplate)
		r.Put("/templates/{id}", s.comp.HandleTemplate)
		r.Delete("/templates/{id}", s.comp.HandleTemplate)
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

// securityHeaders forbid framing, inline scripts and MIME sniffing; the
// page's icons are data: images.
var securityHeaders = webedge.Headers{CSP: webedge.CSP{Img: []string{"data:"}, ConnectSelf: true}, Referrer: "same-origin"}

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
	errNotFound    = handle.ErrNotFound
	errUnavailable = progress.ErrUnavailable
	// errForbidden: the caller sees the notice but its role may not
	// change it (a viewer, a leader, a sender of another app).
	errForbidden = errors.New("your role may not change this notice")
)

// answers maps the outcomes to their status and words (the web edge's
// table; an empty EN is the error's own text).
var answers = webedge.Table{
	{Err: errBadParam, Answer: webedge.Answer{Status: http.StatusBadRequest}},
	{Err: progress.ErrUnknownDepartment, Answer: webedge.Answer{Status: http.StatusBadRequest},
		Words: func(err error) string { return errBadParam.Error() + ": " + err.Error() }},
	{Err: errTooLarge, Answer: webedge.Answer{Status: http.StatusRequestEntityTooLarge}},
	{Err: errNotFound, Answer: webedge.NotFound},
	{Err: errForbidden, Answer: webedge.Answer{Status: http.StatusForbidden, EN: errForbidden.Error()}},
	{Err: yidu.ErrInvalid, Answer: webedge.Answer{Status: http.StatusBadRequest}},
	{Err: yidu.ErrRateLimited, Answer: webedge.Answer{Status: http.StatusTooManyRequests, EN: "WeCom's sending limit for this app is reached, try later"}},
	{Err: yidu.ErrNoSender, Answer: webedge.Answer{Status: http.StatusServiceUnavailable, EN: "sending through WeCom is not configured"}},
	{Err: yidu.ErrConflict, Answer: webedge.Answer{Status: http.StatusConflict, EN: "msgid exists with a different audience, title, body or url"}},
	{Err: yidu.ErrNotEditable, Answer: webedge.Answer{Status: http.StatusConflict, EN: "the notice started sending or ended: it can no longer be changed"}},
	{Err: yidu.ErrNotFound, Answer: webedge.NotFound},
	{Err: campaign.ErrForbidden, Answer: webedge.Answer{Status: http.StatusForbidden},
		Words: func(err error) string { return strings.TrimPrefix(err.Error(), campaign.ErrForbidden.Error()+": ") }},
	{Err: campaign.ErrBusy, Answer: webedge.Answer{Status: http.StatusTooManyRequests, EN: campaign.ErrBusy.Error()}},
	{Err: campaign.ErrApproval, Answer: webedge.Answer{Status: http.StatusConflict}},
	{Is: func(err error) bool { return errors.As(err, new(*campaign.TooSoonError)) }, Answer: webedge.Answer{Status: http.StatusTooManyRequests}},
	{Err: campaign.ErrNoDirectory, Answer: webedge.Answer{Status: http.StatusNotImplemented}},
	{Err: campaign.ErrNoCampaigns, Answer: webedge.Answer{Status: http.StatusServiceUnavailable}},
	{Err: campaign.ErrNoReminderLog, Answer: webedge.Answer{Status: http.StatusServiceUnavailable}},
	{Err: campaign.ErrNoRegistrar, Answer: webedge.Answer{Status: http.StatusServiceUnavailable}},
	{Err: campaign.ErrNoTemplates, Answer: webedge.Answer{Status: http.StatusServiceUnavailable}},
	{Err: yidu.ErrRecalled, Answer: webedge.Answer{Status: http.StatusConflict, EN: "the message was recalled"}},
	{Err: yidu.ErrNotRecallable, Answer: webedge.Answer{Status: http.StatusConflict}},
	{Err: yidu.ErrRecallIncomplete, Answer: webedge.Answer{Status: http.StatusBadGateway}},
	{Err: context.Canceled, Answer: webedge.Answer{Status: 499, EN: "client went away"}},
	{Err: errUnavailable, Answer: webedge.Unavailable},
	{Err: context.DeadlineExceeded, Answer: webedge.Unavailable},
	{Is: backendDown, Answer: webedge.Unavailable},
}

// httpStatus is err's status and words (answers; 500 for any other).
func httpStatus(err error) (int, string) {
	if a, ok := answers.Find(err); ok {
		return a.Status, a.EN
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
	if f := fieldOf(err); f != "" && errors.Is(err, yidu.ErrInvalid) {
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

// writeError and writeJSON answer JSON, never cached (the web edge's).
var (
	writeError = webedge.WriteError
	writeJSON  = webedge.WriteJSON
)

// audiences is a's campaign.Audiences, nil without an Access (a nil
// *access.Access must not become a non-nil interface): campaign then
// refuses every act of a sender kept to an audience (issue 41).
