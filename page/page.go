// Package page serves a notice's reading page on the receiver (issue 39):
// the member signs in with WeCom (the dashboard's sign-in, package access:
// OAuth2 snsapi_base inside WeCom's browser, the web login elsewhere), and
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
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/notice"
)

//go:embed web/page.html web/records.html web/page.css web/page.js web/pdfjs/pdf.min.mjs web/pdfjs/pdf.worker.min.mjs
var webFS embed.FS

// Reader is a member as the page needs them.
type Reader struct {
	UID  uint32
	Name string
	// Left: the member left the corp (yidu.StatusLeft).
	Left bool
}

// Readers answers who a UserID is and whether they received a notice
// (the directory and the recipients bitmap; cmd builds it over idmap and
// bitmap).
type Readers interface {
	Reader(ctx context.Context, corp, userID string) (Reader, bool, error)
	IsRecipient(ctx context.Context, corp, msgID string, uid uint32) (bool, error)
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
// version read (bitmap.Recorder).
type Reads interface {
	PageSignal(ctx context.Context, sig yidu.Signal, corpID string, agentID int64, userID, msgID string, at time.Time, ev bitmap.PageEvent) (int, error)
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
	// Redis and Prefix keep the readers' sessions.
	Redis  redis.UniversalClient
	Prefix string
	// SessionTTL is how long a reader stays signed in (default 12 h).
	SessionTTL time.Duration
	// SignInRate bounds the sign-ins this receiver starts a second (burst
	// twice that; default DefaultSignInRate): each writes a state to Redis
	// and allows one code exchange with WeCom, so a flood of visitors
	// without a session spends neither without bound (503 beyond).
	SignInRate float64
	// Archive answers what MySQL holds of a reader's page signals when
	// Redis lacks it (required).
	Archive Archive
	// DoneTTL is how long Redis keeps what a reader did on each version
	// (default 30 days, the bitmaps' TTL); the archive answers after.
	DoneTTL time.Duration
	// Records serve 我的记录 (evidence.Service); nil: 404.
	Records Records
	// Timeout bounds the recording of one signal (default
	// DefaultTimeout, the callbacks'): past it a delta Kafka has not
	// acknowledged goes to the receiver's spool instead of holding the
	// reader's request (docs/reliability.md, "Kafka down"). It is not cut
	// short when the browser goes: a signal given is kept.
	Timeout time.Duration
	Logger  *slog.Logger
	Now     func() time.Time
}

// DefaultSignInRate is Options.SignInRate's default, as the tracked
// links' code exchanges (callback.DefaultLinkExchangeRate).
const DefaultSignInRate = 100

// Server serves the reading pages.
type Server struct {
	signIns *rate.Limiter
	readers Readers
	notices Notices
	blobs   Blobs
	reads   Reads
	archive Archive
	oauth   OAuth
	audit   Auditor
	opts    Options
	apps    map[string]App
	tmpl    *template.Template
	log     *slog.Logger
	secure  bool
	// origin is PublicURL's scheme://host, the only Origin an event may
	// carry.
	origin string
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
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.SignInRate <= 0 {
		opts.SignInRate = DefaultSignInRate
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	tmpl, err := template.ParseFS(webFS, "web/page.html", "web/records.html")
	if err != nil {
		return nil, fmt.Errorf("page: template: %w", err)
	}
	s := &Server{signIns: rate.NewLimiter(rate.Limit(opts.SignInRate), max(1, int(2*opts.SignInRate))), readers: readers, notices: notices, blobs: blobs, reads: reads, archive: opts.Archive, oauth: oauth, audit: aud, opts: opts,
		apps: map[string]App{}, tmpl: tmpl, log: opts.Logger.With("component", "page"),
		secure: strings.HasPrefix(strings.ToLower(opts.PublicURL), "https://")}
	if u, err := url.Parse(opts.PublicURL); err == nil {
		s.origin = u.Scheme + "://" + u.Host
	}
	for _, a := range opts.Apps {
		s.apps[a.Name] = a
	}
	return s, nil
}

// Routes returns the reading pages' handler, paths under /r/.
func (s *Server) Routes() http.Handler {
	r := chi.NewRouter()
	r.Use(headers)
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
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { http.Error(w, "not found", http.StatusNotFound) })
	return r
}

func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

const (
	sessionCookie = "yidu_read"
	nonceCookie   = "yidu_read_login"
)

// session is a reader's sign-in, kept in Redis under its id's hash.
type session struct {
	Corp   string `json:"corp"`
	UserID string `json:"userid"`
}

func (s *Server) sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return s.opts.Prefix + "page:session:" + hex.EncodeToString(sum[:])
}

