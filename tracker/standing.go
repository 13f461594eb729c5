package tracker

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/internal/sqlrows"
	"github.com/yidu-io/yidu/ledger"
)

// JoinBatchBase numbers the send batches that carry a standing notice's
// card to members who joined its audience after its first send (issue
// 51): batch JoinBatchBase+k is the k-th such batch. A first send has at
// most MaxRecipients/SendBatch (1,000) batches, so the two never meet;
// the joiners' batches are kind send in message_sends (what the ledger's
// send entries and evidence read), with task_id "<msgid>@<batch>".
const JoinBatchBase = 1_000_000

// Enrol makes members (active, not recipients yet) recipients of the
// sent message m, once each however many replicas try: one transaction,
// the message's row locked, writes a standing_enrolments row per member
// (its primary key decides: a member enrolled before is left as they
// are), their recipient rows (the denominator grows) and recipient_count,
// all in the next join batch; then Redis gets them in the recipients
// bitmap. It returns the batch and the members it enrolled (none: batch
// 0). joined is when they joined the audience (the sync that found
// them), deadline theirs, version the notice's current version.
func (r *Registry) Enrol(ctx context.Context, m yidu.Message, members map[uint32]string, version int, joined, deadline time.Time) (int, []uint32, error) {
	if len(members) == 0 {
		return 0, nil, nil
	}
	if m.Recalled() {
		return 0, nil, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("tracker: enrol in %s: %w", m.MsgID, err)
	}
	defer tx.Rollback()
	var count int64
	if err := tx.QueryRowContext(ctx, "SELECT recipient_count FROM messages WHERE corp_id = ? AND msgid = ? FOR UPDATE",
		m.CorpID, m.MsgID).Scan(&count); err != nil {
		return 0, nil, fmt.Errorf("tracker: enrol in %s: %w", m.MsgID, err)
	}
	var batch int
	if err := tx.QueryRowContext(ctx, "SELECT COALESCE(MAX(batch) + 1, ?) FROM standing_enrolments WHERE corp_id = ? AND msgid = ?",
		JoinBatchBase, m.CorpID, m.MsgID).Scan(&batch); err != nil {
		return 0, nil, fmt.Errorf("tracker: enrol in %s: %w", m.MsgID, err)
	}
	// Not already recipients (the first send's, or enrolled before):
	// their history stays theirs.
	uids := roaring.New()
	for uid := range members {
		uids.Add(uid)
	}
	have, err := r.recipientsAmong(ctx, tx, m, uids.ToArray())
	if err != nil {
		return 0, nil, err
	}
	uids.AndNot(have)
	if uids.IsEmpty() {
		return 0, nil, nil
	}
	joined, deadline = joined.UTC().Truncate(time.Millisecond), deadline.UTC().Truncate(time.Millisecond)
	all := uids.ToArray()
	for start := 0; start < len(all); start += InsertBatch {
		chunk := all[start:min(start+InsertBatch, len(all))]
		args := make([]any, 0, 8*len(chunk))
		for _, uid := range chunk {
			args = append(args, m.CorpID, m.MsgID, uid, members[uid], version, batch, joined, deadline)
		}
		if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO standing_enrolments (corp_id, msgid, uid, userid, version, batch, joined_at, deadline) VALUES "+
			strings.TrimSuffix(strings.Repeat("(?,?,?,?,?,?,?,?),", len(chunk)), ","), args...); err != nil {
			return 0, nil, fmt.Errorf("tracker: enrol in %s: %w", m.MsgID, err)
		}
		_, n, err := flushd.InsertRecipients(ctx, tx, m.CorpID, m.MsgID, chunk, InsertBatch)
		if err != nil {
			return 0, nil, fmt.Errorf("tracker: enrol in %s: recipient rows: %w", m.MsgID, err)
		}
		count += n
	}
	if _, err := tx.ExecContext(ctx, "UPDATE messages SET recipient_count = ? WHERE corp_id = ? AND msgid = ?", count, m.CorpID, m.MsgID); err != nil {
		return 0, nil, fmt.Errorf("tracker: enrol in %s: %w", m.MsgID, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, nil, fmt.Errorf("tracker: enrol in %s: %w", m.MsgID, err)
	}
	m.Recipients = count
	if err := r.store.PutMessage(ctx, m, uids); err != nil {
		// MySQL holds them: a restore from it (the recorder's, the
		// dashboard's) brings them back; the send goes on.
		r.log.Warn("enrolled members not in Redis yet", "corp", m.CorpID, "msgid", m.MsgID, "err", err)
	}
	return batch, all, nil
}

