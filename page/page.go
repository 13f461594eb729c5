// Package page serves a notice's reading page on the receiver (issue 39):
// the member signs in with WeCom (the dashboard's sign-in, the web edge's
// internal/webedge over package access: OAuth2 snsapi_base inside WeCom's
// browser, the web login elsewhere), and
// reads the version's title, text and attachments under a watermark with
// their name, UserID and the time. No identity travels in a URL: the
// session is a cookie of the receiver's host. A visitor who is not a
// recipient, or has left, gets 404 and an audit row.
//
// Opening the page records the signal link through the read path, as the
// tracked link's landing does, with the version shown. The page posts the
// signals read_to_end (the end of the text and the last page of every
// attachment were on screen) and acknowledged (#ack, 我已阅读并知悉) to
// POST /r/<app>/<msgid>/events; see events.go for what each event must
// show before it is recorded. Each is answered 200 only once durable
// (Redis and Kafka, or the receiver's spool), as a card press.
package page

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/notice"
)

//go:embed web/page.html web/wait.html web/records.html web/page.css web/page.js web/pdfjs/pdf.min.mjs web/pdfjs/pdf.worker.min.mjs
var webFS embed.FS

// Reader is a member as the page needs them.
type Reader struct {
	UID  uint32
	Name string
	// Left: the member left the corp (yidu.StatusLeft).
	Left bool
}

// Readers answers who a UserID is (at sign-in), whether they received a
// notice, and which app sent it (the directory, the recipients bitmap
// and the message's meta; cmd builds it over idmap and bitmap).
type Readers interface {
	// Reader may answer from a copy of the directory kept current
	// (idmap's roster); fresh asks the directory itself (MySQL).
	Reader(ctx context.Context, corp, userID string, fresh bool) (Reader, bool, error)
	// QueueRecipient queues on p, a pipeline of Options.Redis, the check
	// that uid is a recipient of msgID, so that it shares the round trip
	// of the page's own commands; answer says once p has run (asking
	// MySQL when Redis lacks the notice). It may queue nothing.
	QueueRecipient(ctx context.Context, p redis.Pipeliner, corp, msgID string, uid uint32) (answer func() (bool, error))
	// NoticeApp names the app that sent msgID (found false: no such
	// notice).
	NoticeApp(ctx context.Context, corp, msgID string) (app string, found bool, err error)
}

// Marks runs a script, or a pipeline's commands, in a pipeline shared
// with others (bitmap.Store): Pipelined returns once fn's commands ran
// (each command's error its own), or with an error when they are not to
// be read.
type Marks interface {
	Script(ctx context.Context, script *redis.Script, keys []string, args ...any) error
	// ScriptMerged runs script on key with fixed and items; the calls of
	// one group may run as one call with every caller's key and items
	// (bitmap.Store.ScriptMerged).
	ScriptMerged(ctx context.Context, group string, script *redis.Script, key string, fixed []any, items ...any) error
	Pipelined(ctx context.Context, fn func(p redis.Pipeliner)) error
}

// ownRoundTrip runs each in a round trip of its own.
type ownRoundTrip struct{ rdb redis.UniversalClient }

func (o ownRoundTrip) Script(ctx context.Context, script *redis.Script, keys []string, args ...any) error {
	return script.Run(ctx, o.rdb, keys, args...).Err()
}

func (o ownRoundTrip) ScriptMerged(ctx context.Context, _ string, script *redis.Script, key string, fixed []any, items ...any) error {
	return script.Run(ctx, o.rdb, []string{key}, append(append([]any{}, fixed...), items...)...).Err()
}

func (o ownRoundTrip) Pipelined(ctx context.Context, fn func(p redis.Pipeliner)) error {
	p := o.rdb.Pipeline()
	fn(p)
	_, _ = p.Exec(ctx) // each command's error is its own
	return nil
}

// Notices are the versions of a notice's content (notice.Store).
type Notices interface {
	Get(ctx context.Context, corp, msgid string, n int) (notice.Version, error)
	List(ctx context.Context, corp, msgid string) ([]notice.Version, error)
}

// Blobs opens an attachment's bytes by hash (attachment.Cache).
type Blobs interface {
	Open(ctx context.Context, sum content.Hash) (*os.File, error)
}

// Reads records the page's signals through the read path, with the
// version read (bitmap.Recorder); recorded false: nothing was kept (not a
// recipient, another app's notice).
type Reads interface {
	PageSignal(ctx context.Context, sig yidu.Signal, corpID string, agentID int64, userID, msgID string, at time.Time, ev bitmap.PageEvent) (newReads int, recorded bool, err error)
}

// OAuth exchanges a sign-in code for a UserID (wecom.OAuth, doc path
// 91023); "" for someone outside the corp.
type OAuth interface {
	UserID(ctx context.Context, corpID string, agentID int64, code string) (string, error)
}

// Auditor records the refused visits (audit.MySQL).
type Auditor interface {
	Record(ctx context.Context, e audit.Event) error
}

