package config

import (
	"time"

	"github.com/yidu-io/yidu"
)

// WeCom configures the WeCom server API yidu calls (sending, directory).
type WeCom struct {
	// APIBase is the API origin; tests and the demo point it at a fake.
	APIBase string `yaml:"api_base"`
	// OAuthBase is the origin of WeCom's OAuth2 web authorization
	// (/connect/oauth2/authorize, doc path 91022), and LoginBase that of
	// its web login (/wwlogin/sso/login, doc path 98152): sign-in with
	// WeCom (issue 31). WeCom's own by default; a fake, a proxy or a
	// test may stand in.
	OAuthBase string `yaml:"oauth_base"`
	LoginBase string `yaml:"login_base"`
	// VerifyFile is the domain verification file WeCom hands out for the
	// app's trusted domain (可信域名 → 申请校验域名: WW_verify_….txt).
	// The receiver and the dashboard serve it at their root, so nothing
	// need be put behind the ingress by hand. Empty: none served.
	VerifyFile string `yaml:"verify_file"`
}

// DefaultWeComAPI is WeCom's server API origin.
const DefaultWeComAPI = "https://qyapi.weixin.qq.com"

// Receiver configures the WeCom callback receiver.
type Receiver struct {
	Listen string `yaml:"listen"`
	// TimestampWindow bounds |now - timestamp| of a callback's query.
	TimestampWindow Duration `yaml:"timestamp_window"`
	// MaxBody is the largest callback body accepted, in bytes.
	MaxBody int64 `yaml:"max_body"`
	// Timeout bounds the work for one callback, well inside WeCom's 5 s.
	Timeout Duration `yaml:"timeout"`
	// MemberRate and MemberBurst are the per-member token bucket: reads
	// beyond it are answered 200 but not processed.
	MemberRate  float64 `yaml:"member_rate"`
	MemberBurst int     `yaml:"member_burst"`
	// PublicURL is the receiver's origin as members' browsers reach it
	// (https://yidu.example.com, optionally with a path prefix): tracked
	// links and their OAuth2 redirect_uri are built on it. Configured, never
	// taken from Host or X-Forwarded-* headers, which a client controls.
	// Empty disables tracked links.
	PublicURL string `yaml:"public_url"`
	// TrustedProxies are the proxies (addresses or CIDRs, e.g. the
	// ingress) whose X-Forwarded-For names a tracked link visitor's
	// address for the exchange rate limits; empty: the peer is the visitor.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// SpoolDir, when set, is a directory on the receiver's own volume
	// where a delta Kafka did not acknowledge is written (fsync'd) before
	// the 200, and forwarded once Kafka is back (docs/reliability.md).
	// Load defaults it to <data_dir>/spool; "off" (SpoolOff): no spool, a
	// read Kafka does not acknowledge is answered 503. Empty in a Config
	// not built by Load: no spool either.
	SpoolDir string `yaml:"spool_dir"`
	// SpoolMaxBytes bounds the spool; beyond it such a read is answered
	// 503 again.
	SpoolMaxBytes int64 `yaml:"spool_max_bytes"`
	// Warm loads every member of the configured apps' corps into the
	// receiver's UserID cache before it listens (one query per corp,
	// bounded by 10 s): a receiver restarted just before a 9:00 notice
	// would otherwise ask MySQL once per member during the storm. false:
	// the cache fills on demand (docs/benchmarks.md, issue 16).
	Warm bool `yaml:"warm"`
	// SignInRate bounds the WeCom sign-ins the reading page starts a
	// second on one receiver, all clients (burst twice that);
	// SignInClientRate those from one client address (burst four times
	// that; the address through trusted_proxies); SignInFailureRate the
	// failed code exchanges (forged, replayed or expired) of one address
	// (burst 20). Beyond any of them a member waits on a 请稍候 page that
	// retries by itself (429), never refused: each sign-in writes a state
	// to Redis, so a flood cannot fill it.
	SignInRate        float64 `yaml:"signin_rate"`
	SignInClientRate  float64 `yaml:"signin_client_rate"`
	SignInFailureRate float64 `yaml:"signin_failure_rate"`
	// SessionTTL is how long a member stays signed in to the reading
	// pages of a corp after their last visit (rolling; default 30 days).
	// Sessions are in Redis: they survive a receiver's restart, and end
	// when the member leaves the company.
	SessionTTL Duration `yaml:"session_ttl"`
	// AttachmentCacheBytes bounds the reading page's cache of attachments
	// on disk (<data_dir>/attachments); past it the least recently opened
	// are removed and read again from MySQL when asked for.
	AttachmentCacheBytes int64 `yaml:"attachment_cache_bytes"`
	// GOGC is the Go collector's target (percent of the live heap
	// allocated between collections) of a process that receives, when
	// its environment sets no GOGC: a callback or a reading page
	// allocates tens of KB, so at the 9:00 storm's rate Go's default
	// (100) collects several times a second. 0 leaves Go's own. The
	// process also takes a memory limit from its container's (cgroup)
	// when its environment sets no GOMEMLIMIT, so the larger heap stays
	// under it (package process, collector.go).
	GOGC int `yaml:"gogc"`
}