func (s *Server) sessionOf(r *http.Request) (session, bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return session{}, false, nil
	}
	raw, err := s.opts.Redis.Get(r.Context(), s.sessionKey(c.Value)).Bytes()
	if errors.Is(err, redis.Nil) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, fmt.Errorf("page: session: %w", err)
	}
	var sess session
	if err := json.Unmarshal(raw, &sess); err != nil {
		return session{}, false, fmt.Errorf("page: session: %w", err)
	}
	return sess, true, nil
}

// signInPath is where WeCom sends the reader back for app.
func (s *Server) redirectURI(app string) string {
	return strings.TrimRight(s.opts.PublicURL, "/") + "/r/" + url.PathEscape(app) + "/signin"
}

// startSignIn sends the browser to WeCom's sign-in, bound to it by a
// nonce cookie; it comes back to next, a path of this app's pages.
func (s *Server) startSignIn(w http.ResponseWriter, r *http.Request, a App) {
	if !s.signIns.Allow() {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "访问人数较多，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	state, nonce, err := s.opts.States.Begin(r.Context(), a.CorpID, r.URL.RequestURI())
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: sign-in start", "err", err)
		http.Error(w, "暂时无法登录，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: nonceCookie, Value: nonce, Path: "/r/", MaxAge: int(access.StateTTL.Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	to := s.opts.Endpoints.LoginURL(a.CorpID, a.AgentID, s.redirectURI(a.Name), state)
	if access.InWeCom(r.UserAgent()) {
		to = s.opts.Endpoints.AuthorizeURL(a.CorpID, a.AgentID, s.redirectURI(a.Name), state)
	}
	http.Redirect(w, r, to, http.StatusFound)
}

func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ctx := r.Context()
	nonce := ""
	if c, err := r.Cookie(nonceCookie); err == nil {
		nonce = c.Value
	}
	http.SetCookie(w, &http.Cookie{Name: nonceCookie, Value: "", Path: "/r/", MaxAge: -1, HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	q := r.URL.Query()
	code := q.Get("code")
	next, corp, err := s.opts.States.Finish(ctx, q.Get("state"), nonce)
	if err == nil && (corp != a.CorpID || code == "" || len(code) > 512 || !strings.HasPrefix(next, "/r/"+a.Name+"/")) {
		err = access.ErrBadState
	}
	if err == nil {
		err = s.opts.States.UseCode(ctx, code)
	}
	var userID string
	if err == nil {
		userID, err = s.oauth.UserID(ctx, a.CorpID, a.AgentID, code)
		if err == nil && userID == "" {
			err = access.ErrNotMember
		}
	}
	switch {
	case errors.Is(err, access.ErrBadState), errors.Is(err, access.ErrCodeUsed):
		http.Error(w, "登录已失效，请重新打开通知", http.StatusBadRequest)
		return
	case errors.Is(err, access.ErrNotMember):
		http.Error(w, "您不是本企业成员", http.StatusForbidden)
		return
	case err != nil:
		s.log.ErrorContext(ctx, "page: sign-in", "err", err)
		http.Error(w, "暂时无法登录，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	id := base64.RawURLEncoding.EncodeToString(b[:])
	raw, _ := json.Marshal(session{Corp: a.CorpID, UserID: userID})
	if err := s.opts.Redis.Set(ctx, s.sessionKey(id), raw, s.opts.SessionTTL).Err(); err != nil {
		s.log.ErrorContext(ctx, "page: session", "err", err)
		http.Error(w, "暂时无法登录，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/r/", MaxAge: int(s.opts.SessionTTL.Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, next, http.StatusFound)
}

// reader returns the signed-in reader of app's msgid, or answers for the
// request itself (sign-in, 404, 503) and returns ok false.
func (s *Server) reader(w http.ResponseWriter, r *http.Request, a App, msgID string, startSignIn bool) (session, Reader, bool) {
	sess, ok, err := s.sessionOf(r)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: session", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return session{}, Reader{}, false
	}
	if !ok || sess.Corp != a.CorpID {
		if startSignIn {
			s.startSignIn(w, r, a)
		} else {
			http.Error(w, "not found", http.StatusNotFound)
		}
		return session{}, Reader{}, false
	}
	rd, found, err := s.readers.Reader(r.Context(), a.CorpID, sess.UserID)
	recipient := false
	if err == nil && found && !rd.Left {
		recipient, err = s.readers.IsRecipient(r.Context(), a.CorpID, msgID, rd.UID)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: reader", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return session{}, Reader{}, false
	}
	if !recipient {
		detail := "not a recipient"
		if found && rd.Left {
			detail = "left the company"
		} else if !found {
			detail = "not in the directory"
		}
		if err := s.audit.Record(r.Context(), audit.Event{At: s.opts.Now(), Actor: sess.UserID, ActorKind: "wecom", Action: yidu.ActionPageDenied,
			CorpID: a.CorpID, App: a.Name, MsgID: msgID, Outcome: "denied", Detail: detail, UserAgent: yidu.Truncate(r.UserAgent(), 255)}); err != nil {
			s.log.ErrorContext(r.Context(), "page: audit", "err", err)
		}
		http.Error(w, "not found", http.StatusNotFound)
		return session{}, Reader{}, false
	}
	return sess, rd, true
}

// pageView is what the template shows.
type pageView struct {
	Title        string
	Text         template.HTML
	Version      int
	Versions     int
	SHA256       string
	Images, PDFs []attachmentView
	Reader       string
	UserID       string
	At           string
	Watermark    []int
	// View is the token the page's events name; Ended and Acked what
	// the reader already did on this version; MinRead the seconds before
	// #ack may be pressed; Events the events' path relative to the page.
	View         string
	Events       string
	Ended, Acked bool
	MinRead      int
}

type attachmentView struct {
	Name, Href, Size string
}

func (s *Server) handleView(w http.ResponseWriter, r *http.Request) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	msgID := chi.URLParam(r, "msgid")
	if !ok || !yidu.MsgID(msgID).Valid() {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	n := 0
	if q := r.URL.Query().Get("v"); q != "" {
		var err error
		if n, err = strconv.Atoi(q); err != nil || n < 1 || len(q) > 9 {
			http.Error(w, "v is a version number", http.StatusBadRequest)
			return
		}
	}
	sess, rd, ok := s.reader(w, r, a, msgID, true)
	if !ok {
		return
	}
	v, err := s.notices.Get(r.Context(), a.CorpID, msgID, n)
	if errors.Is(err, notice.ErrNotFound) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: version", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	all, err := s.notices.List(r.Context(), a.CorpID, msgID)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: versions", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	now := s.opts.Now()
	token, ended, acked, err := s.beginView(r.Context(), view{App: a.Name, Corp: a.CorpID, MsgID: msgID, UserID: sess.UserID, UID: rd.UID,
		Version: v.N, ShownMs: now.UnixMilli(), MinRead: v.Settings.MinReadSeconds, Material: material(all)})
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: view", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	// The page was opened: the signal link with the version shown, as the
	// tracked link's landing records it (best-effort: the reader must
	// reach the text).
	lctx, cancel := s.signalContext(r)
	defer cancel()
	if _, err := s.reads.PageSignal(lctx, yidu.SignalLink, a.CorpID, a.AgentID, sess.UserID, msgID, now,
		bitmap.PageEvent{Version: v.N, IP: clientIP(r), UserAgent: r.UserAgent()}); err != nil {
		s.log.ErrorContext(r.Context(), "page: link not recorded", "app", a.Name, "msgid", msgID, "err", err)
	}
	out := pageView{Title: v.Title, Text: template.HTML(v.HTML), Version: v.N, Versions: len(all), SHA256: v.SHA256.String(), // #nosec: sanitized by content.Render
		Reader: rd.Name, UserID: sess.UserID, At: now.In(shanghai).Format("2006-01-02 15:04"), Watermark: make([]int, 24),
		View: token, Events: url.PathEscape(msgID) + "/events", Ended: ended, Acked: acked, MinRead: v.Settings.MinReadSeconds}
	for _, att := range v.Attachments {
		av := attachmentView{Name: att.Name, Href: url.PathEscape(msgID) + "/a/" + att.SHA256, Size: size(att.Size)}
		if att.Type.Image() {
			out.Images = append(out.Images, av)
		} else {
			out.PDFs = append(out.PDFs, av)
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, "page.html", out); err != nil {
		s.log.ErrorContext(r.Context(), "page: render", "err", err)
	}
}

// material returns the latest material version of a notice (1 when no
// later version is material).
func material(all []notice.Version) int {
	m := 1
	for _, v := range all {
		if v.Reacknowledge && v.N > m {
			m = v.N
		}
	}
	return m
}

var shanghai = func() *time.Location {
	l, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		return time.FixedZone("CST", 8*3600)
	}
	return l
}()

func size(n int64) string {
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	}
	return strconv.FormatInt(max(1, (n+512)/1024), 10) + " KB"
}

// handleAttachment serves an attachment of one of the notice's versions to
// a recipient, from the disk cache.
func (s *Server) handleAttachment(w http.ResponseWriter, r *http.Request) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	msgID := chi.URLParam(r, "msgid")
	sum, err := content.ParseHash(chi.URLParam(r, "sha"))
	if !ok || !yidu.MsgID(msgID).Valid() || err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if _, _, ok := s.reader(w, r, a, msgID, false); !ok {
		return
	}
	all, err := s.notices.List(r.Context(), a.CorpID, msgID)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: versions", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	var att *attachment.Attachment
	for _, v := range all {
		for i := range v.Attachments {
			if v.Attachments[i].SHA256 == sum.String() {
				att = &v.Attachments[i]
			}
		}
	}
	if att == nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	f, err := s.blobs.Open(r.Context(), sum)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: attachment", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", string(att.Type))
	w.Header().Set("Content-Disposition", "inline; filename*=UTF-8''"+url.PathEscape(att.Name))
	w.Header().Set("Content-Security-Policy", "sandbox; default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; plugin-types application/pdf")
	http.ServeContent(w, r, "", time.Time{}, f)
}

// maxEventBody bounds an event's body.
const maxEventBody = 1 << 10

// handleEvent takes an event of the reading page (see events.go): a JSON
// body from the page's own script, with the reader's session cookie.
func (s *Server) handleEvent(w http.ResponseWriter, r *http.Request) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	msgID := chi.URLParam(r, "msgid")
	if !ok || !yidu.MsgID(msgID).Valid() {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	// A cross-site page can neither send the cookie (SameSite=Lax) nor
	// this content type without a preflight this server never answers.
	if mt := strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0]); !strings.EqualFold(mt, "application/json") ||
		r.Header.Get("Sec-Fetch-Site") == "cross-site" || (r.Header.Get("Origin") != "" && r.Header.Get("Origin") != s.origin) {
		eventError(w, http.StatusForbidden, "cross_site", "请求来源不正确")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEventBody))
	if err != nil {
		eventError(w, http.StatusRequestEntityTooLarge, "too_large", "请求过大")
		return
	}
	ev, err := ParseEvent(body)
	if err != nil {
		eventError(w, http.StatusBadRequest, "bad_event", "事件格式不正确")
		return
	}
	ev.IP, ev.UserAgent = clientIP(r), r.UserAgent()
	sess, ok, err := s.sessionOf(r)
	if err == nil && !ok {
		err = ErrNoSession
	}
	if err == nil {
		ctx, cancel := s.signalContext(r)
		err = s.record(ctx, sess, a, msgID, ev)
		cancel()
	}
	for _, e := range eventErrors {
		if errors.Is(err, e.err) {
			eventError(w, e.status, e.code, e.message)
			return
		}
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: event", "app", a.Name, "msgid", msgID, "signal", ev.Signal.String(), "err", err)
		w.Header().Set("Retry-After", "1")
		eventError(w, http.StatusServiceUnavailable, "unavailable", "暂时无法记录，请稍后再试")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "event": ev.Signal.String(), "version": ev.Version})
}

