package tracker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/yidu-io/yidu/ledger"
	"maps"
	"slices"
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

type templateCardBody struct {
	ToUser       string       `json:"touser"`
	MsgType      string       `json:"msgtype"`
	AgentID      int64        `json:"agentid"`
	TemplateCard templateCard `json:"template_card"`
	// Always on: an identical request within the interval is not
	// delivered twice (path 90236).
	EnableDuplicateCheck   int `json:"enable_duplicate_check"`
	DuplicateCheckInterval int `json:"duplicate_check_interval"`
}

type templateCard struct {
	CardType     string       `json:"card_type"`
	MainTitle    mainTitle    `json:"main_title"`
	SubTitleText string       `json:"sub_title_text,omitempty"`
	CardAction   *cardAction  `json:"card_action,omitempty"`
	TaskID       string       `json:"task_id"`
	ButtonList   []cardButton `json:"button_list"`
}

type mainTitle struct {
	Title string `json:"title"`
	Desc  string `json:"desc,omitempty"`
}

// cardAction is the whole card's jump: type 1 opens url (path 90236).
type cardAction struct {
	Type int    `json:"type"`
	URL  string `json:"url"`
}

type cardButton struct {
	Text  string `json:"text"`
	Style int    `json:"style"`
	Key   string `json:"key"`
}

// card is what every batch of one send or reminder shows.
type card struct {
	agentID  int64
	title    string
	desc     string
	body     string
	action   string // card_action.url; "" none
	key      string
	interval int // duplicate_check_interval, seconds
}

// card builds m's card for app. The message must fit it (yidu.CheckCard:
// one registered without send may not); its url goes through the tracked
// link when Options.Links is set.
func (r *Registry) card(app yidu.App, m yidu.Message, desc string) (card, error) {
	if err := yidu.CheckCard(m.Title, m.Body, m.URL); err != nil {
		return card{}, err
	}
	c := card{agentID: m.AgentID, title: m.Title, desc: desc, body: m.Body, key: app.ReadButtonKey,
		action: m.URL, interval: int(r.dup / time.Second)}
	if c.key == "" {
		c.key = DefaultReadButtonKey
	}
	if m.URL != "" && r.links != nil {
		link, err := r.links(app, m.MsgID, m.URL)
		if err != nil {
			return card{}, fmt.Errorf("tracker: tracked link of %s: %w", m.MsgID, err)
		}
		c.action = link
	}
	return c, nil
}

// request is the message/send body of one batch: a button_interaction
// template card whose task_id is unique per batch (path 90236; WeCom
// refuses a reused task_id with 42014), the body as sub_title_text, the
// url as the card's jump, and the duplicate check on. The same batch
// always gives the same bytes, which the duplicate check compares.
func (c card) request(users []string, taskID string) ([]byte, error) {
	tc := templateCard{
		CardType:     "button_interaction",
		MainTitle:    mainTitle{Title: c.title, Desc: c.desc},
		SubTitleText: c.body,
		TaskID:       taskID,
		ButtonList:   []cardButton{{Text: readButtonText, Style: 1, Key: c.key}},
	}
	if c.action != "" {
		tc.CardAction = &cardAction{Type: 1, URL: c.action}
	}
	return json.Marshal(templateCardBody{
		ToUser:                 strings.Join(users, "|"),
		MsgType:                "template_card",
		AgentID:                c.agentID,
		TemplateCard:           tc,
		EnableDuplicateCheck:   1,
		DuplicateCheckInterval: c.interval,
	})
}

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

// sendRow is one message_sends row.
type sendRow struct {
	kind           string
	batch          int
	status         string
	errcode        int64
	users, invalid int
	missing, bad   int
	resent         bool
	wecomMsgID     string
	at             time.Time
	recalled       bool
}

