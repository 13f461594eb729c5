package callback

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
)

// Tracked links (docs/api.md, "Tracked links"). A link in a message points
// at the receiver; opening it sends the member through WeCom OAuth2, which
// tells us who they are, and on to the target page:
//
//	GET /r/{app}/{msgid}?to=U&sig=S          → 302 to WeCom's authorize URL (doc path 91022)
//	GET /r/{app}/{msgid}/landing?to=U&sig=S&code=C&state=X
//	                                          → code → UserID (91023), LinkRead, 302 to U
//
// S signs msgid and U, so yidu redirects only to targets its operators
// chose (no open redirect) and nobody can mint links for other messages.

// OAuth exchanges a WeCom OAuth2 code for the UserID of the member it was
// issued to (auth/getuserinfo, doc path 91023); wecom.OAuth
// implements it. Declared here so the receiver and its tests need no WeCom.
// A visitor who is not a member of the corp (WeCom answers an openid) is
// ("", nil). It must honour ctx.
type OAuth interface {
	UserID(ctx context.Context, corpID string, agentID int64, code string) (userID string, err error)
}

// Tracked link limits and defaults.
const (
	// DefaultLinkExchangeRate is the code exchanges per second one receiver
	// makes (burst twice that): a flood of landings with made-up codes must
	// not spend the corp's WeCom API quota.
	DefaultLinkExchangeRate = 100
	// linkSigLen is the hex characters of HMAC-SHA256 a link carries (128 bits).
	linkSigLen = 32
	// maxLinkTarget bounds a link's target URL, in bytes.
	maxLinkTarget = 2048
	// maxOAuthCode bounds the code passed on to WeCom.
	maxOAuthCode = 512
	// DefaultOAuthBase is the host of WeCom's OAuth2 page for in-house
	// apps (doc path 91022): Options.OAuthBase's default.
	DefaultOAuthBase = "https://open.weixin.qq.com"
	// authorizePath is the OAuth2 page's path on that host.
	authorizePath = "/connect/oauth2/authorize"
	// linkKeyLabel separates the link key from any other use of the secret.
	linkKeyLabel = "yidu tracked link v1\x00"
)

// Tracked link failures: nothing is recorded and nobody is redirected.
var (
	// ErrBadLink: the msgid, the target or the signature is malformed or
	// missing.
	ErrBadLink = errors.New("callback: malformed tracked link")
	// ErrLinkSignature: the signature is not the app's over msgid and target
	// (tampered, another app's, or the app has no secret).
	ErrLinkSignature = errors.New("callback: tracked link signature does not match")
)

// Results of a landing, label values of yidu_callback_link_landings_total.
// Every one of them redirects to the target.
const (
	landRead            = "read"             // a new read, durable
	landNoNewRead       = "no_new_read"      // duplicate, non-recipient, unknown member or message
	landNoCode          = "no_code"          // no (usable) OAuth2 code: opened outside WeCom, or declined
	landExchangeLimited = "exchange_limited" // over the address's, the link's or the receiver's exchange budget
	landExchangeFailed  = "exchange_failed"  // WeCom refused the code or could not be reached
	landNotMember       = "not_member"       // the visitor is not a member of the corp
	landRateLimited     = "rate_limited"     // over the member's token bucket
	landRecordFailed    = "record_failed"    // LinkRead failed: the read is lost (logged at error)
	landPage            = "page"             // the notice's own reading page: it signs in and records the read
)

var landResults = []string{landRead, landNoNewRead, landNoCode, landExchangeLimited, landExchangeFailed,
	landNotMember, landRateLimited, landRecordFailed, landPage}

// LinkKey derives app's link signing key (App.LinkKey) from its secret:
// the secret is what both ends of a link hold (the sender of messages, and
// the receiver, which needs it for the code exchange anyway), and it has
// about 256 bits. HMAC with a label keeps the key apart from the secret's
// WeCom use, and the app name binds it to the app; the secret itself never
// reaches the receiver. nil when the app has no secret: no link of it is
// valid.
func LinkKey(app, secret string) []byte {
	if secret == "" {
		return nil
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(linkKeyLabel))
	m.Write([]byte(app))
	return m.Sum(nil)
}

// linkSig returns the signature of a link to target for msgID under key:
// hex(HMAC-SHA256(key, msgID + "\n" + target))[:linkSigLen]. A msgid has
// no '\n', so the pair is unambiguous.
func linkSig(key []byte, msgID, target string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID))
	m.Write([]byte{'\n'})
	m.Write([]byte(target))
	return hex.EncodeToString(m.Sum(nil))[:linkSigLen]
}