// Reading page defaults (issue 39).
const (
	// DefaultSignInRate is receiver.signin_rate's default: WeCom does not
	// limit auth/getuserinfo for a valid code (doc path 90454), so the
	// bound is the receiver's own.
	DefaultSignInRate = 1000
	// DefaultSignInClientRate is receiver.signin_client_rate's default.
	DefaultSignInClientRate = 50
	// DefaultSignInFailureRate is receiver.signin_failure_rate's default.
	DefaultSignInFailureRate = 1
	// DefaultSessionTTL is receiver.session_ttl's default.
	DefaultSessionTTL = 30 * 24 * time.Hour
	// DefaultAttachmentCacheBytes is receiver.attachment_cache_bytes'
	// default: 1 GiB, some fifty attachments of the largest size.
	DefaultAttachmentCacheBytes = 1 << 30
	// MinAttachmentCacheBytes holds the largest attachment (20 MiB).
	MinAttachmentCacheBytes = 20 << 20
	// DefaultGOGC is receiver.gogc's default, what deploy/ had set in
	// the receiver's environment since issue 16 (docs/benchmarks.md).
	DefaultGOGC = 400
)

// App is one WeCom application whose callbacks yidu receives.
type App struct {
	Name           string `yaml:"name"`
	CorpID         string `yaml:"corp_id"`
	AgentID        int64  `yaml:"agent_id"`
	Token          string `yaml:"token"`
	EncodingAESKey string `yaml:"encoding_aes_key"`
	Secret         string `yaml:"secret"`
	// ContactsSecret is the corp's contacts-sync secret (通讯录同步
	// Secret), for `yidu directory sync` only: with it the sync lists the
	// whole corp (user/list_id, doc path 96067) instead of the app's
	// visible range. Empty: the app's secret alone.
	ContactsSecret string `yaml:"contacts_secret"`
	// ReadButtonKey is the template card button key that means "read";
	// empty accepts any button of a tracked card.
	ReadButtonKey string `yaml:"read_button_key"`
	// ReadReply is what the read button says to the member once their
	// press is recorded (a passive reply, doc path 90241; default
	// DefaultReadReply).
	ReadReply string `yaml:"read_reply"`
	// ReadSignals are the signals that make the app's messages read:
	// button, link, enter_agent (yidu.ParseReadSignals); left out: button
	// and link. Every signal is recorded either way.
	ReadSignals []string `yaml:"read_signals,omitempty"`
	// Retention is how long the app's notices keep personal data after
	// they were sent ("3y", "18m", "90d"; yidu.ParseRetention) when a
	// notice names none; `yidu archive purge` anonymises them after it
	// (issue 40). Empty: kept until a purge by date.
	Retention string `yaml:"retention,omitempty"`
	// EscalationFallback are the UserIDs that get the follow-up digest of
	// the people no department leader sits above (issue 30).
	EscalationFallback []string `yaml:"escalation_fallback,omitempty"`
	// FollowUp is the follow-up policy a notice of the app gets when it
	// names none (the compose page's default); nil: none.
	FollowUp *yidu.Policy `yaml:"follow_up,omitempty"`
	// Approval makes a notice to more than over people, to 全员 or
	// (acknowledged) asking for an acknowledgement wait for another
	// person's approval (issue 41): {over: 1000, approvers: [userid…],
	// role: admin|sender, acknowledged: true}. nil: none.
	Approval *Approval `yaml:"approval,omitempty"`
	// DailyQuota is how many recipient-sends the app may make a day in
	// its zone (WeCom: seats × 200 per app, doc path 90454). Follow-up
	// rounds larger than what is left are spread over the next working
	// days. 0: the synced directory's active members × 200.
	DailyQuota int `yaml:"daily_quota,omitempty"`
	// Receipts, on unless false, sends a member who acknowledged a
	// notice on the reading page a WeCom receipt from the app: the
	// notice, its version's hash, the time and the entry's index in the
	// evidence log (issue 48).
	Receipts *bool `yaml:"receipts,omitempty"`
	// Timezone is the app's IANA time zone, in which scheduled notices
	// are entered and shown (default Asia/Shanghai).
	Timezone string `yaml:"timezone"`
}

// ReceiptsOn reports whether the app sends acknowledgement receipts
// (receipts unset: yes).
func (a App) ReceiptsOn() bool { return a.Receipts == nil || *a.Receipts }

// Signals returns the app's read signals; nil (the defaults) for a list
// Validate refuses.
func (a App) Signals() []yidu.Signal {
	s, err := yidu.ParseReadSignals(a.ReadSignals)
	if err != nil {
		return nil
	}
	return s
}

// DefaultReadReply is apps[].read_reply when left out.
const DefaultReadReply = "已读 ✓"

// maxReadReply bounds apps[].read_reply: it replaces the card's button
// text, so it is yidu.MaxButtonText's rule (button_list, doc path 90236).
const maxReadReply = yidu.MaxButtonText

// Approval is apps[].approval (yidu.Approval).
type Approval struct {
	Over         int      `yaml:"over"`
	Approvers    []string `yaml:"approvers"`
	Role         string   `yaml:"role"`
	Acknowledged bool     `yaml:"acknowledged"`
}

// Rule is a as yidu takes it; nil for nil.
func (a *Approval) Rule() *yidu.Approval {
	if a == nil {
		return nil
	}
	return &yidu.Approval{Over: a.Over, Approvers: a.Approvers, Role: yidu.Role(a.Role), Acknowledged: a.Acknowledged}
}