func (row *sendRow) outcome() yidu.BatchOutcome {
	return yidu.BatchOutcome{
		Batch: row.batch, Status: yidu.SendStatus(row.status), ErrCode: row.errcode,
		Users: row.users, Invalid: row.invalid, Missing: row.missing, BadUserIDs: row.bad,
		Resent: row.resent, Recalled: row.recalled, Reminder: row.kind == kindRemind, At: row.at,
	}
}

// sendRows returns the message_sends rows of a message (kind "" : every
// kind), oldest first (the notice before its reminders).
func (r *Registry) sendRows(ctx context.Context, corpID, msgID, kind string) ([]sendRow, error) {
	q := "SELECT kind, batch, status, errcode, users, missing, bad_userids, resent, COALESCE(invalid, ''), " +
		"COALESCE(wecom_msgid, ''), sent_at, recalled_at IS NOT NULL FROM message_sends WHERE corp_id = ? AND msgid = ?"
	args := []any{corpID, msgID}
	if kind != "" {
		q += " AND kind = ?"
		args = append(args, kind)
	}
	rows, err := r.db.QueryContext(ctx, q+" ORDER BY sent_at, kind DESC, batch", args...)
	if err != nil {
		return nil, fmt.Errorf("tracker: send batches of %s: %w", msgID, err)
	}
	defer rows.Close()
	var out []sendRow
	for rows.Next() {
		var row sendRow
		var invalid string
		if err := rows.Scan(&row.kind, &row.batch, &row.status, &row.errcode, &row.users, &row.missing, &row.bad,
			&row.resent, &invalid, &row.wecomMsgID, &row.at, &row.recalled); err != nil {
			return nil, fmt.Errorf("tracker: send batches of %s: %w", msgID, err)
		}
		if invalid != "" {
			row.invalid = strings.Count(invalid, "|") + 1
		}
		row.at = row.at.UTC()
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tracker: send batches of %s: %w", msgID, err)
	}
	return out, nil
}

// batchState is what the rows of one batch say.
type batchState struct {
	last    *sendRow // the latest row
	sent    *sendRow // a row WeCom accepted
	unknown *sendRow // a row whose outcome is unknown
}

// outcome is the batch as recorded: sent, else unknown, else the latest.
func (st batchState) outcome() yidu.BatchOutcome {
	row := st.last
	switch {
	case st.sent != nil:
		row = st.sent
	case st.unknown != nil:
		row = st.unknown
	}
	o := row.outcome()
	o.Earlier = true
	return o
}

// batchStates returns the state of every batch of kind that has rows.
func (r *Registry) batchStates(ctx context.Context, corpID, msgID, kind string) (map[int]batchState, error) {
	rows, err := r.sendRows(ctx, corpID, msgID, kind)
	if err != nil {
		return nil, err
	}
	out := map[int]batchState{}
	for i := range rows {
		row := &rows[i]
		st := out[row.batch]
		st.last = row
		switch row.status {
		case statusSent:
			st.sent = row
		case statusUnknown:
			st.unknown = row
		}
		out[row.batch] = st
	}
	return out, nil
}

// SendOutcomes returns the state of every send batch of a message, in
// batch order (reminders are not in it): what GET /messages/{msgid}
// shows. Empty when the message was never sent through yidu.
func (r *Registry) SendOutcomes(ctx context.Context, corpID, msgID string) ([]yidu.BatchOutcome, error) {
	states, err := r.batchStates(ctx, corpID, msgID, kindSend)
	if err != nil {
		return nil, err
	}
	out := make([]yidu.BatchOutcome, 0, len(states))
	for _, n := range slices.Sorted(maps.Keys(states)) {
		o := states[n].outcome()
		o.Earlier = false
		out = append(out, o)
	}
	return out, nil
}

