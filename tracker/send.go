package tracker

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/wecom"
)

// SendBatch is the most UserIDs in one message/send call (path 90236:
// touser takes at most 1000, joined by '|').
const SendBatch = 1000

// DefaultReadButtonKey is the read button's key when the app sets none.
const DefaultReadButtonKey = "yidu_read"

// readButtonText is the card's only button, yidu.ReadButtonText (the
// compose page previews the same constant): at most yidu.MaxButtonText
// characters (button_list.text, path 90236).
const readButtonText = yidu.ReadButtonText

// reminderDesc is a reminder card's main_title.desc (at most
// yidu.MaxCardDesc characters).
const reminderDesc = "提醒" // one language, like the button

// Per app and member WeCom delivers at most 30 messages a minute and 1000 an
// hour and silently drops the rest (path 90236). One notice (a send or a
// reminder) is one message per member however many batches it takes, so
// bounding notices per app bounds every member's messages.
const (
	noticesPerMinute = 30
	noticesPerHour   = 1000
)

// message_sends.kind values.
const (
	kindSend   = "send"
	kindRemind = "remind"
)

// message_sends.status values (yidu.SendStatus). A row is written as
// unknown before its call, so a process that stops mid-call leaves it
// unknown.
const (
	statusSent    = string(yidu.SendSent)
	statusRefused = string(yidu.SendRefused)
	statusUnsent  = string(yidu.SendUnsent)
	statusUnknown = string(yidu.SendUnknown)
	statusNobody  = string(yidu.SendNobody)
)

// WeCom error codes that refuse a call before delivering it and may pass
// (global error codes, path 90313): system busy, API frequency and
// concurrency limits, stale access token.
var retryableCodes = map[int64]bool{-1: true, 45009: true, 45033: true, wecom.ErrInvalidToken: true, wecom.ErrExpiredToken: true}

// frequencyCodes are WeCom's frequency refusals (45009 接口调用超过限制,
// 45033 接口并发调用超过限制, path 90313). WeCom blocks the API for the
// minute, so a retry waits at least rateLimitWait, and a batch still
// refused ends the send (stops): later batches would only be refused too.
var frequencyCodes = map[int64]bool{45009: true, 45033: true}

// rateLimitWait is WeCom's minute block (path 90313).
const rateLimitWait = time.Minute

// errTaskIDUsed is WeCom's answer to a reused task_id (42014, path 90236).
// On the resend of a batch whose first outcome was unknown it means the
// first attempt was delivered.
const errTaskIDUsed = 42014

// resendMargin keeps the one resend of a batch well inside the duplicate
// check interval measured by WeCom's clock.
const resendMargin = time.Minute

// Send sends m's card to its recipients, SendBatch UserIDs per call, batch N
// with task_id "<msgid>@<N>". RegisterAndSend calls it for
// Registration.Send.
//
// It runs synchronously in the caller's context: a batch's row in
// message_sends is written (as unknown) before its call and updated after,
// so a cancelled or crashed send is resumed by calling Send (or Register)
// again, which skips every batch that was sent, and no in-memory queue can
// lose a send on shutdown. The caller's context must allow batches/rate
// seconds (100,000 recipients: 100 calls, 5 s at the default 20 calls/s),
// and a minute more for each refusal for frequency.
//
// Every card is sent with WeCom's duplicate check (Options.DuplicateCheck):
// a batch whose outcome is unknown (the request left, no answer came) is
// sent once more, byte for byte, while the interval runs, at once or by a
// later Send; WeCom drops it if the first one was delivered. After that
// it stays unknown and is never sent again.
//
// A batch WeCom still refuses for frequency after the waits (45009, 45033:
// at least a minute each), or one that could not reach WeCom at all after
// the retries, ends the send: the batches after it are reported unsent, not
// attempted, and the next Send sends them.
//
// Members without a UserID, or whose UserID breaks WeCom's rule
// (yidu.UserID.Valid), are left out and counted: one of them would fail
// the whole batch.
func (r *Registry) Send(ctx context.Context, app yidu.App, m yidu.Message) (yidu.SendReport, error) {
	return r.send(ctx, app, m, nil)
}

// sendBatch is one batch's recipients.
type sendBatch struct {
	users            []string
	uids             []uint32 // users' uids, in the same order
	missing, badUIDs int
}