// LinkURL returns the tracked link of message msgID of app to target, on
// the receiver's public URL (config receiver.public_url), signed with the
// app's LinkKey.
func LinkURL(publicURL, app string, key []byte, msgID, target string) (string, error) {
	if err := checkPublicURL(publicURL); err != nil {
		return "", err
	}
	if key == nil {
		return "", fmt.Errorf("callback: app %q has no secret to sign links with", app)
	}
	if err := checkLinkMsgID(msgID); err != nil {
		return "", err
	}
	if err := checkLinkTarget(target); err != nil {
		return "", err
	}
	return linkPath(strings.TrimRight(publicURL, "/"), app, msgID, "") +
		"?to=" + url.QueryEscape(target) + "&sig=" + linkSig(key, msgID, target), nil
}

// linkPath is base/r/{app}/{msgid}{suffix}; msgid needs no escaping.
func linkPath(base, app, msgID, suffix string) string {
	return base + "/r/" + url.PathEscape(app) + "/" + msgID + suffix
}

// link is a verified tracked link.
type link struct {
	msgID, to, sig string
}

// parseLink checks and verifies a link's msgid (from the path) and the
// to and sig of its raw query under key.
func parseLink(key []byte, msgID, rawQuery string) (link, error) {
	if err := checkLinkMsgID(msgID); err != nil {
		return link{}, err
	}
	to := queryValue(rawQuery, "to")
	if err := checkLinkTarget(to); err != nil {
		return link{}, err
	}
	sig := queryValue(rawQuery, "sig")
	if sig == "" {
		return link{}, fmt.Errorf("%w: no sig", ErrBadLink)
	}
	// key nil: the app has no secret; an HMAC under an empty key would be
	// anybody's to compute.
	if key == nil || len(sig) != linkSigLen || !hmac.Equal([]byte(sig), []byte(linkSig(key, msgID, to))) {
		return link{}, ErrLinkSignature
	}
	return link{msgID: msgID, to: to, sig: sig}, nil
}

// checkLinkMsgID accepts a msgid (yidu.MsgID): a message, never a send
// batch's task_id.
func checkLinkMsgID(id string) error {
	if !yidu.MsgID(id).Valid() {
		return fmt.Errorf("%w: msgid must match %s", ErrBadLink, yidu.MsgIDRule)
	}
	return nil
}

// checkLinkTarget accepts an absolute http(s) URL with a host, at most
// maxLinkTarget bytes, without spaces or control characters (it becomes a
// Location header).
func checkLinkTarget(to string) error {
	if to == "" {
		return fmt.Errorf("%w: no target (to)", ErrBadLink)
	}
	if len(to) > maxLinkTarget {
		return fmt.Errorf("%w: target longer than %d bytes", ErrBadLink, maxLinkTarget)
	}
	for i := 0; i < len(to); i++ {
		if to[i] <= ' ' || to[i] == 0x7f {
			return fmt.Errorf("%w: target has a space or control character", ErrBadLink)
		}
	}
	u, err := url.Parse(to)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: target must be an absolute http(s) URL", ErrBadLink)
	}
	return nil
}

// checkPublicURL accepts the receiver's public origin (and path prefix):
// yidu.CheckPublicURL's rule, and not empty.
func checkPublicURL(s string) error {
	if err := yidu.CheckPublicURL(s); s == "" || err != nil {
		return fmt.Errorf("callback: public URL %q must be an absolute http(s) URL without credentials, query or fragment", s)
	}
	return nil
}

// verifyLink finds the link's app and checks its signature; on failure it
// has answered (404 unknown app, 400/403 bad link) and ok is false.
func (rc *Receiver) verifyLink(w http.ResponseWriter, r *http.Request, start time.Time) (a *app, l link, ok bool) {
	if a, ok = rc.app(w, r, start); !ok {
		return nil, link{}, false
	}
	l, err := parseLink(a.cfg.LinkKey, chi.URLParam(r, "msgid"), r.URL.RawQuery)
	if err != nil {
		rc.finish(w, r, a.m, start, err)
		return nil, link{}, false
	}
	return a, l, true
}

