package tracker

import (
	"context"
	"database/sql"
	"fmt"
	"github.com/yidu-io/yidu/ledger"
	"time"

	"github.com/yidu-io/yidu"
)

// RecallWindow is how long after a send WeCom recalls a message
// (message/recall: 撤回24小时内通过发送应用消息接口推送的消息, doc path
// 96460).
const RecallWindow = 24 * time.Hour

// Recall recalls every card of m that WeCom accepted, the notice's batches
// and its reminders', through message/recall (doc path 96460) with the
// msgid message/send answered for each, and marks m recalled with read as
// its frozen read count (the dashboard passes its live count): from then
// on its numbers do not move, and it is neither sent nor reminded again.
//
// Nothing is recalled, and the error wraps yidu.ErrNotRecallable, when a
// batch to recall was sent RecallWindow ago or more (WeCom would refuse
// it), or when no card of m was sent through yidu with a msgid. A batch
// whose outcome is unknown has no msgid and cannot be recalled: it is
// counted as Unrecallable. When WeCom refuses some batches the others stay
// recalled, m is not marked, and the error wraps yidu.ErrRecallIncomplete:
// calling Recall again retries the rest. A recalled m answers its report
// again (idempotent).
func (r *Registry) Recall(ctx context.Context, m yidu.Message, read int64) (yidu.RecallReport, error) {
	var rep yidu.RecallReport
	if r.sender == nil {
		return rep, yidu.ErrNoSender
	}
	rows, err := r.sendRows(ctx, m.CorpID, m.MsgID, "")
	if err != nil {
		return rep, err
	}
	var todo []sendRow
	for _, row := range rows {
		switch {
		case row.recalled:
			rep.Already++
		case row.status == statusSent && row.wecomMsgID != "":
			todo = append(todo, row)
		case row.status == statusSent, row.status == statusUnknown:
			// Delivered or maybe delivered, without a msgid to recall.
			rep.Unrecallable++
		}
	}
	if m.Recalled() && len(todo) == 0 {
		rep.RecalledAt = m.RecalledAt
		return rep, nil
	}
	if len(todo) == 0 && rep.Already == 0 {
		if rep.Unrecallable > 0 {
			return rep, fmt.Errorf("%w: WeCom gave no msgid for the %d batch(es) of %s that may have been delivered", yidu.ErrNotRecallable, rep.Unrecallable, m.MsgID)
		}
		return rep, fmt.Errorf("%w: no card of %s was sent through yidu", yidu.ErrNotRecallable, m.MsgID)
	}
	now := r.now().UTC()
	for _, row := range todo {
		if now.Sub(row.at) >= RecallWindow {
			return rep, fmt.Errorf("%w: %s was sent at %s, more than 24 hours ago; WeCom recalls a message only within 24 hours of sending it (message/recall, doc path 96460)",
				yidu.ErrNotRecallable, batchName(m.MsgID, row), row.at.Format(time.RFC3339))
		}
	}
	for _, row := range todo {
		code, err := r.recallOne(ctx, m, row.wecomMsgID)
		if code == 0 && err == nil {
			r.met.recallBatches.WithLabelValues("recalled").Inc()
			rep.Recalled++
		} else {
			result := "refused"
			if code == 0 {
				result = "failed"
			}
			r.met.recallBatches.WithLabelValues(result).Inc()
			o := row.outcome()
			o.ErrCode = code
			rep.Failed = append(rep.Failed, o)
			r.log.Warn("recall refused", "corp", m.CorpID, "msgid", m.MsgID, "batch", batchName(m.MsgID, row), "errcode", code, "err", err)
		}
		var at any
		if code == 0 && err == nil {
			at = now
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_, uerr := r.db.ExecContext(wctx, "UPDATE message_sends SET recalled_at = ?, recall_errcode = ?"+
			" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = ? AND sent_at = ?",
			at, code, m.CorpID, m.MsgID, row.kind, row.batch, row.at)
		cancel()
		if uerr != nil {
			return rep, fmt.Errorf("tracker: record recall of %s: %w", batchName(m.MsgID, row), uerr)
		}
	}
	if len(rep.Failed) > 0 {
		return rep, fmt.Errorf("%w: WeCom recalled %d of %d batches of %s; recall again to retry the rest",
			yidu.ErrRecallIncomplete, rep.Recalled, len(todo), m.MsgID)
	}
	if err := r.markRecalled(ctx, m, now, read, rep); err != nil {
		return rep, fmt.Errorf("tracker: mark %s recalled: %w", m.MsgID, err)
	}
	rep.RecalledAt = now.Truncate(time.Millisecond)
	if m.Recalled() {
		rep.RecalledAt = m.RecalledAt
	}
	r.log.Info("recalled", "corp", m.CorpID, "msgid", m.MsgID, "recalled", rep.Recalled, "already", rep.Already,
		"unrecallable", rep.Unrecallable, "read_at_recall", read)
	return rep, nil
}

// recallOne recalls one WeCom message, retrying what WeCom did not do.
// code is WeCom's refusal; err without code: no answer.
func (r *Registry) recallOne(ctx context.Context, m yidu.Message, wecomMsgID string) (int64, error) {
	_, code, err := r.retrying(ctx, func() (int64, string, error) {
		res, err := r.sender.RecallMessage(ctx, m.CorpID, m.AgentID, wecomMsgID)
		return res.ErrCode, res.ErrMsg, err
	})
	return code, err
}

// batchName names a batch in errors and logs: its task_id's suffix.
func batchName(msgID string, row sendRow) string {
	if row.kind == kindRemind {
		return fmt.Sprintf("reminder batch %d of %s (sent %s)", row.batch, msgID, row.at.Format(time.RFC3339))
	}
	return fmt.Sprintf("batch %s", yidu.TaskID(yidu.MsgID(msgID), row.batch))
}

// markRecalled marks m recalled and, with a ledger, appends the recall's
// entry in the same transaction when this call is the one that marked it.
func (r *Registry) markRecalled(ctx context.Context, m yidu.Message, now time.Time, read int64, rep yidu.RecallReport) error {
	const q = "UPDATE messages SET recalled_at = ?, read_at_recall = ? WHERE corp_id = ? AND msgid = ? AND recalled_at IS NULL"
	if r.ledger == nil {
		_, err := r.db.ExecContext(ctx, q, now, max(read, 0), m.CorpID, m.MsgID)
		return err
	}
	tx, err := r.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, q, now, max(read, 0), m.CorpID, m.MsgID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return err
	}
	f := ledger.Recall{MsgID: m.MsgID, At: now, Batches: rep.Recalled + rep.Already}.Fact()
	if _, err := r.ledger.Append(ctx, tx, m.CorpID, []ledger.Fact{f}); err != nil {
		return err
	}
	return tx.Commit()
}
