package bitmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/opt"
)

// UIDLookup maps a WeCom UserID to its dense uid; idmap.Mapper provides it.
// Declared here because the Recorder only reads, never assigns: an unknown
// member is not a recipient of anything.
type UIDLookup interface {
	Lookup(ctx context.Context, corpID, userID string) (uid uint32, ok bool, err error)
}

// cachedLookup is a UIDLookup that can answer from memory alone
// (idmap.Mapper): a hit then costs the read path no deadline timer.
type cachedLookup interface {
	Cached(corpID, userID string) (uid uint32, ok bool)
}

// Publisher makes deltas durable; Producer provides it. Declared here so
// tests can fail it.
type Publisher interface {
	Publish(ctx context.Context, ds []delta.Delta) error
}

// MessageLoader reads messages from MySQL when Redis lacks them;
// tracker.Registry provides it. Declared here because bitmap must not
// depend on tracker (tracker writes into bitmap). LoadReads returns the
// recipients, the read members and each signal's members.
type MessageLoader interface {
	LoadReads(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, found bool, err error)
	ActiveMessages(ctx context.Context, corpID string, agentID int64, since time.Time) ([]yidu.Message, error)
	// RecipientOf returns those of msgIDs that uid is a recipient of: an
	// app entry while Redis is down asks MySQL instead of the bitmaps.
	RecipientOf(ctx context.Context, corpID string, uid uint32, msgIDs []string) ([]string, error)
}