// recipientsAmong returns which of uids already have a recipient row of m.
func (r *Registry) recipientsAmong(ctx context.Context, tx *sql.Tx, m yidu.Message, uids []uint32) (*roaring.Bitmap, error) {
	out := roaring.New()
	for start := 0; start < len(uids); start += InsertBatch {
		chunk := uids[start:min(start+InsertBatch, len(uids))]
		args := make([]any, 0, len(chunk)+2)
		args = append(args, m.CorpID, m.MsgID)
		for _, u := range chunk {
			args = append(args, u)
		}
		rows, err := tx.QueryContext(ctx, "SELECT uid FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid IN (?"+
			strings.Repeat(",?", len(chunk)-1)+")", args...)
		if err != nil {
			return nil, fmt.Errorf("tracker: recipients of %s: %w", m.MsgID, err)
		}
		for rows.Next() {
			var u uint32
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return nil, fmt.Errorf("tracker: recipients of %s: %w", m.MsgID, err)
			}
			out.Add(u)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("tracker: recipients of %s: %w", m.MsgID, err)
		}
	}
	return out, nil
}

// Enrolled returns the members enrolled in m after its first send: the
// notice's own rounds (campaign/loops, Rounds.Joiners) and a resumed
// first send (withoutJoiners) leave them out.
func (r *Registry) Enrolled(ctx context.Context, corpID, msgID string) (*roaring.Bitmap, error) {
	rows, err := r.db.QueryContext(ctx, "SELECT uid FROM standing_enrolments WHERE corp_id = ? AND msgid = ?", corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("tracker: enrolled in %s: %w", msgID, err)
	}
	defer rows.Close()
	out := roaring.New()
	for rows.Next() {
		var u uint32
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("tracker: enrolled in %s: %w", msgID, err)
		}
		out.Add(u)
	}
	return out, rows.Err()
}

// Enrolments returns m's enrolments that joined at or after since, oldest
// first, at most limit (0: all).
func (r *Registry) Enrolments(ctx context.Context, corpID, msgID string, since time.Time, limit int) ([]yidu.Enrolment, error) {
	q := "SELECT uid, userid, version, batch, joined_at, deadline, sent_at, status FROM standing_enrolments" +
		" WHERE corp_id = ? AND msgid = ? AND joined_at >= ? ORDER BY joined_at, uid"
	if limit > 0 {
		q += " LIMIT " + strconv.Itoa(limit)
	}
	out, err := sqlrows.List(ctx, r.db, func(rows *sql.Rows, e *yidu.Enrolment) error {
		var sent sql.NullTime
		if err := rows.Scan(&e.UID, &e.UserID, &e.Version, &e.Batch, &e.JoinedAt, &e.Deadline, &sent, &e.Status); err != nil {
			return err
		}
		e.JoinedAt, e.Deadline = e.JoinedAt.UTC(), e.Deadline.UTC()
		if sent.Valid {
			t := sent.Time.UTC()
			e.SentAt = &t
		}
		return nil
	}, q, corpID, msgID, since.UTC())
	if err != nil {
		return nil, fmt.Errorf("tracker: enrolments of %s: %w", msgID, err)
	}
	return out, nil
}

// UnsentJoinBatches returns m's join batches with members not sent yet
// (found, then a crash or WeCom's refusal): the enroller sends them.
func (r *Registry) UnsentJoinBatches(ctx context.Context, corpID, msgID string) ([]int, error) {
	out, err := sqlrows.List(ctx, r.db, func(rows *sql.Rows, b *int) error { return rows.Scan(b) },
		"SELECT DISTINCT batch FROM standing_enrolments WHERE corp_id = ? AND msgid = ? AND sent_at IS NULL ORDER BY batch", corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("tracker: unsent joiners of %s: %w", msgID, err)
	}
	return out, nil
}