// nobody records a batch none of whose members could be addressed (no
// call was made): a later send tries it again, when the directory may
// know them.
func (r *Registry) nobody(ctx context.Context, kind string, m yidu.Message, n int, b sendBatch) (yidu.BatchOutcome, error) {
	at := r.now().UTC().Truncate(time.Millisecond)
	if _, err := r.db.ExecContext(ctx, "INSERT IGNORE INTO message_sends (corp_id, msgid, kind, batch, status, sent_at, missing, bad_userids)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?)", m.CorpID, m.MsgID, kind, n, statusNobody, at, b.missing, b.badUIDs); err != nil {
		return yidu.BatchOutcome{}, fmt.Errorf("tracker: record batch %d of %s: %w", n, m.MsgID, err)
	}
	return yidu.BatchOutcome{Batch: n, Status: yidu.SendNobody, Missing: b.missing, BadUserIDs: b.badUIDs,
		Reminder: kind == kindRemind, At: at}, nil
}

// batch sends one batch: the row first (unknown), then the call, retried
// with capped backoff only while WeCom says nothing was delivered, then
// the row's final status. An unknown outcome is sent once more, identical,
// while WeCom's duplicate check covers it (prior: the unknown row of an
// earlier attempt, whose resend this is).
func (r *Registry) batch(ctx context.Context, kind string, m yidu.Message, n int, b sendBatch, body []byte, prior *sendRow, rep *yidu.SendReport) (yidu.BatchOutcome, error) {
	o := yidu.BatchOutcome{Batch: n, Users: len(b.users), Missing: b.missing, BadUserIDs: b.badUIDs, Reminder: kind == kindRemind}
	var at time.Time
	if prior == nil {
		at = r.now().UTC().Truncate(time.Millisecond)
		if _, err := r.db.ExecContext(ctx, "INSERT INTO message_sends (corp_id, msgid, kind, batch, status, sent_at, users, missing, bad_userids)"+
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", m.CorpID, m.MsgID, kind, n, statusUnknown, at, len(b.users), b.missing, b.badUIDs); err != nil {
			return o, fmt.Errorf("tracker: record batch %d of %s: %w", n, m.MsgID, err)
		}
	} else {
		// The resend is marked before it leaves: a crash during it must
		// not allow a third.
		at = prior.at
		if err := r.markResent(ctx, m, kind, n, at); err != nil {
			return o, err
		}
		o.Resent = true
	}
	o.At = at
	rep.Batches++
	status, res, callErr := r.call(ctx, m, body)
	if status == statusUnknown && prior == nil && ctx.Err() == nil && r.now().Before(at.Add(r.dup-resendMargin)) {
		r.log.Warn("send outcome unknown; sending the batch once more under the duplicate check",
			"corp", m.CorpID, "msgid", m.MsgID, "kind", kind, "batch", n, "err", callErr)
		if err := r.markResent(ctx, m, kind, n, at); err != nil {
			return o, err
		}
		o.Resent = true
		if err := r.sleep(ctx, r.retry.Initial); err == nil {
			status, res, callErr = r.call(ctx, m, body)
		}
	}
	if o.Resent {
		r.met.resends.Inc()
		switch {
		case status == statusRefused && res.ErrCode == errTaskIDUsed:
			// WeCom checked the task_id before the duplicate: the first
			// attempt was delivered. Its msgid is unknown (no recall).
			status, res.MsgID, res.ResponseCode = statusSent, "", ""
		case status != statusSent:
			// A resend refused or never sent says nothing of the first
			// attempt, which may have been delivered: still unknown.
			status = statusUnknown
		}
	}
	r.met.sendBatches.WithLabelValues(kind, status).Inc()
	o.Status, o.ErrCode = yidu.SendStatus(status), res.ErrCode
	switch status {
	case statusSent:
		o.Invalid = len(res.InvalidUsers)
		rep.Sent += len(b.users) - o.Invalid
		rep.Invalid += o.Invalid
		r.met.invalidUsers.Add(float64(o.Invalid))
	case statusUnknown:
		o.ErrCode = 0
		rep.Unknown += len(b.users)
	default:
		rep.Refused += len(b.users)
	}
	if status != statusUnknown {
		var inv, wmsg, rc sql.NullString
		if len(res.InvalidUsers) > 0 {
			inv = sql.NullString{String: strings.Join(res.InvalidUsers, "|"), Valid: true}
		}
		if res.MsgID != "" {
			wmsg = sql.NullString{String: res.MsgID, Valid: true}
		}
		if res.ResponseCode != "" {
			rc = sql.NullString{String: res.ResponseCode, Valid: true}
		}
		// unlicenseduser (doc path 90236) is kept for each answered
		// batch: "" when WeCom listed nobody, NULL only for a batch
		// without WeCom's answer.
		unl := sql.NullString{String: strings.Join(res.UnlicensedUsers, "|"), Valid: status == statusSent}
		// A fresh context: the outcome must be recorded even when ctx ended
		// during the call, or a delivered batch would stay unknown (safe)
		// and an undelivered one would never be retried.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := r.recordOutcome(wctx, kind, m, n, at, b, status, o.ErrCode, answer{inv, unl, wmsg, rc}, res); err != nil {
			r.log.Error("record send outcome", "corp", m.CorpID, "msgid", m.MsgID, "batch", n, "status", status, "err", err)
		}
	}
	switch {
	case status == statusUnknown:
		r.log.Warn("send outcome unknown; batch not sent again", "corp", m.CorpID, "msgid", m.MsgID, "kind", kind, "batch", n, "err", callErr)
	case status == statusRefused && frequencyCodes[o.ErrCode]:
		r.log.Warn("WeCom's frequency limit refused the batch after waiting", "corp", m.CorpID, "msgid", m.MsgID, "kind", kind,
			"batch", n, "errcode", o.ErrCode)
	}
	if callErr != nil && ctx.Err() != nil {
		return o, fmt.Errorf("tracker: send batch %d of %s: %w", n, m.MsgID, ctx.Err())
	}
	return o, nil
}

