package tracker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/ledger"
	"github.com/yidu-io/yidu/wecom"
)

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
	names, depts, err := r.bindingsAtSend(ctx, tx, m, uids)
	if err != nil {
		return err
	}
	title := ""
	if kind == kindSend && n == 0 {
		title = m.Title
	}
	facts := make([]ledger.Fact, 0, len(b.users))
	for i, u := range b.users {
		if uids[i] == noUID {
			r.log.Warn("ledger: a batch's UserID has no uid; no entry", "corp", m.CorpID, "msgid", m.MsgID, "batch", n)
			continue
		}
		d := ledger.Delivery{Reminder: kind == kindRemind, MsgID: m.MsgID, UID: uids[i], UserID: u, Batch: n, At: at,
			ErrCode: errcode, WeComMsgID: a.wecomMsgID.String, Invalid: bad[u], Unlicensed: unlicensed[u], Title: title}
		if name, ok := names[uids[i]]; ok {
			d.Name = &name
		}
		if ds, ok := depts[uids[i]]; ok {
			d.Departments = ds
		}
		facts = append(facts, d.Fact())
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
	found, err := idmap.UIDs(ctx, r.db, corpID, users)
	if err != nil {
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
