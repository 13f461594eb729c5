package page

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/internal/webedge"
)

// The page's events (POST /r/<app>/<msgid>/events) and what they decide.
//
// Every page view hands the reader a view: a token signed with the app's
// view key naming who was shown which version of which notice and when
// (viewtoken.go). An event names its view and the version; the session
// cookie must be the view's reader. So an event is bound to a session
// (SameSite=Lax cookie, JSON body: a cross-site form cannot send it), to
// what the page showed, and to the time it was shown (min_read_seconds is
// checked here, not only in the browser).
//
// What a reader did on each version is kept in Redis
// (done:<signal>:<version>), written only once the signal is durable:
// an acknowledgement needs read_to_end of the same version first (Redis,
// else the archive, page_signals), and a second acknowledgement of a
// version is refused and writes nothing.

// Event errors, each a clear answer that writes nothing.
var (
	// ErrNoSession: the event came without a reader's session (401).
	ErrNoSession = errors.New("page: no session")
	// ErrUnknownView: the view named is not one this receiver handed out,
	// or it expired (403).
	ErrUnknownView = errors.New("page: unknown view")
	// ErrNotYourView: the view was handed to another reader or belongs to
	// another notice (403): someone else's event.
	ErrNotYourView = errors.New("page: the view is another reader's")
	// ErrVersionNotShown: the event names a version the view did not
	// show (409).
	ErrVersionNotShown = errors.New("page: version not shown")
	// ErrNotReadToEnd: an acknowledgement before read_to_end of the same
	// version (409).
	ErrNotReadToEnd = errors.New("page: not read to the end")
	// ErrTooSoon: an acknowledgement before the notice's
	// min_read_seconds on the page (409).
	ErrTooSoon = errors.New("page: acknowledged too soon")
	// ErrAlreadyAcknowledged: a replayed acknowledgement of a version
	// (409).
	ErrAlreadyAcknowledged = errors.New("page: already acknowledged")
	// ErrBadEvent: the body names no known event (400).
	ErrBadEvent = errors.New("page: bad event")
	// ErrStaleVersion: the event is of a version older than the notice's
	// current material version, as it is when the event arrives (409):
	// a version published after the page was served is read first.
	ErrStaleVersion = errors.New("page: a newer version is out")
	// ErrNotRecorded: the read path kept nothing (not a recipient, or
	// another app's notice: 404), so nothing is marked done.
	ErrNotRecorded = errors.New("page: not a recipient of this notice here")
)

// Archive answers what MySQL holds of a member's page signals when Redis
// lacks it (tracker.Registry, page_signals).
type Archive interface {
	HasPageSignal(ctx context.Context, corpID, msgID string, uid uint32, sig yidu.Signal, version int) (bool, error)
}

// view is what a page view handed out, signed into its token.
type view struct {
	// App, Corp, MsgID and UserID are whose view it is: the token
	// carries their bind, not them.
	App, Corp, MsgID, UserID string
	UID                      uint32
	Version                  int
	// ShownMs is when the page was served (unix ms); MinRead the
	// notice's min_read_seconds then.
	ShownMs int64
	MinRead int
	// Material is the notice's current material version when the page
	// was served: an acknowledgement of an older version is archived and
	// does not count (yidu.ReadRule.Acknowledging).
	Material int
}

// Event is one event the reading page posts.
type Event struct {
	// Signal is read_to_end or acknowledged.
	Signal  yidu.Signal
	View    string
	Version int
	// IP and UserAgent are the request's (RemoteAddr: no proxy header is
	// trusted).
	IP, UserAgent string
}