// App is a WeCom app whose notices have reading pages.
type App struct {
	Name    string
	CorpID  string
	AgentID int64
	// ViewKey signs the app's views (viewtoken.go): the same on every
	// replica, ViewKey(Name, secret, EncodingAESKey); at least 16 bytes.
	ViewKey []byte
}

// Options configures a Server.
type Options struct {
	// PublicURL is the receiver as browsers reach it
	// (receiver.public_url); the sign-in's redirect_uri is built on it,
	// never on the request.
	PublicURL string
	Apps      []App
	Endpoints access.Endpoints
	// States keeps started sign-ins and used codes (access.States, shared
	// with the dashboard's sign-in).
	States *access.States
	// Redis and Prefix keep the readers' sessions, views and what each
	// reader did.
	Redis  redis.UniversalClient
	Prefix string
	// SessionTTL is how long a reader stays signed in after their last
	// visit (receiver.session_ttl; default DefaultSessionTTL, 30 days).
	SessionTTL time.Duration
	// Sessions keeps the sessions (nil: NewSessions on Redis, with
	// SessionTTL); give the one the directory revokes.
	Sessions *Sessions
	// Current keeps each notice's current version numbers (nil:
	// NewCurrentVersions on Redis); whoever publishes versions tells it.
	Current *CurrentVersions
	// TrustedProxies are the proxies whose X-Forwarded-For names the
	// member's address (receiver.trusted_proxies): the address every page
	// signal records and the sign-in bounds count by.
	TrustedProxies clientip.Proxies
	// SignInRate bounds the sign-ins this receiver starts a second, all
	// clients (burst twice that; default DefaultSignInRate);
	// ClientSignInRate those of one client address (burst four times
	// that; default DefaultClientSignInRate); FailedSignInRate the failed
	// exchanges of one address (burst 20; default
	// DefaultFailedSignInRate). Beyond one, a sign-in waits on a 请稍候
	// page that retries by itself: never refused.
	SignInRate       float64
	ClientSignInRate float64
	FailedSignInRate float64
	// Archive answers what MySQL holds of a reader's page signals when
	// Redis lacks it (required).
	Archive Archive
	// DoneTTL is how long Redis keeps what a reader did on each version
	// (default 30 days, the bitmaps' TTL); the archive answers after.
	DoneTTL time.Duration
	// Marks runs the page's Redis commands (a sign-in's state, code and
	// session too) in a pipeline shared with the
	// read path's concurrent marks (bitmap.Store's Script and Pipelined),
	// on the same Redis as Redis: no round trip of their own. nil: round
	// trips of their own on Redis.
	Marks Marks
	// Records serve 我的记录 (evidence.Service); nil: 404.
	Records Records
	// Timeout bounds the recording of one signal (default
	// DefaultTimeout, the callbacks'): past it a delta Kafka has not
	// acknowledged goes to the receiver's spool instead of holding the
	// reader's request (docs/reliability.md, "Kafka down"). It is not cut
	// short when the browser goes: a signal given is kept.
	Timeout    time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	Now        func() time.Time
	// Links sends browsers to object storage for attachments' bytes
	// (attachments.s3); nil: the receiver serves them.
	Links Links
	// AttachmentIndex bounds the attachments of notices kept in memory
	// (default DefaultAttachmentIndex).
	AttachmentIndex int
}

// viewTTL is how long a page's view token stays good: a page left open
// longer is refreshed before its events count.
const viewTTL = 12 * time.Hour

// Server serves the reading pages.
type Server struct {
	readers  Readers
	notices  Notices
	blobs    Blobs
	reads    Reads
	archive  Archive
	oauth    OAuth
	audit    Auditor
	opts     Options
	sessions *Sessions
	vers     *versions
	lim      *limits
	m        *metrics
	// noticeApps and pages keep what never changes: the app of each
	// notice, each version's page rendered (see render.go).
	noticeApps *memo[string, string]
	pages      *memo[pageKey, *rendered]
	// recent are the sessions pages were just served with (eventSession).
	recent *memo[string, recentSession]
	slots  slotNames
	apps   map[string]App
	// views signs and checks each app's views.
	views  map[string]*viewSigner
	tmpl   *template.Template
	log    *slog.Logger
	secure bool
	// origin is PublicURL's scheme://host, the only Origin an event may
	// carry.
	origin      string
	attachments *attachmentIndex
}

