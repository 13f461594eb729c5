// Package callback is yidu's WeCom callback receiver: it answers WeCom's URL
// verification, verifies, decrypts and parses event callbacks, and turns
// read signals (template_card_event, enter_agent) into ReadRecorder calls
// and change_contact into ContactApplier calls.
//
// The promise to WeCom (doc path 90238): a callback is answered 200 only
// when its effect is durable, was already applied (dedup), or the event is
// deliberately ignored; a failing or slow downstream is answered 503 so
// WeCom retries. Request outcomes are sentinel errors mapped to HTTP status,
// WeCom error code and metric label in one table (outcome.go).
package callback

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/opt"
)

// ReadRecorder turns read signals into reads; bitmap.Recorder implements it.
// It returns only when every new read of the signal is durable (bit set in
// Redis AND delta acknowledged by Kafka), so any error of a callback's
// signal is answered 503 and WeCom retries. Unknown userid, non-recipient
// or unknown msgid → (0, nil); CardPress then also says recorded=false, and
// the member's button is not changed to "read" (a repeated press of a
// recipient is recorded=true). It must honour ctx: the receiver answers 503
// at the per-callback deadline. LinkRead records a tracked link's visit
// (link.go); its error is logged and counted, the visitor still redirected.
type ReadRecorder interface {
	CardPress(ctx context.Context, corpID string, agentID int64, userID, taskID string, at time.Time) (newReads int, recorded bool, err error)
	EnterAgent(ctx context.Context, corpID string, agentID int64, userID string, at time.Time) (newReads int, err error)
	LinkRead(ctx context.Context, corpID string, agentID int64, userID, msgID string, at time.Time) (newReads int, err error)
}

// ContactApplier applies change_contact callbacks to the directory;
// idmap.Mapper implements it.
type ContactApplier interface {
	ContactChanged(ctx context.Context, corpID, changeType, userID, newUserID string, departments []int64) error
}

// Approvals applies a press on an approval card (issue 41): the card's
// TaskId is yidu.ParseApprovalTaskID's, the member FromUserName of this
// verified callback. It must be idempotent (WeCom redelivers, and the
// press may reach two receivers); an approval it refuses (not an
// approver, the author, an older version) is its to log, not an error.
type Approvals interface {
	ApprovalPress(ctx context.Context, corpID, app, userID, taskID, key string) error
}

// Deduper remembers callbacks already applied, because WeCom redelivers
// (doc path 90238). RedisDedup implements it.
type Deduper interface {
	Seen(ctx context.Context, key string) (bool, error)
	Remember(ctx context.Context, key string, ttl time.Duration) error
}

// Defaults for zero Options fields.
const (
	DefaultTimestampWindow = 10 * time.Minute
	DefaultMaxBody         = 64 << 10
	DefaultTimeout         = 3 * time.Second // well inside WeCom's 5 s (doc path 90238)
	DefaultDedupTTL        = 10 * time.Minute
	DefaultMaxMembers      = 100_000
)

// Options configure a Receiver. Apps are required.
type Options struct {
	// Apps are the WeCom apps whose callbacks arrive at /wecom/callback/{name}.
	Apps []App
	// Contacts applies change_contact; nil ignores those events.
	Contacts ContactApplier
	// Approvals applies presses on approval cards; nil ignores them.
	Approvals Approvals
	// Dedup skips redeliveries already applied; nil applies every delivery
	// (the read path is idempotent, dedup saves work).
	Dedup Deduper
	// DedupTTL is how long an applied callback is remembered (default 10 min,
	// longer than WeCom's retries).
	DedupTTL time.Duration
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers them nowhere.
	Registerer prometheus.Registerer
	// Now is the clock the timestamp window and rate limit use (default time.Now).
	Now func() time.Time
	// TimestampWindow bounds |Now - timestamp| of a callback (default 10 min).
	TimestampWindow time.Duration
	// MaxBody is the largest POST body accepted (default 64 KiB); larger → 413.
	MaxBody int64
	// Timeout bounds the downstream work of one callback (default 3 s).
	Timeout time.Duration
	// MemberRate and MemberBurst are a token bucket per corp+UserID for read
	// signals; events beyond it are answered 200 and counted, not processed.
	// MemberRate 0 disables the limit.
	MemberRate  float64
	MemberBurst int
	// MaxMembers bounds the members with a live token bucket; the least
	// recently seen is forgotten first (default 100 000).
	MaxMembers int
	// PublicURL is the receiver's origin as members' browsers reach it
	// (config receiver.public_url), on which tracked links and their OAuth2
	// redirect_uri are built; never derived from request headers. Empty
	// disables tracked links (/r/ is not served).
	PublicURL string
	// OAuth exchanges tracked links' OAuth2 codes; required with PublicURL.
	OAuth OAuth
	// OAuthBase is the host of WeCom's OAuth2 page a tracked link sends
	// the member to (config wecom.oauth_base; default DefaultOAuthBase),
	// the same host as the reading page's and the dashboard's sign-in.
	OAuthBase string
	// LinkExchangeRate bounds code exchanges per second (default
	// DefaultLinkExchangeRate, burst twice that); landings beyond it
	// redirect without recording and are counted. One link, and one client
	// address, get at most half of it, so a flood of made-up codes on one
	// link or from one address cannot spend the budget of the others.
	LinkExchangeRate float64
	// TrustedProxies are the proxies whose X-Forwarded-For names a tracked
	// link visitor's address (config receiver.trusted_proxies); empty: the
	// connection's peer is the visitor.
	TrustedProxies clientip.Proxies
}

