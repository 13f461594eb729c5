package callback

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
)

// bufs holds request bodies and decrypted messages: each callback needs two
// buffers of about the body's size, reused so the hot path does not
// allocate them.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() *[]byte { return bufs.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) <= 256<<10 {
		*b = (*b)[:0]
		bufs.Put(b)
	}
}

// app returns the app the request's route names; an unknown one has been
// answered (404) and ok is false.
func (rc *Receiver) app(w http.ResponseWriter, r *http.Request, start time.Time) (a *app, ok bool) {
	a, ok = rc.apps[chi.URLParam(r, "app")]
	if !ok {
		rc.finish(w, r, rc.unknown, start, ErrUnknownApp)
	}
	return a, ok
}

// handleVerify answers WeCom's URL verification (doc path 91144): check the
// signature over the (URL-decoded) echostr, decrypt it, answer the
// plaintext alone.
func (rc *Receiver) handleVerify(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a, ok := rc.app(w, r, start)
	if !ok {
		return
	}
	raw := r.URL.RawQuery
	echo := queryValue(raw, "echostr") // URL-decoded: its base64 carries %2B, %2F, %3D
	ts := queryValue(raw, "timestamp")
	if err := a.crypt.Verify(queryValue(raw, "msg_signature"), ts, queryValue(raw, "nonce"), echo); err != nil {
		rc.finish(w, r, a.m, start, err)
		return
	}
	if err := rc.checkTimestamp(ts); err != nil {
		rc.finish(w, r, a.m, start, err)
		return
	}
	buf := getBuf()
	defer putBuf(buf)
	msg, err := a.crypt.Open(*buf, echo)
	if err != nil {
		rc.finish(w, r, a.m, start, err)
		return
	}
	// The plaintext alone: no quotes, BOM or newline.
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(msg)
	rc.done(a.m, start, outVerified)
}

// handleEvent receives an event callback: verify, decrypt, parse, dedup,
// apply, answer.
func (rc *Receiver) handleEvent(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	a, ok := rc.app(w, r, start)
	if !ok {
		return
	}
	body, dec := getBuf(), getBuf()
	defer putBuf(body)
	defer putBuf(dec)
	var err error
	if *body, err = readBody(r, *body, rc.maxBody); err != nil {
		rc.finish(w, r, a.m, start, err)
		return
	}
	raw := r.URL.RawQuery
	ev, err := rc.open(a, queryValue(raw, "msg_signature"), queryValue(raw, "timestamp"), queryValue(raw, "nonce"), *body, dec)
	if err != nil {
		rc.finish(w, r, a.m, start, err)
		return
	}
	o, err := rc.dispatch(r.Context(), a, &ev)
	if err != nil {
		rc.finish(w, r, a.m, start, err)
		return
	}
	if reply := rc.reply(a, &ev, o); reply != nil {
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(reply)
		a.m.replies.Inc()
		rc.done(a.m, start, o)
		return
	}
	w.WriteHeader(http.StatusOK) // empty body (doc path 90238)
	rc.done(a.m, start, o)
}

// reply returns the passive reply to a press of a tracked card's read
// button once the read is durable (outcome ok; not for a press yidu keeps
// nowhere, outcome not_recorded: telling an unknown member or a
// non-recipient "read" would be untrue): WeCom then shows the
// member who pressed the button's new text, the 模板卡片更新消息
// "更新点击用户的按钮文案" (doc path 90241: MsgType update_button with
// Button/ReplaceName; ToUserName the member, FromUserName the CorpID). A
// repeated press is answered the same. nil: answer with an empty body, as
// for every other callback (a foreign card, another button, a press over
// the member's rate limit, which records nothing, or an app without a
// reply text). A reply that cannot be built is logged and left out: the
// read is durable either way.
func (rc *Receiver) reply(a *app, ev *Event, o outcome) []byte {
	if ev.Kind != KindTemplateCard || o != outOK || a.cfg.ReadReply == "" {
		return nil
	}
	if _, ok := yidu.ParseTaskID(ev.TaskID); !ok {
		return nil
	}
	ts := strconv.FormatInt(rc.now().Unix(), 10)
	b := make([]byte, 0, 256+len(ev.FromUserName)+len(a.cfg.CorpID)+len(a.cfg.ReadReply))
	b = append(b, "<xml><ToUserName><![CDATA["...)
	b = append(b, cdata(ev.FromUserName)...)
	b = append(b, "]]></ToUserName><FromUserName><![CDATA["...)
	b = append(b, cdata(a.cfg.CorpID)...)
	b = append(b, "]]></FromUserName><CreateTime>"...)
	b = append(b, ts...)
	b = append(b, "</CreateTime><MsgType><![CDATA[update_button]]></MsgType><Button><ReplaceName><![CDATA["...)
	b = append(b, cdata(a.cfg.ReadReply)...)
	b = append(b, "]]></ReplaceName></Button></xml>"...)
	out, err := a.crypt.Reply(b, ts, replyNonce())
	if err != nil {
		rc.log.Error("passive reply not built", "app", a.cfg.Name, "err", err)
		return nil
	}
	return out
}