// answer is WeCom's answer to a batch as message_sends keeps it.
type answer struct {
	invalid, unlicensed, wecomMsgID, responseCode sql.NullString
}

// recordOutcome writes a batch's final status and, with a ledger, one
// evidence entry per recipient in the same transaction (issue 40).
func (r *Registry) recordOutcome(ctx context.Context, kind string, m yidu.Message, n int, at time.Time, b sendBatch,
	status string, errcode int64, a answer, res wecom.SendResult) error {
	const q = "UPDATE message_sends SET status = ?, errcode = ?, invalid = ?, unlicensed = ?, wecom_msgid = ?, response_code = ?" +
		" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = ? AND sent_at = ?"
	args := []any{status, errcode, a.invalid, a.unlicensed, a.wecomMsgID, a.responseCode, m.CorpID, m.MsgID, kind, n, at}
	if r.ledger == nil {
		_, err := r.db.ExecContext(ctx, q, args...)
		return err
	}
	uids := b.uids
	if len(uids) != len(b.users) {
		// A reminder's batch (Remind, RemindBatch) comes as UserIDs.
		var err error
		if uids, err = r.uidsOf(ctx, m.CorpID, b.users); err != nil {
			return err
		}
	}
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return err
	}
	bad := make(map[string]bool, len(res.InvalidUsers))
	for _, u := range res.InvalidUsers {
		bad[u] = true
	}
	unlicensed := make(map[string]bool, len(res.UnlicensedUsers))
	for _, u := range res.UnlicensedUsers {
		unlicensed[u] = true
	}
	facts := make([]ledger.Fact, 0, len(b.users))
	for i, u := range b.users {
		if uids[i] == noUID {
			r.log.Warn("ledger: a batch's UserID has no uid; no entry", "corp", m.CorpID, "msgid", m.MsgID, "batch", n)
			continue
		}
		facts = append(facts, ledger.Delivery{Reminder: kind == kindRemind, MsgID: m.MsgID, UID: uids[i], UserID: u, Batch: n, At: at,
			ErrCode: errcode, WeComMsgID: a.wecomMsgID.String, Invalid: bad[u], Unlicensed: unlicensed[u]}.Fact())
	}
	if _, err := r.ledger.Append(ctx, tx, m.CorpID, facts); err != nil {
		return err
	}
	return tx.Commit()
}