// handleLink verifies a tracked link and sends the member to WeCom's
// OAuth2 page, which comes back to the landing with a code.
func (rc *Receiver) handleLink(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a, l, ok := rc.verifyLink(w, r, start)
	if !ok {
		return
	}
	// The link of a notice hosted on this receiver's reading page goes
	// straight to the page: the page signs the member in (or finds their
	// session) and records the link signal with the version it shows, its
	// client and User-Agent. Landing here first would exchange a second
	// code with WeCom and record the same read twice, once without the
	// version, racing the page's record into flushd.
	if l.to == linkPath(rc.publicURL, a.cfg.Name, l.msgID, "") {
		redirect(w, r, l.to)
		a.m.landings[landPage].Inc()
		rc.done(a.m, start, outLinkLanded)
		return
	}
	landing := linkPath(rc.publicURL, a.cfg.Name, l.msgID, "/landing") + "?to=" + url.QueryEscape(l.to) + "&sig=" + l.sig
	// Parameter order as in the document (91022); scope snsapi_base asks
	// for the UserID only, without a consent page. state is not checked on
	// the landing: there is no session to bind it to, and the member's
	// identity comes from the single-use code WeCom hands their browser.
	target := rc.oauthBase + authorizePath + "?appid=" + url.QueryEscape(a.cfg.CorpID) +
		"&redirect_uri=" + url.QueryEscape(landing) +
		"&response_type=code&scope=snsapi_base&state=" + newState()
	if a.cfg.AgentID != 0 {
		target += "&agentid=" + strconv.FormatInt(a.cfg.AgentID, 10)
	}
	redirect(w, r, target+"#wechat_redirect")
	rc.done(a.m, start, outLinkAuthorize)
}

// handleLanding is where WeCom returns the member with a code: verify the
// link again (the landing URL can be requested directly), record the read
// if possible, and always send the member on to the target.
func (rc *Receiver) handleLanding(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a, l, ok := rc.verifyLink(w, r, start)
	if !ok {
		return
	}
	res := rc.land(r.Context(), a, l, queryValue(r.URL.RawQuery, "code"), rc.proxies.Of(r).String())
	a.m.landings[res].Inc()
	redirect(w, r, l.to)
	rc.done(a.m, start, outLinkLanded)
}

// land records the read of a verified link and says how it went. It never
// fails the request: the member must reach the page, and nobody retries a
// landing as WeCom retries a callback, so a failure is counted (and a
// failed record logged at error level) instead.
func (rc *Receiver) land(ctx context.Context, a *app, l link, code, addr string) string {
	if code == "" || len(code) > maxOAuthCode {
		return landNoCode
	}
	// The visitor's address first, so a flood from one address does not
	// even spend its link's budget; then the link's; then the receiver's,
	// which keeps the corp's WeCom API quota.
	now := rc.now()
	if !rc.perAddr.allow("", addr, now) || !rc.perLink.allow(a.cfg.Name, l.msgID, now) || !rc.exchange.AllowN(now, 1) {
		return landExchangeLimited
	}
	// Not cut short when the browser goes away: the read is the member's
	// even if they closed the page.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rc.timeout)
	defer cancel()
	corpID, agentID := a.cfg.CorpID, a.cfg.AgentID
	userID, err := rc.oauth.UserID(ctx, corpID, agentID, code)
	if err != nil {
		// Made-up codes are free to send: warn at most every few seconds.
		if rc.linkWarn.Allow() {
			rc.log.Warn("tracked link: code exchange failed", "app", a.cfg.Name, "err", err)
		}
		return landExchangeFailed
	}
	if userID == "" {
		return landNotMember
	}
	now = rc.now()
	if rc.limit != nil && !rc.limit.allow(corpID, userID, now) {
		a.m.rateLimited.Inc()
		return landRateLimited
	}
	// read_time is now: opening the link is the event, and it has no
	// CreateTime of WeCom's.
	n, err := rc.reads.LinkRead(ctx, corpID, agentID, userID, l.msgID, now)
	if err != nil {
		rc.log.Error("tracked link: read not recorded", "app", a.cfg.Name, "msgid", l.msgID, "err", err)
		return landRecordFailed
	}
	a.m.linkReads.Add(float64(max(n, 0)))
	if n == 0 {
		return landNoNewRead
	}
	return landRead
}

// redirect answers 302 to target, never cached (each visit must come back
// to be counted) and sending no Referer (the landing URL holds the code).
func redirect(w http.ResponseWriter, r *http.Request, target string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, target, http.StatusFound)
}

// newState returns a short random OAuth2 state ([0-9a-f], within WeCom's
// [a-zA-Z0-9]{0,128}).
func newState() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}