// cdata keeps s inside a CDATA section: "]]>" would end it early.
func cdata(s string) string { return strings.ReplaceAll(s, "]]>", "]]]]><![CDATA[>") }

// replyNonce returns a random decimal nonce, as WeCom's own are.
func replyNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return strconv.FormatUint(binary.BigEndian.Uint64(b[:])%1e10, 10)
}

// queryValue returns the first value of key in the raw query, decoded as
// url.Values.Get would, without building the whole map: the hot path needs
// three or four keys. A value that does not decode is returned empty.
func queryValue(raw, key string) string {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != key {
			// Keys are plain ASCII; an escaped key is compared decoded.
			if !strings.ContainsAny(k, "%+") {
				continue
			}
			if dk, err := url.QueryUnescape(k); err != nil || dk != key {
				continue
			}
		}
		if !strings.ContainsAny(v, "%+") {
			return v
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			return ""
		}
		return dv
	}
	return ""
}

// readBody reads the body into buf, failing with ErrTooLarge past max.
func readBody(r *http.Request, buf []byte, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, fmt.Errorf("%w: Content-Length %d > %d", ErrTooLarge, r.ContentLength, max)
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(cap(buf)+1, int(max)+1))
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
	}
}

// open verifies, decrypts and parses one POST callback. dec is scratch for
// the decrypted message; the Event does not share memory with it or body.
func (rc *Receiver) open(a *app, sig, timestamp, nonce string, body []byte, dec *[]byte) (Event, error) {
	// The envelope's strings are read in place: they point into body,
	// which the handler holds until it answers, and none outlives open
	// (Verify and Open only read them; errors format copies). Copying the
	// ~1 KB body was a sixth of a callback's allocated bytes.
	var env fields
	if err := parseFlat(unsafe.String(unsafe.SliceData(body), len(body)), &env); err != nil {
		return Event{}, err
	}
	encrypt := env.v[fEncrypt]
	if encrypt == "" {
		return Event{}, fmt.Errorf("%w: no Encrypt", ErrBadXML)
	}
	if err := a.crypt.Verify(sig, timestamp, nonce, encrypt); err != nil {
		return Event{}, err
	}
	if err := rc.checkTimestamp(timestamp); err != nil {
		return Event{}, err
	}
	// The envelope's AgentID is outside the signature: check it anyway so
	// that a misrouted callback fails loudly instead of counting elsewhere.
	if err := a.checkAgentID(env.v[fAgentID]); err != nil {
		return Event{}, err
	}
	msg, err := a.crypt.Open(*dec, encrypt)
	if err != nil {
		return Event{}, err
	}
	ev, err := ParseEvent(string(msg))
	if err != nil {
		return Event{}, err
	}
	if a.cfg.AgentID != 0 && ev.AgentID != 0 && ev.AgentID != a.cfg.AgentID {
		return Event{}, fmt.Errorf("%w: message AgentID %d, app %d", ErrAgentID, ev.AgentID, a.cfg.AgentID)
	}
	return ev, nil
}

// checkAgentID checks an envelope AgentID; an app configured without
// agent_id, or an envelope without one, is not checked.
func (a *app) checkAgentID(s string) error {
	s = strings.TrimSpace(s)
	if a.cfg.AgentID == 0 || s == "" {
		return nil
	}
	if id, err := strconv.ParseInt(s, 10, 64); err != nil || id != a.cfg.AgentID {
		return fmt.Errorf("%w: envelope AgentID %q, app %d", ErrAgentID, s, a.cfg.AgentID)
	}
	return nil
}

// checkTimestamp rejects a missing timestamp or one outside the window
// around now: a captured callback cannot be replayed later.
func (rc *Receiver) checkTimestamp(s string) error {
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not a timestamp", ErrTimestamp, s)
	}
	d := rc.now().Unix() - ts
	if d > int64(rc.window/time.Second) || -d > int64(rc.window/time.Second) {
		return fmt.Errorf("%w: %d s from now", ErrTimestamp, -d)
	}
	return nil
}