// ParseEvent decodes an event's body: {"event": "read_to_end" |
// "acknowledged", "version": N, "view": "<token>"}, nothing else.
func ParseEvent(body []byte) (Event, error) {
	var b eventBody
	if err := decodeEvent(body, &b); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrBadEvent, err)
	}
	var ev Event
	switch b.Event {
	case "read_to_end":
		ev.Signal = yidu.SignalReadToEnd
	case "acknowledged":
		ev.Signal = yidu.SignalAcknowledged
	default:
		return Event{}, fmt.Errorf("%w: event %q", ErrBadEvent, yidu.Truncate(b.Event, 32))
	}
	if b.Version < 1 || b.Version > 1<<31-1 {
		return Event{}, fmt.Errorf("%w: version %d", ErrBadEvent, b.Version)
	}
	if b.View == "" || len(b.View) > 64 {
		return Event{}, fmt.Errorf("%w: view", ErrBadEvent)
	}
	ev.Version, ev.View = b.Version, b.View
	return ev, nil
}

func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

func (s *Server) doneKey(corp, msgID, userID string) string {
	return s.opts.Prefix + "page:done:{" + corp + "/" + msgID + "}:" + userID
}

func doneField(sig yidu.Signal, version int) string {
	return sig.String() + ":" + strconv.Itoa(version)
}

// beginView hands out a view of version n to the reader, in the round
// trip that asks whether they are a recipient of the notice, and returns
// its token and what the reader already did on n (read_to_end,
// acknowledged). The token is to be served only to a recipient.
func (s *Server) beginView(ctx context.Context, a App, v view) (token string, ended, acked, recipient bool, err error) {
	var isRecipient func() (bool, error)
	var done *redis.SliceCmd
	if err := s.opts.Marks.Pipelined(ctx, func(p redis.Pipeliner) {
		isRecipient = s.readers.QueueRecipient(ctx, p, v.Corp, v.MsgID, v.UID)
		done = p.HMGet(ctx, s.doneKey(v.Corp, v.MsgID, v.UserID), doneField(yidu.SignalReadToEnd, v.Version), doneField(yidu.SignalAcknowledged, v.Version))
	}); err != nil {
		return "", false, false, false, fmt.Errorf("page: view: %w", err)
	}
	if recipient, err = isRecipient(); err != nil {
		return "", false, false, false, err
	}
	if err := done.Err(); err != nil {
		return "", false, false, false, fmt.Errorf("page: view: %w", err)
	}
	vals := done.Val()
	return s.views[a.Name].sign(v), len(vals) == 2 && vals[0] != nil, len(vals) == 2 && vals[1] != nil, recipient, nil
}

// openView returns the view ev names, signed for app a, which must be
// sess's on msgID.
func (s *Server) openView(sess session, a App, msgID string, ev Event) (view, error) {
	v, bind, err := s.views[a.Name].open(ev.View, s.opts.Now())
	if err != nil {
		return view{}, ErrUnknownView
	}
	if sess.Corp != a.CorpID || bind != viewBind(a.CorpID, a.Name, msgID, sess.UserID) {
		return view{}, ErrNotYourView
	}
	v.App, v.Corp, v.MsgID, v.UserID = a.Name, a.CorpID, msgID, sess.UserID
	return v, nil
}