// noUID marks a UserID uidsOf did not find.
const noUID = ^uint32(0)

// uidsOf returns the uids of users (members who left included), in
// order; noUID for a UserID users does not hold.
func (r *Registry) uidsOf(ctx context.Context, corpID string, users []string) ([]uint32, error) {
	out := make([]uint32, len(users))
	if len(users) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(users)+1)
	args = append(args, corpID)
	for _, u := range users {
		args = append(args, u)
	}
	rows, err := r.db.QueryContext(ctx, "SELECT userid, uid FROM users WHERE corp_id = ? AND userid IN (?"+strings.Repeat(",?", len(users)-1)+")", args...)
	if err != nil {
		return nil, fmt.Errorf("tracker: uids of a batch: %w", err)
	}
	defer rows.Close()
	found := make(map[string]uint32, len(users))
	for rows.Next() {
		var id string
		var uid uint32
		if err := rows.Scan(&id, &uid); err != nil {
			return nil, fmt.Errorf("tracker: uids of a batch: %w", err)
		}
		found[id] = uid
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tracker: uids of a batch: %w", err)
	}
	for i, u := range users {
		uid, ok := found[u]
		if !ok {
			uid = noUID
		}
		out[i] = uid
	}
	return out, nil
}

// stops reports whether a batch's outcome ends its send: WeCom's frequency
// limit still held after the waits, or WeCom could not be reached at all
// after the retries. The batches after it would only fare the same; they
// are reported unsent, and the next send sends them.
func stops(o yidu.BatchOutcome) bool {
	return o.Status == yidu.SendRefused && frequencyCodes[o.ErrCode] || o.Status == yidu.SendUnsent
}

// markResent marks the batch row whose resend is about to leave.
func (r *Registry) markResent(ctx context.Context, m yidu.Message, kind string, n int, at time.Time) error {
	if _, err := r.db.ExecContext(ctx, "UPDATE message_sends SET resent = 1"+
		" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = ? AND sent_at = ?",
		m.CorpID, m.MsgID, kind, n, at); err != nil {
		return fmt.Errorf("tracker: mark batch %d of %s resent: %w", n, m.MsgID, err)
	}
	return nil
}

// call posts body, retrying what WeCom did not deliver.
func (r *Registry) call(ctx context.Context, m yidu.Message, body []byte) (string, wecom.SendResult, error) {
	var res wecom.SendResult
	status, code, err := r.retrying(ctx, func() (int64, string, error) {
		var err error
		res, err = r.sender.SendMessage(ctx, m.CorpID, m.AgentID, body)
		return res.ErrCode, res.ErrMsg, err
	})
	if status == statusUnsent || status == statusUnknown {
		res = wecom.SendResult{}
	}
	res.ErrCode = code
	return status, res, err
}