// dispatch applies a verified event and returns the 200 outcome, or the
// error that makes WeCom retry.
func (rc *Receiver) dispatch(ctx context.Context, a *app, ev *Event) (outcome, error) {
	a.m.events[ev.Kind].Inc()
	switch ev.Kind {
	case KindTemplateCard:
		if _, _, ok := yidu.ParseApprovalTaskID(ev.TaskID); ok {
			// An approver's 批准, not a read (issue 41).
			if rc.approvals == nil {
				return rc.ignore(a, ignoreApproval), nil
			}
			break
		}
		if a.cfg.ReadButtonKey != "" && ev.EventKey != a.cfg.ReadButtonKey {
			return rc.ignore(a, ignoreOtherButton), nil
		}
	case KindEnterAgent:
	case KindChangeContact:
		switch ev.ChangeType {
		case "create_user", "update_user", "delete_user":
		default:
			return rc.ignore(a, ignoreContact), nil
		}
		if rc.contacts == nil || ev.UserID == "" {
			return rc.ignore(a, ignoreContact), nil
		}
	case KindView, KindClick:
		// Menu events name no message and no tracked link: tracked links
		// are read through their OAuth2 landing (link.go), which also
		// identifies the member.
		return rc.ignore(a, ignoreMenu), nil
	case KindMessage:
		return rc.ignore(a, ignoreMessage), nil
	default:
		return rc.ignore(a, ignoreUnknown), nil
	}

	if ev.Kind != KindChangeContact && rc.limit != nil && !rc.limit.allow(a.cfg.CorpID, ev.FromUserName, rc.now()) {
		a.m.rateLimited.Inc()
		return outRateLimited, nil
	}

	// Bounded by the receiver's timeout, not cut short when WeCom's
	// connection goes: a read the member gave is kept even if WeCom gave up
	// waiting (its retry is then a duplicate), as a tracked link's is when
	// the browser goes (link.go). A detached parent also spares every
	// callback registering with net/http's request context and removing
	// itself again, 2 % of the receiver's CPU in the 9:00 storm (issue 16).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rc.timeout)
	defer cancel()
	// Read signals skip the dedup round trips: the read path is itself the
	// dedup (a read already set is a duplicate, no delta), so a WeCom retry
	// has no second effect either way, and a storm saves two Redis round
	// trips per callback. change_contact, which is not idempotent in its
	// side effects on other instances' caches, keeps them.
	useDedup := rc.dedup != nil && ev.Kind == KindChangeContact
	var key string
	if useDedup {
		key = dedupKey(a.cfg.Name, ev)
		seen, err := rc.dedup.Seen(ctx, key)
		switch {
		case err != nil:
			// Proceed: applying twice is harmless, losing a read is not.
			a.m.dedupSeenErr.Inc()
			rc.log.Warn("dedup seen failed; processing anyway", "app", a.cfg.Name, "err", err)
		case seen:
			a.m.dedupHits.Inc()
			return outDuplicate, nil
		}
	}
	recorded, err := rc.apply(ctx, a, ev)
	if err != nil {
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrTimeout, ev.Kind, err)
		}
		return 0, fmt.Errorf("%w: %s: %w", ErrDownstream, ev.Kind, err)
	}
	if useDedup {
		// Only after the effect is durable, so a failed attempt is retried
		// for real. A failure here costs at most a harmless second apply.
		if err := rc.dedup.Remember(ctx, key, rc.dedupTTL); err != nil {
			a.m.dedupRememberErr.Inc()
			rc.log.Warn("dedup remember failed", "app", a.cfg.Name, "err", err)
		}
	}
	if !recorded {
		return outNotRecorded, nil
	}
	return outOK, nil
}

