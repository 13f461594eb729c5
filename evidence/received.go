package evidence

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
)

// maxReceived bounds 我的记录's list: the newest notices first.
const maxReceived = 500

// Received is one notice a member received, with what was recorded of
// their reading (我的记录, PIPL Art. 45).
type Received struct {
	MsgID    string
	App      string
	Title    string
	SentAt   time.Time
	Read     bool
	ReadTime *time.Time
	// Signals are the first time of each signal yidu kept.
	Signals []Signal
}

// Received lists the notices corp's member userid received, newest first
// (at most 500).
func (s *Service) Received(ctx context.Context, corp, userid string) ([]Received, error) {
	if !yidu.UserID(userid).Valid() {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT m.msgid, m.app, m.title, m.sent_at, r.is_read, r.read_time, r.button_at, r.link_at, r.enter_at
		FROM users u
		JOIN message_read_record r ON r.corp_id = u.corp_id AND r.uid = u.uid
		JOIN messages m ON m.corp_id = r.corp_id AND m.msgid = r.msgid
		WHERE u.corp_id = ? AND u.userid = ?
		ORDER BY m.sent_at DESC LIMIT ?`, corp, userid, maxReceived)
	if err != nil {
		return nil, fmt.Errorf("evidence: notices of a member: %w", err)
	}
	defer rows.Close()
	var out []Received
	for rows.Next() {
		var rc Received
		var readTime sql.NullTime
		var at [3]sql.NullTime
		if err := rows.Scan(&rc.MsgID, &rc.App, &rc.Title, &rc.SentAt, &rc.Read, &readTime, &at[0], &at[1], &at[2]); err != nil {
			return nil, fmt.Errorf("evidence: notices of a member: %w", err)
		}
		rc.SentAt = rc.SentAt.UTC()
		if rc.Read && readTime.Valid {
			t := readTime.Time.UTC()
			rc.ReadTime = &t
		}
		for i, k := range signalKinds {
			if at[i].Valid {
				rc.Signals = append(rc.Signals, Signal{Kind: k.kind, Source: k.source, At: at[i].Time.UTC()})
			}
		}
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: notices of a member: %w", err)
	}
	return out, nil
}

// SignalWord is a signal kind in the page's words (zh-CN.md).
func SignalWord(kind string) string { return orWord(signalWords, kind) }