// SendJoiners sends join batch n of m (Enrol's) its card: the notice's
// own card, task_id "<msgid>@<n>", recorded in message_sends before and
// after the call like any send batch (an unknown outcome is sent once
// more, identical, under WeCom's duplicate check, never a third time).
// Once WeCom answered, the batch's enrolments get their sent_at, each
// with its ledger entry (ledger.KindEnrol) and its audit row (enrol) in
// one transaction. A batch already answered is only finished.
func (r *Registry) SendJoiners(ctx context.Context, m yidu.Message, n int) (yidu.BatchOutcome, error) {
	if r.sender == nil {
		return yidu.BatchOutcome{}, yidu.ErrNoSender
	}
	if n < JoinBatchBase {
		return yidu.BatchOutcome{}, yidu.Invalidf("batch %d is not a join batch", n)
	}
	if m.Recalled() {
		return yidu.BatchOutcome{}, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	people, err := r.batchEnrolments(ctx, m, n)
	if err != nil || len(people) == 0 {
		return yidu.BatchOutcome{}, err
	}
	states, err := r.batchStates(ctx, m.CorpID, m.MsgID, kindSend)
	if err != nil {
		return yidu.BatchOutcome{}, err
	}
	st, seen := states[n]
	var prior *sendRow
	switch {
	case !seen:
	case st.sent != nil:
		return st.outcome(), r.finishJoiners(ctx, m, n, st.sent.at, statusSent, st.sent.errcode)
	case st.unknown != nil && !st.unknown.resent && r.now().Before(st.unknown.at.Add(r.dup-resendMargin)):
		prior = st.unknown
	case st.unknown != nil:
		// Sent once and resent once, outcome never known: never a third
		// time (the card may be on their phone).
		return st.outcome(), r.finishJoiners(ctx, m, n, st.unknown.at, statusUnknown, 0)
	case st.last != nil && st.last.status == statusRefused && !frequencyCodes[st.last.errcode]:
		// WeCom refused it for good (82001 every UserID invalid, …): the
		// same task_id would only be refused again (42014).
		return st.outcome(), r.finishJoiners(ctx, m, n, st.last.at, statusRefused, st.last.errcode)
	}
	c, err := r.card(r.appOf(m), m, "")
	if err != nil {
		return yidu.BatchOutcome{}, err
	}
	uids := make([]uint32, 0, len(people))
	for _, e := range people {
		uids = append(uids, e.UID)
	}
	var rep yidu.SendReport
	b, err := r.userIDs(ctx, m.CorpID, uids, &rep)
	if err != nil {
		return yidu.BatchOutcome{}, err
	}
	if len(b.users) == 0 {
		o, err := r.nobody(ctx, kindSend, m, n, b)
		if err != nil {
			return o, err
		}
		return o, r.finishJoiners(ctx, m, n, o.At, statusNobody, 0)
	}
	if !seen && !r.allowNotice(m.App) {
		return yidu.BatchOutcome{}, fmt.Errorf("%w: app %s", yidu.ErrRateLimited, m.App)
	}
	body, err := c.request(b.users, yidu.TaskID(yidu.MsgID(m.MsgID), n))
	if err != nil {
		return yidu.BatchOutcome{}, fmt.Errorf("tracker: card body: %w", err)
	}
	o, err := r.batch(ctx, kindSend, m, n, b, body, prior, &rep)
	if err != nil {
		return o, err
	}
	switch o.Status {
	case yidu.SendSent, yidu.SendUnknown:
		// Unknown: the card may have reached them; the one resend is
		// behind us or within the duplicate check. Either way they were
		// told as far as yidu can tell, at o.At.
		if o.Status == yidu.SendUnknown && prior == nil && !o.Resent {
			return o, nil // the next tick resends it under the duplicate check
		}
		return o, r.finishJoiners(ctx, m, n, o.At, string(o.Status), o.ErrCode)
	}
	if o.Status == yidu.SendRefused && !frequencyCodes[o.ErrCode] {
		// Refused for good: recorded, not tried every tick (the joiner
		// stays a recipient, shown unsent; a reminder may reach them).
		r.log.Warn("join batch refused by WeCom", "corp", m.CorpID, "msgid", m.MsgID, "batch", n, "errcode", o.ErrCode)
		return o, r.finishJoiners(ctx, m, n, o.At, statusRefused, o.ErrCode)
	}
	// WeCom's frequency limit, or unsent: the next tick tries again.
	return o, fmt.Errorf("tracker: join batch %d of %s: %s (errcode %d)", n, m.MsgID, o.Status, o.ErrCode)
}

// batchEnrolments are join batch n's members not finished yet.
func (r *Registry) batchEnrolments(ctx context.Context, m yidu.Message, n int) ([]yidu.Enrolment, error) {
	out, err := unfinishedJoiners(ctx, r.db, m, n, "")
	if err != nil {
		return nil, fmt.Errorf("tracker: join batch %d of %s: %w", n, m.MsgID, err)
	}
	return out, nil
}

// unfinishedJoiners reads join batch n's members not finished yet on q,
// the query ending with lock ("" or " FOR UPDATE").
func unfinishedJoiners(ctx context.Context, q sqlrows.Querier, m yidu.Message, n int, lock string) ([]yidu.Enrolment, error) {
	return sqlrows.List(ctx, q, func(rows *sql.Rows, e *yidu.Enrolment) error {
		e.Batch = n
		return rows.Scan(&e.UID, &e.UserID, &e.Version, &e.JoinedAt, &e.Deadline)
	}, "SELECT uid, userid, version, joined_at, deadline FROM standing_enrolments"+
		" WHERE corp_id = ? AND msgid = ? AND batch = ? AND sent_at IS NULL ORDER BY uid"+lock, m.CorpID, m.MsgID, n)
}

// finishJoiners records that join batch n was sent at at (status): each
// enrolment's sent_at, its ledger entry and its audit row, in one
// transaction, once (only rows still without sent_at).
func (r *Registry) finishJoiners(ctx context.Context, m yidu.Message, n int, at time.Time, status string, errcode int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	tx, err := r.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("tracker: finish join batch %d of %s: %w", n, m.MsgID, err)
	}
	defer tx.Rollback()
	people, err := unfinishedJoiners(ctx, tx, m, n, " FOR UPDATE")
	if err != nil {
		return fmt.Errorf("tracker: finish join batch %d of %s: %w", n, m.MsgID, err)
	}
	if len(people) == 0 {
		return nil
	}
	at = at.UTC().Truncate(time.Millisecond)
	if _, err := tx.ExecContext(ctx, "UPDATE standing_enrolments SET sent_at = ?, status = ? WHERE corp_id = ? AND msgid = ? AND batch = ? AND sent_at IS NULL",
		at, status, m.CorpID, m.MsgID, n); err != nil {
		return fmt.Errorf("tracker: finish join batch %d of %s: %w", n, m.MsgID, err)
	}
	facts := make([]ledger.Fact, 0, len(people))
	for _, e := range people {
		facts = append(facts, ledger.Enrolment{MsgID: m.MsgID, UID: e.UID, UserID: e.UserID, Version: e.Version, Batch: n,
			JoinedAt: e.JoinedAt, SentAt: at, Deadline: e.Deadline, ErrCode: errcode}.Fact())
		// One audit row per enrolment: a uid, never a list of people.
		if err := audit.Insert(ctx, tx, audit.Event{At: at, Actor: "yidu", ActorKind: "system", Action: yidu.ActionEnrol,
			CorpID: m.CorpID, App: m.App, MsgID: m.MsgID, People: 1, Outcome: enrolOutcome(status),
			Detail: fmt.Sprintf("uid=%d version=%d joined_at=%s batch=%d", e.UID, e.Version, e.JoinedAt.UTC().Format(time.RFC3339), n)}); err != nil {
			return err
		}
	}
	if r.ledger != nil {
		if _, err := r.ledger.Append(ctx, tx, m.CorpID, facts); err != nil {
			return fmt.Errorf("tracker: ledger of join batch %d of %s: %w", n, m.MsgID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("tracker: finish join batch %d of %s: %w", n, m.MsgID, err)
	}
	r.log.Info("joiners enrolled and sent", "corp", m.CorpID, "msgid", m.MsgID, "batch", n, "people", len(people), "status", status)
	return nil
}

func enrolOutcome(status string) string {
	switch status {
	case statusSent:
		return "ok"
	case statusUnknown:
		return "unknown"
	default:
		return "failed"
	}
}

// withoutJoiners leaves the members enrolled after the first send out of
// recipients (the rows, or a restore's bitmap of them), so a resumed
// first send batches its own recipients as it did, never a joiner's.
func (r *Registry) withoutJoiners(ctx context.Context, m yidu.Message, recipients *roaring.Bitmap) error {
	j, err := r.Enrolled(ctx, m.CorpID, m.MsgID)
	if err != nil {
		return err
	}
	recipients.AndNot(j)
	return nil
}