// New returns a Server.
func New(readers Readers, notices Notices, blobs Blobs, reads Reads, oauth OAuth, aud Auditor, opts Options) (*Server, error) {
	if readers == nil || notices == nil || blobs == nil || reads == nil || oauth == nil || aud == nil || opts.States == nil || opts.Redis == nil || opts.Archive == nil {
		return nil, errors.New("page: readers, notices, blobs, reads, oauth, audit, states, redis and archive are required")
	}
	if opts.DoneTTL <= 0 {
		opts.DoneTTL = 30 * 24 * time.Hour
	}
	if _, err := url.Parse(opts.PublicURL); err != nil || !strings.HasPrefix(opts.PublicURL, "http") {
		return nil, errors.New("page: public_url must be an absolute http(s) URL")
	}
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	if opts.Sessions == nil {
		opts.Sessions = NewSessions(opts.Redis, opts.Prefix, opts.SessionTTL)
	}
	opts.SessionTTL = opts.Sessions.TTL()
	if opts.Current == nil {
		opts.Current = NewCurrentVersions(opts.Redis, opts.Prefix)
	}
	if opts.SignInRate <= 0 {
		opts.SignInRate = DefaultSignInRate
	}
	if opts.ClientSignInRate <= 0 {
		opts.ClientSignInRate = DefaultClientSignInRate
	}
	if opts.FailedSignInRate <= 0 {
		opts.FailedSignInRate = DefaultFailedSignInRate
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Marks == nil {
		opts.Marks = ownRoundTrip{opts.Redis}
	}
	// A sign-in's state and code ride the shared pipeline too.
	opts.States = opts.States.Through(opts.Marks.Pipelined)
	tmpl, err := template.ParseFS(webFS, "web/page.html", "web/records.html", "web/wait.html")
	if err != nil {
		return nil, fmt.Errorf("page: template: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Server{readers: readers, notices: notices, blobs: blobs, reads: reads, archive: opts.Archive, oauth: oauth, audit: aud, opts: opts,
		sessions: opts.Sessions, vers: &versions{notices: notices, cur: opts.Current, byN: newMemo[versionKey, notice.Version](4096)},
		lim: newLimits(opts), m: m, noticeApps: newMemo[string, string](1 << 16), pages: newMemo[pageKey, *rendered](1024), slots: newSlotNames(),
		recent: newMemo[string, recentSession](1 << 16),
		apps:   map[string]App{}, views: map[string]*viewSigner{}, tmpl: tmpl, log: opts.Logger.With("component", "page"),
		secure: webedge.HTTPS(opts.PublicURL), origin: webedge.Origin(opts.PublicURL)}
	for _, a := range opts.Apps {
		if len(a.ViewKey) < minViewKey {
			return nil, fmt.Errorf("page: app %q has no view key (its secret signs the views)", a.Name)
		}
		s.apps[a.Name] = a
		s.views[a.Name] = newViewSigner(a.ViewKey)
	}
	s.attachments = newAttachmentIndex(opts.AttachmentIndex, s.loadAttachments)
	return s, nil
}

// csp is the page's policy: attachments' links ("" for none) are also
// fetched and shown from the object storage's origin.
func (s *Server) csp() webedge.CSP {
	if o := s.objectOrigin(); o != "" {
		return webedge.CSP{Img: []string{o}, Connect: []string{o}}
	}
	return webedge.CSP{}
}

// Routes returns the reading pages' handler, paths under /r/.
func (s *Server) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(webedge.Headers{CSP: s.csp(), Referrer: "no-referrer", NoStore: true}.Middleware)
	r.Get("/r/static/page.css", s.static("web/page.css", "text/css; charset=utf-8"))
	r.Get("/r/static/page.js", s.static("web/page.js", "text/javascript; charset=utf-8"))
	r.Get("/r/static/pdfjs/pdf.min.mjs", s.static("web/pdfjs/pdf.min.mjs", "text/javascript; charset=utf-8"))
	r.Get("/r/static/pdfjs/pdf.worker.min.mjs", s.static("web/pdfjs/pdf.worker.min.mjs", "text/javascript; charset=utf-8"))
	r.Get("/r/{app}/signin", s.handleSignIn)
	r.Get("/r/{app}/{msgid}", s.handleView)
	r.Get("/r/{app}/{msgid}/a/{sha}", s.handleAttachment)
	r.Post("/r/{app}/{msgid}/events", s.handleEvent)
	// 我的记录 (records.go): four and six segments, so no msgid is shadowed.
	r.Get("/r/{app}/records/{userid}", s.handleRecords)
	r.Get("/r/{app}/records/{userid}/{msgid}/evidence.pdf", s.handleRecordPDF)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { notFound(w) })
	return r
}

// DefaultTimeout is Options.Timeout's default, the callbacks'
// (callback.DefaultTimeout).
const DefaultTimeout = 3 * time.Second

// signalContext bounds the recording of one signal of r by
// Options.Timeout, detached from r's cancellation.
func (s *Server) signalContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.Timeout)
}

// static serves an embedded asset (the style sheet, the page's script and
// the vendored pdf.js: no CDN).
func (s *Server) static(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := webFS.ReadFile(name)
		if err != nil {
			notFound(w)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(b)
	}
}

// notFoundPage is the reading page's 404, in the member's words (issue
// 49: a non-recipient saw a bare English "not found"). It says no more
// than a 404 may: not whether the notice exists.
const notFoundPage = `<!doctype html><html lang="zh-CN"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>未找到该通知</title></head>
<body>
<h1>未找到该通知</h1>
<p>这条通知不存在、已撤回，或您不在它的接收范围内。如有疑问，请联系发送通知的部门。</p>
<p>Notice not found.</p>
</body></html>
`

// notFound answers 404 with notFoundPage.
func notFound(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, notFoundPage)
}