// record decides and records one event of the reader signed in as sess
// (see the errors); it returns once the signal is durable. It is decided
// against the notice as it is now (issue 46): its app, its current
// material version (Redis, page:current), the reader a recipient (the
// read path records nothing for anyone else, and then nothing is marked).
func (s *Server) record(ctx context.Context, sess session, a App, msgID string, ev Event) error {
	if app, err := s.noticeApp(ctx, a.CorpID, msgID); err != nil {
		return err
	} else if app != "" && app != a.Name {
		return ErrNotRecorded
	}
	v, err := s.openView(sess, a, msgID, ev)
	if err != nil {
		return err
	}
	if v.Version != ev.Version {
		return ErrVersionNotShown
	}
	done := s.doneKey(sess.Corp, msgID, sess.UserID)
	// One round trip, shared with the read path's concurrent marks: what
	// the reader did, what is current.
	var curCmd *redis.StringCmd
	var doneCmd *redis.SliceCmd
	if err := s.opts.Marks.Pipelined(ctx, func(p redis.Pipeliner) {
		doneCmd = p.HMGet(ctx, done, doneField(yidu.SignalReadToEnd, ev.Version), doneField(yidu.SignalAcknowledged, ev.Version))
		curCmd = p.Get(ctx, s.opts.Current.key(a.CorpID, msgID))
	}); err != nil {
		return fmt.Errorf("page: view: %w", err)
	}
	if err := doneCmd.Err(); err != nil {
		return fmt.Errorf("page: view: %w", err)
	}
	c, found, err := parseCurrent(curCmd.Val(), curCmd.Err(), msgID)
	cur, err := s.vers.currentOr(ctx, v.Corp, v.MsgID, c, found, err)
	if err != nil {
		return err
	}
	if isStale(v.Version, cur) {
		return ErrStaleVersion
	}
	vals := doneCmd.Val()
	ended, acked := len(vals) == 2 && vals[0] != nil, len(vals) == 2 && vals[1] != nil
	now := s.opts.Now()
	switch ev.Signal {
	case yidu.SignalReadToEnd:
		if ended {
			return nil // reached again: on record already
		}
	case yidu.SignalAcknowledged:
		if !acked && !ended {
			// Redis may have lost what flushd archived. A hash that holds
			// read_to_end was not lost (the ack's mark follows it in the
			// same hash), so the common ack costs no MySQL; at worst a
			// mark that failed to be written lets a replay through, whose
			// delta flushd keeps once.
			if acked, err = s.archive.HasPageSignal(ctx, v.Corp, v.MsgID, v.UID, yidu.SignalAcknowledged, v.Version); err != nil {
				return err
			}
		}
		if acked {
			return ErrAlreadyAcknowledged
		}
		if !ended {
			if ended, err = s.archive.HasPageSignal(ctx, v.Corp, v.MsgID, v.UID, yidu.SignalReadToEnd, v.Version); err != nil {
				return err
			}
		}
		if !ended {
			return ErrNotReadToEnd
		}
		if now.Before(time.UnixMilli(v.ShownMs).Add(time.Duration(v.MinRead) * time.Second)) {
			return ErrTooSoon
		}
	default:
		return ErrBadEvent
	}
	_, recorded, err := s.reads.PageSignal(ctx, ev.Signal, a.CorpID, a.AgentID, v.UserID, v.MsgID, now,
		bitmap.PageEvent{Version: v.Version, IP: ev.IP, UserAgent: ev.UserAgent})
	if err != nil {
		return err
	}
	if !recorded {
		return ErrNotRecorded
	}
	// Durable now; what follows only spares a replay its write (and
	// a lost mark falls back to the archive).
	ttl := strconv.FormatInt(max(int64(s.opts.DoneTTL/time.Second), 1), 10)
	group := "page-done:" + ttl + ":" + a.CorpID + "/" + msgID
	if err := s.opts.Marks.ScriptMerged(ctx, group, markDone, done, []any{ttl}, doneField(ev.Signal, v.Version), now.Unix()); err != nil {
		s.log.WarnContext(ctx, "page: event recorded, its mark not kept", "err", err)
	}
	return nil
}

// markDone sets readers' marks of what they did on a version and the
// marks' TTL, each hash in one command, atomically (a MULTI of HSET and
// EXPIRE was four commands and as many replies per event). The readers of
// one notice marked in one batch of the shared pipeline are one call
// (ScriptMerged): their hashes share the notice's hash tag.
// KEYS: the readers' done hashes. ARGV: ttl in seconds, then a field and
// its value for each key in turn.
var markDone = redis.NewScript(`
for i, k in ipairs(KEYS) do
  redis.call('HSET', k, ARGV[2 * i], ARGV[2 * i + 1])
  redis.call('EXPIRE', k, ARGV[1])
end
return 1
`)

// isStale reports whether an event of version n, arriving when the
// notice is at cur, is of a superseded version: older than the latest
// material one (a non-material version, a typo fixed, supersedes none).
func isStale(n int, cur current) bool {
	return n < cur.Material
}

// maxEventBody bounds an event's body.
const maxEventBody = 1 << 10