// Receiver serves WeCom callbacks. Build it with New.
type Receiver struct {
	apps      map[string]*app
	unknown   *appMetrics // for requests naming no configured app
	reads     ReadRecorder
	contacts  ContactApplier
	approvals Approvals
	dedup     Deduper
	dedupTTL  time.Duration
	log       *slog.Logger
	now       func() time.Time
	window    time.Duration
	maxBody   int64
	timeout   time.Duration
	limit     *limiter // nil: no rate limit
	m         *metrics

	// Tracked links; oauth nil: disabled.
	publicURL string
	oauth     OAuth
	oauthBase string // no trailing slash
	exchange  *rate.Limiter
	perLink   *limiter // exchanges per app and msgid
	perAddr   *limiter // exchanges per visitor address
	proxies   clientip.Proxies
	linkWarn  *rate.Limiter // rate-limits exchange failure warnings
}

// App is one WeCom app as the receiver needs it: who it is, the callback
// secrets WeCom signs and encrypts with (加解密方案, doc path 91144), and
// the key its tracked links are signed with. The app secret itself never
// reaches the receiver.
type App struct {
	yidu.App
	Token          string
	EncodingAESKey string
	// LinkKey signs tracked links (LinkKey derives it from the app secret);
	// nil: no tracked link of the app is valid.
	LinkKey []byte
	// ReadReply is the read button's text once a member pressed it (the
	// passive reply, doc path 90241), e.g. "已读 ✓"; empty: no reply.
	ReadReply string
}

// app is one configured WeCom app with its crypto and metric handles.
type app struct {
	cfg   App
	crypt *wxcrypt.Crypter
	m     *appMetrics
}

// New checks the options and builds a Receiver that records read signals
// through reads.
func New(reads ReadRecorder, opts Options) (*Receiver, error) {
	if reads == nil {
		return nil, errors.New("callback: a ReadRecorder is required")
	}
	if len(opts.Apps) == 0 {
		return nil, errors.New("callback: no apps configured")
	}
	rc := &Receiver{
		apps:      make(map[string]*app, len(opts.Apps)),
		reads:     reads,
		contacts:  opts.Contacts,
		approvals: opts.Approvals,
		dedup:     opts.Dedup,
		dedupTTL:  orDefault(opts.DedupTTL, DefaultDedupTTL),
		log:       opts.Logger,
		now:       opts.Now,
		window:    orDefault(opts.TimestampWindow, DefaultTimestampWindow),
		maxBody:   orDefault(opts.MaxBody, DefaultMaxBody),
		timeout:   orDefault(opts.Timeout, DefaultTimeout),
	}
	opt.Logger(&rc.log)
	rc.log = rc.log.With("component", "callback")
	opt.Clock(&rc.now)
	if opts.MemberRate < 0 || opts.MemberBurst < 0 {
		return nil, errors.New("callback: negative member rate or burst")
	}
	if opts.MemberRate > 0 {
		burst := max(opts.MemberBurst, 1)
		rc.limit = newLimiter(rate.Limit(opts.MemberRate), burst, orDefault(opts.MaxMembers, DefaultMaxMembers))
	}
	if opts.PublicURL != "" {
		if opts.OAuth == nil {
			return nil, errors.New("callback: Options.OAuth is required with PublicURL")
		}
		if err := checkPublicURL(opts.PublicURL); err != nil {
			return nil, err
		}
		rc.publicURL = strings.TrimRight(opts.PublicURL, "/")
		rc.oauth = opts.OAuth
		rc.oauthBase = DefaultOAuthBase
		if opts.OAuthBase != "" {
			if err := checkPublicURL(opts.OAuthBase); err != nil {
				return nil, fmt.Errorf("callback: OAuthBase: %w", err)
			}
			rc.oauthBase = strings.TrimRight(opts.OAuthBase, "/")
		}
		r := opts.LinkExchangeRate
		if r <= 0 {
			r = DefaultLinkExchangeRate
		}
		rc.exchange = rate.NewLimiter(rate.Limit(r), max(1, int(2*r)))
		rc.perLink = newLimiter(rate.Limit(r/2), max(1, int(r)), DefaultMaxMembers)
		rc.perAddr = newLimiter(rate.Limit(r/2), max(1, int(r)), DefaultMaxMembers)
		rc.proxies = opts.TrustedProxies
		rc.linkWarn = rate.NewLimiter(rate.Every(10*time.Second), 1)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	rc.m = m
	rc.unknown = m.forApp(unknownApp)
	for _, a := range opts.Apps {
		if _, dup := rc.apps[a.Name]; dup {
			return nil, fmt.Errorf("callback: duplicate app %q", a.Name)
		}
		c, err := wxcrypt.New(a.Token, a.EncodingAESKey, a.CorpID)
		if err != nil {
			return nil, fmt.Errorf("callback: app %q: %w", a.Name, err)
		}
		rc.apps[a.Name] = &app{cfg: a, crypt: c, m: m.forApp(a.Name)}
	}
	return rc, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Routes returns the receiver's HTTP handler (cmd adds the probes,
// internal/probe):
//
//	GET  /wecom/callback/{app}    URL verification (echostr)
//	POST /wecom/callback/{app}    event callbacks
//	GET  /r/{app}/{msgid}         tracked link → WeCom OAuth2, when PublicURL is set
//	GET  /r/{app}/{msgid}/landing back from OAuth2: record the read, go to the target
func (rc *Receiver) Routes() http.Handler {
	r := chi.NewRouter()
	r.Get("/wecom/callback/{app}", rc.handleVerify)
	r.Post("/wecom/callback/{app}", rc.handleEvent)
	if rc.oauth != nil {
		r.Get("/r/{app}/{msgid}", rc.handleLink)
		r.Get("/r/{app}/{msgid}/landing", rc.handleLanding)
	}
	return r
}
