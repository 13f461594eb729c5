package tracker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/wecom"
)

// SendBatch is the most UserIDs in one message/send call (path 90236:
// touser takes at most 1000, joined by '|').
const SendBatch = 1000

// DefaultReadButtonKey is the read button's key when the app sets none.
const DefaultReadButtonKey = "yidu_read"

// readButtonText is the card's only button.
const readButtonText = "我已阅读 / I have read"

// Per app and member WeCom delivers at most 30 messages a minute and 1000 an
// hour and silently drops the rest (path 90236). One notice (a send or a
// reminder) is one message per member however many batches it takes, so
// bounding notices per app bounds every member's messages.
const (
	noticesPerMinute = 30
	noticesPerHour   = 1000
)

// message_sends.kind and .status values.
const (
	kindSend   = "send"
	kindRemind = "remind"

	statusSent = "sent" // WeCom accepted the batch (some users may be invalid)
	// statusRefused: WeCom answered with an error code: nothing delivered.
	statusRefused = "refused"
	// statusUnsent: the request never left (network, token): nothing delivered.
	statusUnsent = "unsent"
	// statusUnknown: the request was written but no answer came back (or the
	// process stopped mid-call: the row is written as unknown first). Never
	// sent again: a duplicate card is worse than a missing one, which the
	// dashboard shows as unread and a reminder fixes.
	statusUnknown = "unknown"
)

// WeCom error codes that refuse a call before delivering it and may pass
// (global error codes, path 90313): system busy, API frequency and
// concurrency limits, stale access token.
var retryableCodes = map[int64]bool{-1: true, 45009: true, 45033: true, wecom.ErrInvalidToken: true, wecom.ErrExpiredToken: true}

type templateCardBody struct {
	ToUser       string       `json:"touser"`
	MsgType      string       `json:"msgtype"`
	AgentID      int64        `json:"agentid"`
	TemplateCard templateCard `json:"template_card"`
}

type templateCard struct {
	CardType   string       `json:"card_type"`
	MainTitle  mainTitle    `json:"main_title"`
	TaskID     string       `json:"task_id"`
	ButtonList []cardButton `json:"button_list"`
}

type mainTitle struct {
	Title string `json:"title"`
	Desc  string `json:"desc,omitempty"`
}

type cardButton struct {
	Text  string `json:"text"`
	Style int    `json:"style"`
	Key   string `json:"key"`
}

// cardBody is the message/send body of one batch: a button_interaction
// template card whose task_id is unique per batch (path 90236; WeCom refuses
// a reused task_id with 42014).
func cardBody(agentID int64, users []string, title, desc, taskID, key string) ([]byte, error) {
	if key == "" {
		key = DefaultReadButtonKey
	}
	return json.Marshal(templateCardBody{
		ToUser:  strings.Join(users, "|"),
		MsgType: "template_card",
		AgentID: agentID,
		TemplateCard: templateCard{
			CardType:   "button_interaction",
			MainTitle:  mainTitle{Title: title, Desc: desc},
			TaskID:     taskID,
			ButtonList: []cardButton{{Text: readButtonText, Style: 1, Key: key}},
		},
	})
}

// Send sends m's card to its recipients, SendBatch UserIDs per call, batch N
// with task_id "<msgid>@<N>". Register calls it for Registration.Send.
//
// It runs synchronously in the caller's context: a batch's row in
// message_sends is written (as unknown) before its call and updated after,
// so a cancelled or crashed send is resumed by calling Send (or Register)
// again, which skips every batch that was sent or may have been, and no
// in-memory queue can lose a send on shutdown. The caller's context must
// allow batches/rate seconds (100,000 recipients: 100 calls, 5 s at the
// default 20 calls/s).
func (r *Registry) Send(ctx context.Context, app yidu.App, m yidu.Message) (yidu.SendReport, error) {
	return r.send(ctx, app, m, nil)
}

