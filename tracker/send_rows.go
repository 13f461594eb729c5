package tracker

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

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
	out, err := sqlrows.List(ctx, r.db, func(rows *sql.Rows, row *sendRow) error {
		var invalid string
		if err := rows.Scan(&row.kind, &row.batch, &row.status, &row.errcode, &row.users, &row.missing, &row.bad,
			&row.resent, &invalid, &row.wecomMsgID, &row.at, &row.recalled); err != nil {
			return err
		}
		if invalid != "" {
			row.invalid = strings.Count(invalid, "|") + 1
		}
		row.at = row.at.UTC()
		return nil
	}, q+" ORDER BY sent_at, kind DESC, batch", args...)
	if err != nil {
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
		if n >= JoinBatchBase {
			break // joiners' cards (standing.go), not the send's
		}
		o := states[n].outcome()
		o.Earlier = false
		out = append(out, o)
	}
	return out, nil
}