// DefaultTimeout is Options.Timeout's default, the callbacks'
// (callback.DefaultTimeout).
const DefaultTimeout = 3 * time.Second

// signalContext bounds the recording of one signal of r by
// Options.Timeout, detached from r's cancellation.
func (s *Server) signalContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(r.Context()), s.opts.Timeout)
}

// eventErrors maps the events' outcomes to their answers (one table).
var eventErrors = []struct {
	err     error
	status  int
	code    string
	message string
}{
	{ErrNoSession, http.StatusUnauthorized, "no_session", "未登录，请重新打开通知"},
	{ErrUnknownView, http.StatusForbidden, "unknown_view", "页面已过期，请刷新"},
	{ErrNotYourView, http.StatusForbidden, "not_your_view", "无权记录他人的阅读"},
	{ErrVersionNotShown, http.StatusConflict, "version_not_shown", "页面未显示该版本"},
	{ErrNotReadToEnd, http.StatusConflict, "not_read_to_end", "请先阅读到底"},
	{ErrTooSoon, http.StatusConflict, "too_soon", "阅读时间不足"},
	{ErrAlreadyAcknowledged, http.StatusConflict, "already_acknowledged", "已确认过本版本"},
	{ErrBadEvent, http.StatusBadRequest, "bad_event", "事件格式不正确"},
}

func eventError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": message})
}

// clientIP is the address the request came from (no proxy header is
// trusted).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// static serves an embedded asset (the style sheet, the page's script and
// the vendored pdf.js: no CDN).
func (s *Server) static(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := webFS.ReadFile(name)
		if err != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "public, max-age=300")
		_, _ = w.Write(b)
	}
}