// retrying makes one WeCom call (do: its errcode and errmsg, or an error
// wrapping wecom.ErrNotSent when the request never left, or another for
// an unknown outcome) and retries it with capped backoff while WeCom says
// nothing happened: a retryable errcode, or a request that never left.
// Refusals for frequency wait at least rateLimitWait.
func (r *Registry) retrying(ctx context.Context, do func() (int64, string, error)) (status string, code int64, err error) {
	delay := r.retry.Initial
	for attempt := 1; ; attempt++ {
		code, msg, err := do()
		retry := false
		switch {
		case err == nil && code == 0:
			return statusSent, 0, nil
		case err == nil:
			status = statusRefused
			err = fmt.Errorf("errcode %d: %s", code, msg)
			retry = retryableCodes[code]
		case errors.Is(err, wecom.ErrNotSent):
			status, code = statusUnsent, 0
			retry = true
		default:
			return statusUnknown, 0, err
		}
		if !retry || attempt >= r.retry.Attempts || ctx.Err() != nil {
			return status, code, err
		}
		wait := jitter.Apply(delay)
		if frequencyCodes[code] {
			wait = max(wait, rateLimitWait)
		}
		if serr := r.sleep(ctx, wait); serr != nil {
			return status, code, serr
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

// appOf returns the configured app m was sent from (for its button key and
// links), or what m knows of it.
func (r *Registry) appOf(m yidu.Message) yidu.App {
	if a, ok := r.apps[m.App]; ok && a.CorpID == m.CorpID {
		return a
	}
	return yidu.App{Name: m.App, CorpID: m.CorpID, AgentID: m.AgentID}
}

// Remind sends a reminder card to userIDs (campaign.Service passes the
// unread people it found due), SendBatch per call; reminder K's batch N
// carries task_id "<msgid>@r<K>-<N>" so a press on it counts as a read of
// m. The card is the notice's (body and link) with "提醒" (reminderDesc)
// under the title. Every batch is recorded in message_sends with kind
// "remind" (so recall recalls it). Who may remind whom, and the least
// interval between two reminders of a person, are campaign.Service's to
// decide. A recalled message is not reminded (yidu.ErrRecalled).
func (r *Registry) Remind(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	return r.remind(ctx, m, userIDs, reminderDesc)
}

// reconfirmDesc is the card of a material new version of a notice read
// under read_rule acknowledged (issue 39).
const reconfirmDesc = "通知已更新，请重新确认"

// Reconfirm sends userIDs (those who acknowledged an earlier version;
// campaign.Service.Reconfirm decides, once each) the notice's card with
// 通知已更新，请重新确认 under the title: a reminder in every other way
// (task ids, message_sends kind "remind", recall).
func (r *Registry) Reconfirm(ctx context.Context, m yidu.Message, userIDs []string) (yidu.RemindReport, error) {
	return r.remind(ctx, m, userIDs, reconfirmDesc)
}

func (r *Registry) remind(ctx context.Context, m yidu.Message, userIDs []string, desc string) (yidu.RemindReport, error) {
	var rep yidu.RemindReport
	if r.sender == nil {
		return rep, yidu.ErrNoSender
	}
	if !yidu.MsgID(m.MsgID).Valid() || !yidu.CorpID(m.CorpID).Valid() {
		return rep, yidu.Invalidf("bad message")
	}
	if m.Recalled() {
		return rep, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	c, err := r.card(r.appOf(m), m, desc)
	if err != nil {
		return rep, err
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
	r.met.badUserIDs.Add(float64(rep.BadUserIDs))
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
	stopped := false
	for n := 0; n*SendBatch < len(users); n++ {
		chunk := users[n*SendBatch : min((n+1)*SendBatch, len(users))]
		if stopped {
			rep.Outcomes = append(rep.Outcomes, yidu.BatchOutcome{Batch: n, Status: yidu.SendUnsent, Users: len(chunk), Reminder: true})
			continue
		}
		taskID := yidu.ReminderTaskID(yidu.MsgID(m.MsgID), k, n)
		body, err := c.request(chunk, taskID)
		if err != nil {
			return rep, fmt.Errorf("tracker: card body: %w", err)
		}
		o, err := r.batch(ctx, kindRemind, m, n, sendBatch{users: chunk}, body, nil, &rep.SendReport)
		if err != nil {
			return rep, err
		}
		rep.Outcomes = append(rep.Outcomes, o)
		stopped = stops(o)
	}
	rep.Reminded = rep.Sent
	r.log.Info("reminded", "corp", m.CorpID, "msgid", m.MsgID, "reminder", k, "batches", rep.Batches,
		"sent", rep.Sent, "invalid", rep.Invalid, "refused", rep.Refused, "unknown", rep.Unknown, "bad_userids", rep.BadUserIDs)
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