// RecorderOptions configures a Recorder.
type RecorderOptions struct {
	// CursorSlack re-examines messages sent this long before a member's
	// enter_agent cursor (default 2 min), so a message indexed after an
	// enter_agent that already covered its send time is still counted.
	// Re-marking is idempotent; the cost is a few duplicate marks.
	CursorSlack time.Duration
	// AckTimeout bounds Release, which runs after the caller's deadline
	// may have passed (default 1 s).
	AckTimeout time.Duration
	// MarkTimeout bounds the mark of a button or link signal (default 1
	// s): a Redis that does not answer in time is treated as down, and
	// the signal is published unmarked (see Recorder) with the rest of
	// the caller's deadline.
	MarkTimeout time.Duration
	// Apps say which signals count as read for each app (ReadSignals),
	// found by corp and agent id, else by corp and agent id 0 (an app
	// configured without one). A signal of an app not listed counts as
	// yidu.DefaultReadSignals says.
	Apps       []yidu.App
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// appKey names an app for the read signal lookup.
type appKey struct {
	corpID  string
	agentID int64
}

// Recorder is the receiver's read path (callback.ReadRecorder): it returns
// only when every new signal has its bit set in Redis and its delta
// acknowledged by Kafka. See the package doc for the order of steps.
//
// When Redis fails or does not answer within MarkTimeout, a button press
// or a link read is published to Kafka unmarked instead: its delta, with
// the app's decision whether it counts, and no bit, no lease. Nothing
// here knows whether the member is a recipient; flushd's recipient-row
// guard decides (a non-recipient's read changes no row) and sets the bits
// of the rows it wrote once Redis answers again (flushd.LiveView), so the
// dashboard catches up without counting a non-recipient. Each retry of
// the callback publishes again; flushd's guards make the duplicates
// no-ops. An enter_agent, whose app index and member cursor are in Redis,
// asks MySQL instead: the app's active messages sent by then of which the
// member is a recipient (MessageLoader.RecipientOf), published unmarked
// the same way; with both Redis and MySQL down it is answered 503.
type Recorder struct {
	store  *Store
	ids    UIDLookup
	cache  cachedLookup // ids, when it can answer from memory; else nil
	pub    Publisher
	loader MessageLoader
	opts   RecorderOptions
	apps   map[appKey]yidu.App
	log    *slog.Logger
	m      *recorderMetrics

	logUnmarked rate.Sometimes
}

// NewRecorder returns a Recorder writing to store and pub.
func NewRecorder(store *Store, ids UIDLookup, pub Publisher, loader MessageLoader, opts RecorderOptions) (*Recorder, error) {
	if store == nil || ids == nil || pub == nil || loader == nil {
		return nil, errors.New("bitmap: recorder: store, ids, pub and loader are required")
	}
	opt.Positive(&opts.CursorSlack, 2*time.Minute)
	opt.Positive(&opts.AckTimeout, time.Second)
	opt.Positive(&opts.MarkTimeout, time.Second)
	opt.Logger(&opts.Logger)
	m, err := newRecorderMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	apps := make(map[appKey]yidu.App, len(opts.Apps))
	for _, a := range opts.Apps {
		for _, sig := range a.ReadSignals {
			if !sig.Valid() {
				return nil, fmt.Errorf("bitmap: recorder: app %q: invalid read signal %d", a.Name, sig)
			}
		}
		apps[appKey{a.CorpID, a.AgentID}] = a
	}
	cache, _ := ids.(cachedLookup)
	return &Recorder{
		store: store, ids: ids, cache: cache, pub: pub, loader: loader, opts: opts, apps: apps,
		log: opts.Logger.With("component", "bitmap.recorder"),
		m:   m,

		logUnmarked: rate.Sometimes{Interval: 10 * time.Second},
	}, nil
}

// counted reports whether signal sig makes a message of app (corpID,
// agentID) read. The receiver decides, when it sets the bits, and the delta
// carries the decision: Redis's read bitmap and MySQL's is_read follow the
// same one.
func (r *Recorder) counted(corpID string, agentID int64, sig yidu.Signal) bool {
	a, ok := r.apps[appKey{corpID, agentID}]
	if !ok {
		a = r.apps[appKey{corpID, 0}] // zero App: the default signals
	}
	return a.CountsAsRead(sig)
}

// member returns userID's uid; ok=false with a nil error for a member
// the directory does not know (counted: not a recipient of anything).
func (r *Recorder) member(ctx context.Context, src delta.Source, corpID, userID string) (uid uint32, ok bool, err error) {
	if r.cache != nil {
		if uid, ok := r.cache.Cached(corpID, userID); ok {
			return uid, true, nil
		}
	}
	lctx, cancel := context.WithTimeout(ctx, r.opts.MarkTimeout)
	defer cancel()
	uid, ok, err = r.ids.Lookup(lctx, corpID, userID)
	if err != nil {
		return 0, false, fmt.Errorf("bitmap: %s: lookup: %w", src, err)
	}
	if !ok {
		r.count(src, outcomeLabelUnknownUser, 1)
	}
	return uid, ok, nil
}

// CardPress records that userID pressed a button of the card sent as
// taskID (signal button). newReads is the number of new signals that count
// as read: 1, or 0 for a repeated press, an unknown member or message, a
// non-recipient, or an app whose read signals leave the button out (the
// press is still recorded, for by_signal and MySQL's button_at). recorded
// tells whether the press is on record: true for a new or repeated press
// of a recipient (also when published unmarked or by UserID while Redis or
// MySQL is down), false for an unknown member or message, a malformed task
// id, another app's message or a non-recipient, whose press yidu keeps
// nowhere. The receiver tells the member "read" (passive reply) only when
// it is true.
func (r *Recorder) CardPress(ctx context.Context, corpID string, agentID int64, userID, taskID string, at time.Time) (newReads int, recorded bool, err error) {
	// One message is sent as many cards, one per batch of 1000 members, each
	// with its own task_id (yidu.TaskID).
	msgID, ok := yidu.ParseTaskID(taskID)
	if !ok {
		// Hostile or foreign input: touch neither Redis nor MySQL.
		r.count(delta.SourceCard, outcomeLabelUnknownMsgID, 1)
		return 0, false, nil
	}
	uid, ok, err := r.member(ctx, delta.SourceCard, corpID, userID)
	if err != nil && ctx.Err() == nil {
		n, err := r.byUserID(ctx, yidu.SignalButton, corpID, agentID, userID, string(msgID), at, delta.Page{}, err)
		return n, err == nil, err
	}
	if !ok {
		return 0, false, err
	}
	n, kept, err := r.record(ctx, yidu.SignalButton, corpID, agentID, uid, []string{string(msgID)}, at, delta.Page{})
	return n, kept > 0, err
}

// LinkRead records that userID opened the tracked link of message msgID
// at at (the moment of the visit: a link has no event CreateTime). The
// member was identified by WeCom OAuth2 (auth/getuserinfo, path 91023), so
// the read is as certain as a card button press. It returns the number of
// new signals that count as read, as CardPress; unknown member, unknown or
// malformed msgid, another app's message or a non-recipient → (0, nil).
func (r *Recorder) LinkRead(ctx context.Context, corpID string, agentID int64, userID, msgID string, at time.Time) (int, error) {
	// A link names a message, never a send batch.
	if !yidu.MsgID(msgID).Valid() {
		r.count(delta.SourceLink, outcomeLabelUnknownMsgID, 1)
		return 0, nil
	}
	uid, ok, err := r.member(ctx, delta.SourceLink, corpID, userID)
	if err != nil && ctx.Err() == nil {
		return r.byUserID(ctx, yidu.SignalLink, corpID, agentID, userID, msgID, at, delta.Page{}, err)
	}
	if !ok {
		return 0, err
	}
	n, _, err := r.record(ctx, yidu.SignalLink, corpID, agentID, uid, []string{msgID}, at, delta.Page{})
	return n, err
}

// PageEvent is a reading page's event behind a page signal (issue 39).
type PageEvent struct {
	// Version is the notice version the page showed (≥ 1).
	Version int
	// IP and UserAgent are the reader's, as the receiver saw them; the
	// User-Agent is cut to delta.MaxField bytes.
	IP, UserAgent string
	// Stale: an acknowledgement of a version older than the notice's
	// current material version. It is archived (its delta, uncounted)
	// and sets no bit: it no longer counts.
	Stale bool
}

// PageSignal records that userID gave signal sig (link, read_to_end or
// acknowledged) on the reading page of message msgID at at, reading
// version ev.Version. Like LinkRead it returns once the signal's bit is
// set and its delta durable (Kafka or the spool), and the number of new
// signals that count as read. Unlike the card's signals, a member who
// gave the signal before (on an earlier version) still gets a delta: the
// archive keeps each version's event (page_signals), so a member's
// acknowledgement of version 2 is on record beside that of version 1.
// The page decides whether an event is new for its version; a repeat
// reaching here only makes flushd keep the first row. recorded tells
// whether the signal is on record (as CardPress's): an unknown member, a
// non-recipient or another app's message → (0, false, nil), nothing
// written, and the page must not say it was.
func (r *Recorder) PageSignal(ctx context.Context, sig yidu.Signal, corpID string, agentID int64, userID, msgID string, at time.Time, ev PageEvent) (newReads int, recorded bool, err error) {
	src := delta.SourceOf(sig)
	if sig != yidu.SignalLink && sig != yidu.SignalReadToEnd && sig != yidu.SignalAcknowledged {
		return 0, false, fmt.Errorf("bitmap: page signal %v is not a page's", sig)
	}
	if ev.Version < 1 || int64(ev.Version) > 1<<32-1 {
		return 0, false, fmt.Errorf("bitmap: page signal of version %d", ev.Version)
	}
	if !yidu.MsgID(msgID).Valid() {
		r.count(src, outcomeLabelUnknownMsgID, 1)
		return 0, false, nil
	}
	page := delta.Page{Version: uint32(ev.Version), IP: truncateBytes(ev.IP, 64), UserAgent: truncateBytes(ev.UserAgent, delta.MaxField)}
	uid, ok, err := r.member(ctx, src, corpID, userID)
	if err != nil && ctx.Err() == nil {
		n, err := r.byUserID(ctx, sig, corpID, agentID, userID, msgID, at, page, err)
		return n, err == nil, err
	}
	if !ok {
		return 0, false, err
	}
	if ev.Stale {
		page.ArchiveOnly = true
		d := delta.Delta{CorpID: corpID, MsgID: msgID, UID: uid, ReadTime: at.Unix(), Source: src, Page: page}
		start := time.Now()
		err := r.pub.Publish(ctx, []delta.Delta{d})
		r.m.publish.Observe(time.Since(start).Seconds())
		if err != nil {
			r.m.publishErrors.Inc()
			return 0, false, fmt.Errorf("bitmap: %s: publish: %w", src, err)
		}
		r.count(src, outcomeLabelUncounted, 1)
		return 0, true, nil
	}
	n, kept, err := r.record(ctx, sig, corpID, agentID, uid, []string{msgID}, at, page)
	return n, kept > 0, err
}

// truncateBytes returns s as valid UTF-8 (what utf8mb4 stores) of at most
// n bytes, cut at a rune boundary.
func truncateBytes(s string, n int) string {
	s = strings.ToValidUTF8(s, "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// EnterAgent records that userID opened the app at at, after every tracked
// message the app sent them at or before at (enter_agent, paths
// 90376/90240): signal enter_agent on each. It fires on any entry into the
// app, so it makes those messages read only for an app that lists
// enter_agent in its read signals; it returns the number of new signals
// that count as read (always 0 for any other app). The member's cursor
// moves to at only after the deltas are acknowledged: moved first, a
// failed attempt's retry would start after at and skip the signals it
// failed to publish.
func (r *Recorder) EnterAgent(ctx context.Context, corpID string, agentID int64, userID string, at time.Time) (int, error) {
	uid, ok, err := r.member(ctx, delta.SourceEnterAgent, corpID, userID)
	if !ok {
		return 0, err
	}
	mctx, cancel := context.WithTimeout(ctx, r.opts.MarkTimeout)
	ids, complete, err := r.store.MessagesSinceCursor(mctx, corpID, agentID, uid, at, r.opts.CursorSlack)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, err
		}
		return r.enterWithoutRedis(ctx, corpID, agentID, uid, at, err)
	}
	if !complete {
		// Redis lost the app index (or it expired): rebuild it from MySQL.
		since := time.Now().Add(-r.store.TTL())
		msgs, err := r.loader.ActiveMessages(ctx, corpID, agentID, since)
		if err != nil {
			return 0, fmt.Errorf("bitmap: enter agent: active messages: %w", err)
		}
		if err := r.store.IndexApp(ctx, corpID, agentID, msgs, true); err != nil {
			return 0, err
		}
		if ids, _, err = r.store.MessagesSinceCursor(ctx, corpID, agentID, uid, at, r.opts.CursorSlack); err != nil {
			return 0, err
		}
	}
	n := 0
	if len(ids) > 0 {
		if n, _, err = r.record(ctx, yidu.SignalEnterAgent, corpID, agentID, uid, ids, at, delta.Page{}); err != nil {
			return 0, err
		}
	}
	if err := r.store.AdvanceCursor(ctx, corpID, agentID, uid, at); err != nil {
		// The deltas are durable; a cursor left behind only re-marks
		// duplicates next time. Still an error: the receiver retries.
		return n, err
	}
	return n, nil
}

// enterWithoutRedis records an app entry while Redis cannot answer
// (cause): the app's active messages sent at or before at (MySQL), of
// which uid is a recipient, get the signal unmarked. Without the cursor
// every such message is published again on each entry; flushd's enter_at
// guard makes the repeats no-ops, and its live view sets the bits once
// Redis answers. Only recipients are published, so nothing is parked.
func (r *Recorder) enterWithoutRedis(ctx context.Context, corpID string, agentID int64, uid uint32, at time.Time, cause error) (int, error) {
	msgs, err := r.loader.ActiveMessages(ctx, corpID, agentID, time.Now().Add(-r.store.TTL()))
	if err != nil {
		return 0, fmt.Errorf("bitmap: enter agent: redis down (%w) and active messages: %w", cause, err)
	}
	var sent []string
	for _, m := range msgs {
		if !m.SentAt.After(at) {
			sent = append(sent, m.MsgID)
		}
	}
	if len(sent) == 0 {
		return 0, nil
	}
	mine, err := r.loader.RecipientOf(ctx, corpID, uid, sent)
	if err != nil {
		return 0, fmt.Errorf("bitmap: enter agent: redis down (%w) and recipients: %w", cause, err)
	}
	if len(mine) == 0 {
		return 0, nil
	}
	return r.unmarked(ctx, yidu.SignalEnterAgent, r.counted(corpID, agentID, yidu.SignalEnterAgent), corpID, uid, mine, at, delta.Page{}, cause)
}