// apply performs the effect of an event that passed dispatch's filters;
// recorded is false for a card press yidu keeps nowhere (unknown member or
// message, non-recipient: ReadRecorder.CardPress).
func (rc *Receiver) apply(ctx context.Context, a *app, ev *Event) (recorded bool, err error) {
	agentID := a.cfg.AgentID
	if agentID == 0 {
		agentID = ev.AgentID
	}
	at := rc.eventTime(ev.CreateTime)
	switch ev.Kind {
	case KindTemplateCard:
		if _, _, ok := yidu.ParseApprovalTaskID(ev.TaskID); ok {
			return true, rc.approvals.ApprovalPress(ctx, a.cfg.CorpID, a.cfg.Name, ev.FromUserName, ev.TaskID, ev.EventKey)
		}
		n, recorded, err := rc.reads.CardPress(ctx, a.cfg.CorpID, agentID, ev.FromUserName, ev.TaskID, at)
		a.m.cardReads.Add(float64(max(n, 0)))
		return recorded, err
	case KindEnterAgent:
		n, err := rc.reads.EnterAgent(ctx, a.cfg.CorpID, agentID, ev.FromUserName, at)
		a.m.enterReads.Add(float64(max(n, 0)))
		return true, err
	case KindChangeContact:
		return true, rc.contacts.ContactChanged(ctx, a.cfg.CorpID, ev.ChangeType, ev.UserID, ev.NewUserID, ev.Department)
	}
	return false, fmt.Errorf("callback: apply %s: not an action", ev.Kind)
}

// eventTime is when a read happened: the event's CreateTime, or the
// receive time when CreateTime is absurd: later than now plus the
// timestamp window (nothing happens in the future) or before 2000 (yidu's
// archive starts there). The archive then gets a time it can store and
// Redis and MySQL never disagree over it. An old CreateTime is kept: WeCom
// may deliver late. A read before its message was sent is the recorder's
// to judge (it knows the send time).
func (rc *Receiver) eventTime(createTime int64) time.Time {
	now := rc.now()
	if createTime > now.Unix()+int64(rc.window/time.Second) || createTime < minEventTime {
		return now
	}
	return time.Unix(createTime, 0)
}

// minEventTime is 2000-01-01T00:00:00Z, the earliest read yidu stores.
const minEventTime = 946684800

func (rc *Receiver) ignore(a *app, reason string) outcome {
	a.m.ignored[reason].Inc()
	return outIgnored
}

// dedupKey identifies one delivery of an event (doc path 90238: events by
// FromUserName + CreateTime, made precise with the event's own fields).
// Every part but the last is free of '|' (UserIDs, task_ids, change types),
// so keys cannot collide; EventKey, free text, comes last.
func dedupKey(app string, ev *Event) string {
	var b strings.Builder
	b.Grow(len(app) + len(ev.FromUserName) + len(ev.Event) + len(ev.TaskID) + len(ev.ChangeType) + len(ev.UserID) + len(ev.EventKey) + 32)
	b.WriteString(app)
	b.WriteByte('|')
	b.WriteString(ev.FromUserName)
	b.WriteByte('|')
	b.WriteString(strconv.FormatInt(ev.CreateTime, 10))
	b.WriteByte('|')
	b.WriteString(ev.Event)
	b.WriteByte('|')
	b.WriteString(ev.TaskID)
	b.WriteByte('|')
	b.WriteString(ev.ChangeType)
	b.WriteByte('|')
	b.WriteString(ev.UserID)
	b.WriteByte('|')
	b.WriteString(ev.EventKey)
	return b.String()
}

// done counts a 200.
func (rc *Receiver) done(m *appMetrics, start time.Time, o outcome) {
	m.outcome[o].Inc()
	m.latency.Observe(time.Since(start).Seconds())
}

// finish answers a failed request from the outcomes table. Only 5xx is
// logged at error level: 4xx is the client's (or an attacker's) problem.
func (rc *Receiver) finish(w http.ResponseWriter, r *http.Request, m *appMetrics, start time.Time, err error) {
	o := errorOutcome(err)
	oc := outcomes[o]
	m.outcome[o].Inc()
	m.latency.Observe(time.Since(start).Seconds())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if oc.status == http.StatusRequestEntityTooLarge {
		// Do not wait for the rest of an oversized body: close instead.
		w.Header().Set("Connection", "close")
	}
	w.WriteHeader(oc.status)
	if oc.status >= 500 {
		rc.log.Error("callback failed", "app", chi.URLParam(r, "app"), "outcome", oc.label, "err", err)
		// No error text: it may name internal hosts.
		fmt.Fprintf(w, "%s\n", oc.label)
		return
	}
	if rc.log.Enabled(r.Context(), slog.LevelDebug) {
		rc.log.Debug("callback rejected", "outcome", oc.label, "status", oc.status, "err", err)
	}
	// The outcome and WeCom's code only: the error's text may describe
	// internals (parser state, AgentIDs, limits) to whoever sent garbage.
	fmt.Fprintf(w, "%s (%d)\n", oc.label, oc.code)
}