func (r *Registry) send(ctx context.Context, app yidu.App, m yidu.Message, recipients *roaring.Bitmap) (yidu.SendReport, error) {
	var rep yidu.SendReport
	if r.sender == nil {
		return rep, yidu.ErrNoSender
	}
	if recipients == nil {
		var err error
		if recipients, _, err = r.loadRows(ctx, m.CorpID, m.MsgID); err != nil {
			return rep, err
		}
	}
	done, err := r.doneBatches(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return rep, err
	}
	uids := recipients.ToArray()
	batches := (len(uids) + SendBatch - 1) / SendBatch
	if len(done) >= batches {
		rep.Skipped = batches
		return rep, nil
	}
	if len(done) == 0 && !r.allowNotice(m.App) {
		return rep, fmt.Errorf("%w: app %s", yidu.ErrRateLimited, m.App)
	}
	for n := range batches {
		if done[n] {
			rep.Skipped++
			continue
		}
		chunk := uids[n*SendBatch : min((n+1)*SendBatch, len(uids))]
		users, err := r.userIDs(ctx, m.CorpID, chunk, &rep)
		if err != nil {
			return rep, err
		}
		if len(users) == 0 {
			continue
		}
		body, err := cardBody(m.AgentID, users, m.Title, "", yidu.TaskID(yidu.MsgID(m.MsgID), n), app.ReadButtonKey)
		if err != nil {
			return rep, fmt.Errorf("tracker: card body: %w", err)
		}
		if err := r.batch(ctx, kindSend, m, n, users, body, &rep); err != nil {
			return rep, err
		}
	}
	r.log.Info("sent", "corp", m.CorpID, "msgid", m.MsgID, "batches", rep.Batches, "skipped", rep.Skipped,
		"sent", rep.Sent, "invalid", rep.Invalid, "refused", rep.Refused, "unknown", rep.Unknown, "missing", rep.Missing)
	return rep, nil
}

// userIDs returns the UserIDs of uids in uid order.
func (r *Registry) userIDs(ctx context.Context, corpID string, uids []uint32, rep *yidu.SendReport) ([]string, error) {
	names, err := r.ids.UserIDs(ctx, corpID, uids)
	if err != nil {
		return nil, fmt.Errorf("tracker: userids: %w", err)
	}
	users := make([]string, 0, len(uids))
	for _, u := range uids {
		if id, ok := names[u]; ok {
			users = append(users, id)
		} else {
			rep.Missing++
		}
	}
	return users, nil
}

// doneBatches returns the send batches that must not be sent again.
func (r *Registry) doneBatches(ctx context.Context, corpID, msgID string) (map[int]bool, error) {
	rows, err := r.db.QueryContext(ctx, "SELECT DISTINCT batch FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ? AND status IN (?, ?)",
		corpID, msgID, kindSend, statusSent, statusUnknown)
	if err != nil {
		return nil, fmt.Errorf("tracker: sent batches: %w", err)
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("tracker: sent batches: %w", err)
		}
		done[n] = true
	}
	return done, rows.Err()
}

// batch sends one batch: the row first (unknown), then the call, retried
// with capped backoff only while WeCom says nothing was delivered, then the
// row's final status.
func (r *Registry) batch(ctx context.Context, kind string, m yidu.Message, n int, users []string, body []byte, rep *yidu.SendReport) error {
	at := r.now().UTC().Truncate(time.Millisecond)
	if _, err := r.db.ExecContext(ctx, "INSERT INTO message_sends (corp_id, msgid, kind, batch, status, sent_at)"+
		" VALUES (?, ?, ?, ?, ?, ?)", m.CorpID, m.MsgID, kind, n, statusUnknown, at); err != nil {
		return fmt.Errorf("tracker: record batch %d of %s: %w", n, m.MsgID, err)
	}
	rep.Batches++
	status, code, invalid, callErr := r.call(ctx, m, body)
	r.met.sendBatches.WithLabelValues(kind, status).Inc()
	switch status {
	case statusSent:
		rep.Sent += len(users) - len(invalid)
		rep.Invalid += len(invalid)
		r.met.invalidUsers.Add(float64(len(invalid)))
	case statusUnknown:
		rep.Unknown += len(users)
	default:
		rep.Refused += len(users)
	}
	if status != statusUnknown {
		var inv sql.NullString
		if len(invalid) > 0 {
			inv = sql.NullString{String: strings.Join(invalid, "|"), Valid: true}
		}
		// A fresh context: the outcome must be recorded even when ctx ended
		// during the call, or a delivered batch would stay unknown (safe)
		// and an undelivered one would never be retried.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := r.db.ExecContext(wctx, "UPDATE message_sends SET status = ?, errcode = ?, invalid = ?"+
			" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = ? AND sent_at = ?",
			status, code, inv, m.CorpID, m.MsgID, kind, n, at); err != nil {
			r.log.Error("record send outcome", "corp", m.CorpID, "msgid", m.MsgID, "batch", n, "status", status, "err", err)
		}
	}
	if status == statusUnknown {
		r.log.Warn("send outcome unknown; batch not resent", "corp", m.CorpID, "msgid", m.MsgID, "batch", n, "err", callErr)
	}
	if callErr != nil && ctx.Err() != nil {
		return fmt.Errorf("tracker: send batch %d of %s: %w", n, m.MsgID, ctx.Err())
	}
	return nil
}