// handleEvent takes an event of the reading page (see events.go): a JSON
// body from the page's own script, with the reader's session cookie.
func (s *Server) handleEvent(w http.ResponseWriter, r *http.Request) {
	a, msgID, ok := s.noticeOf(w, r)
	if !ok {
		return
	}
	// A cross-site page can neither send the cookie (SameSite=Lax) nor
	// this content type without a preflight this server never answers.
	if !webedge.SameSiteJSON(r, s.origin) {
		eventError(w, webedge.CrossSite)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEventBody))
	if err != nil {
		eventError(w, webedge.TooLarge)
		return
	}
	ev, err := ParseEvent(body)
	if err != nil {
		eventError(w, badEvent)
		return
	}
	ev.IP, ev.UserAgent = s.clientIP(r), r.UserAgent()
	sess, ok, err := s.eventSession(r)
	if err == nil && !ok {
		err = ErrNoSession
	}
	if err == nil {
		ctx, cancel := s.signalContext(r)
		err = s.record(ctx, sess, a, msgID, ev)
		cancel()
	}
	if ans, ok := eventErrors.Find(err); ok {
		eventError(w, ans)
		return
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: event", "app", a.Name, "msgid", msgID, "signal", ev.Signal.String(), "err", err)
		w.Header().Set("Retry-After", "1")
		eventError(w, notRecorded)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	// {"ok":true,"event":…,"version":…}, built without reflection: one
	// answer per event of the storm.
	b := make([]byte, 0, 64)
	b = append(b, `{"event":`...)
	b = strconv.AppendQuote(b, ev.Signal.String())
	b = append(b, `,"ok":true,"version":`...)
	b = strconv.AppendInt(b, int64(ev.Version), 10)
	_, _ = w.Write(append(b, "}\n"...))
}

// eventErrors maps the events' outcomes to their answers (one table,
// the web edge's).
var eventErrors = webedge.Table{
	{Err: ErrNoSession, Answer: webedge.Answer{Status: http.StatusUnauthorized, Code: "no_session", ZH: "未登录，请重新打开通知", EN: "not signed in"}},
	{Err: ErrUnknownView, Answer: webedge.Answer{Status: http.StatusForbidden, Code: "unknown_view", ZH: "页面已过期，请刷新", EN: "the page expired, reload it"}},
	{Err: ErrNotYourView, Answer: webedge.Answer{Status: http.StatusForbidden, Code: "not_your_view", ZH: "无权记录他人的阅读", EN: "not your page"}},
	{Err: ErrVersionNotShown, Answer: webedge.Answer{Status: http.StatusConflict, Code: "version_not_shown", ZH: "页面未显示该版本", EN: "the page did not show this version"}},
	{Err: ErrNotReadToEnd, Answer: webedge.Answer{Status: http.StatusConflict, Code: "not_read_to_end", ZH: "请先阅读到底", EN: "read to the end first"}},
	{Err: ErrTooSoon, Answer: webedge.Answer{Status: http.StatusConflict, Code: "too_soon", ZH: "阅读时间不足", EN: "too soon"}},
	{Err: ErrAlreadyAcknowledged, Answer: webedge.Answer{Status: http.StatusConflict, Code: "already_acknowledged", ZH: "已确认过本版本", EN: "this version is acknowledged already"}},
	{Err: ErrStaleVersion, Answer: webedge.Answer{Status: http.StatusConflict, Code: "stale_version", ZH: "通知已更新，请刷新后阅读最新版并确认", EN: "the notice changed: reload, read and acknowledge the latest version"}},
	{Err: ErrNotRecorded, Answer: webedge.Answer{Status: http.StatusNotFound, Code: "not_found", ZH: "未找到该通知", EN: "not found"}},
	{Err: ErrBadEvent, Answer: badEvent},
}

// The events' answers outside the table.
var (
	badEvent    = webedge.Answer{Status: http.StatusBadRequest, Code: "bad_event", ZH: "事件格式不正确", EN: "malformed event"}
	notRecorded = webedge.Answer{Status: http.StatusServiceUnavailable, Code: "unavailable", ZH: "暂时无法记录，请稍后再试", EN: "not recorded, try again"}
)

// eventError answers an event with a's status, code and Chinese words.
func eventError(w http.ResponseWriter, a webedge.Answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": a.Code, "message": a.ZH})
}