func (r *Registry) send(ctx context.Context, app yidu.App, m yidu.Message, recipients *roaring.Bitmap) (yidu.SendReport, error) {
	var rep yidu.SendReport
	if r.sender == nil {
		return rep, yidu.ErrNoSender
	}
	if m.Recalled() {
		return rep, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	c, err := r.card(app, m, "")
	if err != nil {
		return rep, err
	}
	if recipients == nil {
		if recipients, _, err = r.loadRows(ctx, m.CorpID, m.MsgID); err != nil {
			return rep, err
		}
	}
	// A standing notice's joiners (rows too) have join batches of their
	// own: the send batches its first recipients as it did.
	if err := r.withoutJoiners(ctx, m, recipients); err != nil {
		return rep, err
	}
	states, err := r.batchStates(ctx, m.CorpID, m.MsgID, kindSend)
	if err != nil {
		return rep, err
	}
	uids := recipients.ToArray()
	batches := (len(uids) + SendBatch - 1) / SendBatch
	now := r.now()
	// prior[n]: batch n is sent again over its unknown row; earlier[n]:
	// batch n is left as an earlier send recorded it.
	prior := map[int]*sendRow{}
	earlier := map[int]bool{}
	for n := range batches {
		st, ok := states[n]
		switch {
		case !ok:
		case st.sent != nil:
			earlier[n] = true
		case st.unknown != nil && !st.unknown.resent && now.Before(st.unknown.at.Add(r.dup-resendMargin)):
			prior[n] = st.unknown
		case st.unknown != nil:
			earlier[n] = true
		}
	}
	if len(earlier) == batches {
		for n := range batches {
			rep.Outcomes = append(rep.Outcomes, states[n].outcome())
		}
		rep.Skipped = batches
		return rep, nil
	}
	if len(states) == 0 && !r.allowNotice(m.App) {
		return rep, fmt.Errorf("%w: app %s", yidu.ErrRateLimited, m.App)
	}
	if err := r.snapshotDepartments(ctx, m); err != nil {
		return rep, err
	}
	stopped := false // see stops: the rest is not attempted
	for n := range batches {
		if earlier[n] {
			rep.Skipped++
			rep.Outcomes = append(rep.Outcomes, states[n].outcome())
			continue
		}
		chunk := uids[n*SendBatch : min((n+1)*SendBatch, len(uids))]
		if stopped {
			rep.Outcomes = append(rep.Outcomes, yidu.BatchOutcome{Batch: n, Status: yidu.SendUnsent, Users: len(chunk)})
			continue
		}
		b, err := r.userIDs(ctx, m.CorpID, chunk, &rep)
		if err != nil {
			return rep, err
		}
		if len(b.users) == 0 {
			o, err := r.nobody(ctx, kindSend, m, n, b)
			if err != nil {
				return rep, err
			}
			rep.Outcomes = append(rep.Outcomes, o)
			continue
		}
		body, err := c.request(b.users, yidu.TaskID(yidu.MsgID(m.MsgID), n))
		if err != nil {
			return rep, fmt.Errorf("tracker: card body: %w", err)
		}
		o, err := r.batch(ctx, kindSend, m, n, b, body, prior[n], &rep)
		if err != nil {
			return rep, err
		}
		rep.Outcomes = append(rep.Outcomes, o)
		stopped = stops(o)
	}
	r.log.Info("sent", "corp", m.CorpID, "msgid", m.MsgID, "batches", rep.Batches, "skipped", rep.Skipped,
		"sent", rep.Sent, "invalid", rep.Invalid, "refused", rep.Refused, "unknown", rep.Unknown,
		"missing", rep.Missing, "bad_userids", rep.BadUserIDs, "stopped", stopped)
	return rep, nil
}

// userIDs returns the UserIDs of uids in uid order, leaving out (and
// counting in rep and the batch) uids without one and UserIDs WeCom would
// refuse the whole batch for.
func (r *Registry) userIDs(ctx context.Context, corpID string, uids []uint32, rep *yidu.SendReport) (sendBatch, error) {
	var b sendBatch
	names, err := r.ids.UserIDs(ctx, corpID, uids)
	if err != nil {
		return b, fmt.Errorf("tracker: userids: %w", err)
	}
	b.users = make([]string, 0, len(uids))
	for _, u := range uids {
		id, ok := names[u]
		switch {
		case !ok:
			b.missing++
		case !yidu.UserID(id).Valid():
			b.badUIDs++
		default:
			b.users = append(b.users, id)
			b.uids = append(b.uids, u)
		}
	}
	rep.Missing += b.missing
	rep.BadUserIDs += b.badUIDs
	r.met.badUserIDs.Add(float64(b.badUIDs))
	return b, nil
}

// allowNotice reports whether app may send one more notice now, and counts
// it. The window is this process's: WeCom's own limit still applies across
// replicas, and excess messages are dropped by WeCom, not duplicated.
func (r *Registry) allowNotice(app string) bool {
	return r.allow(app, r.now(), noticesPerMinute, noticesPerHour)
}

// allow reports whether one more message under key (an app, a receipt's
// app and member) fits perMinute and perHour of the messages it counted
// in the hour before now, and counts it.
func (r *Registry) allow(key string, now time.Time, perMinute, perHour int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := slices.DeleteFunc(r.notices[key], func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	minute := 0
	for _, t := range ts {
		if now.Sub(t) < time.Minute {
			minute++
		}
	}
	if minute >= perMinute || len(ts) >= perHour {
		r.notices[key] = ts
		return false
	}
	r.notices[key] = append(ts, now)
	return true
}

// appOf returns the configured app m was sent from (for its button key and
// links), or what m knows of it.
func (r *Registry) appOf(m yidu.Message) yidu.App {
	if a, ok := r.apps[m.App]; ok && a.CorpID == m.CorpID {
		return a
	}
	return yidu.App{Name: m.App, CorpID: m.CorpID, AgentID: m.AgentID}
}