// call posts body, retrying what WeCom did not deliver.
func (r *Registry) call(ctx context.Context, m yidu.Message, body []byte) (status string, code int64, invalid []string, err error) {
	delay := r.retry.Initial
	for attempt := 1; ; attempt++ {
		res, err := r.sender.SendMessage(ctx, m.CorpID, m.AgentID, body)
		retry := false
		switch {
		case err == nil && res.ErrCode == 0:
			return statusSent, 0, res.InvalidUsers, nil
		case err == nil:
			status, code, invalid = statusRefused, res.ErrCode, res.InvalidUsers
			err = fmt.Errorf("errcode %d: %s", res.ErrCode, res.ErrMsg)
			retry = retryableCodes[res.ErrCode]
		case errors.Is(err, wecom.ErrNotSent):
			status, code, invalid = statusUnsent, 0, nil
			retry = true
		default:
			return statusUnknown, 0, nil, err
		}
		if !retry || attempt >= r.retry.Attempts || ctx.Err() != nil {
			return status, code, invalid, err
		}
		t := time.NewTimer(jitter.Apply(delay))
		select {
		case <-ctx.Done():
			t.Stop()
			return status, code, invalid, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, r.retry.Max)
	}
}

// allowNotice reports whether app may send one more notice now, and counts
// it. The window is this process's: WeCom's own limit still applies across
// replicas, and excess messages are dropped by WeCom, not duplicated.
func (r *Registry) allowNotice(app string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	ts := r.notices[app]
	ts = slices.DeleteFunc(ts, func(t time.Time) bool { return now.Sub(t) >= time.Hour })
	minute := 0
	for _, t := range ts {
		if now.Sub(t) < time.Minute {
			minute++
		}
	}
	if minute >= noticesPerMinute || len(ts) >= noticesPerHour {
		r.notices[app] = ts
		return false
	}
	r.notices[app] = append(ts, now)
	return true
}

// Remind sends a reminder card to userIDs (the dashboard passes the current
// non-readers), SendBatch per call; reminder K's batch N carries task_id
// "<msgid>@r<K>-<N>" so a press on it counts as a read of m. Every batch is
// recorded in message_sends with kind "remind" (see LastReminder). The least
// interval between reminders is the dashboard's to enforce.
func (r *Registry) Remind(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	var rep yidu.RemindReport
	if r.sender == nil {
		return rep, yidu.ErrNoSender
	}
	if !yidu.MsgID(m.MsgID).Valid() || !yidu.CorpID(m.CorpID).Valid() {
		return rep, yidu.Invalidf("bad message")
	}
	// A member whose UserID breaks WeCom's rule cannot be addressed (it
	// would fail the whole batch): skipped and counted, never the others'
	// reminder.
	users := make([]string, 0, len(userIDs))
	for _, u := range userIDs {
		if yidu.UserID(u).Valid() {
			users = append(users, u)
		} else {
			rep.BadUserIDs++
		}
	}
	users = slices.Compact(slices.Sorted(slices.Values(users)))
	if len(users) == 0 {
		return rep, nil
	}
	if !r.allowNotice(m.App) {
		return rep, fmt.Errorf("%w: app %s", yidu.ErrRateLimited, m.App)
	}
	var k int
	if err := r.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = 0",
		m.CorpID, m.MsgID, kindRemind).Scan(&k); err != nil {
		return rep, fmt.Errorf("tracker: count reminders: %w", err)
	}
	k++
	key := r.buttonKeys[m.App]
	for n := 0; n*SendBatch < len(users); n++ {
		chunk := users[n*SendBatch : min((n+1)*SendBatch, len(users))]
		taskID := m.MsgID + "@r" + strconv.Itoa(k) + "-" + strconv.Itoa(n)
		body, err := cardBody(m.AgentID, chunk, m.Title, "提醒 / Reminder", taskID, key)
		if err != nil {
			return rep, fmt.Errorf("tracker: card body: %w", err)
		}
		if err := r.batch(ctx, kindRemind, m, n, chunk, body, &rep.SendReport); err != nil {
			return rep, err
		}
	}
	rep.Reminded = rep.Sent
	r.log.Info("reminded", "corp", m.CorpID, "msgid", m.MsgID, "reminder", k, "batches", rep.Batches,
		"sent", rep.Sent, "invalid", rep.Invalid, "refused", rep.Refused, "unknown", rep.Unknown)
	return rep, nil
}

// LastReminder returns when msgID was last reminded, from message_sends, so
// a restart does not reopen the dashboard's reminder interval.
func (r *Registry) LastReminder(ctx context.Context, corpID, msgID string) (time.Time, bool, error) {
	var at sql.NullTime
	if err := r.db.QueryRowContext(ctx, "SELECT MAX(sent_at) FROM message_sends"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ?", corpID, msgID, kindRemind).Scan(&at); err != nil {
		return time.Time{}, false, fmt.Errorf("tracker: last reminder: %w", err)
	}
	return at.Time.UTC(), at.Valid, nil
}
