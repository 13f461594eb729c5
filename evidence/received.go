package evidence

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
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
	// Receipts are the WeCom receipts of the member's acknowledgements
	// of the notice (ack_receipts, issue 48), by version.
	Receipts []Receipt
}

// Receipt is one acknowledgement's WeCom receipt: its version, its state
// (queued, sent, refused, off: tracker.Receipt*) and when it was sent.
type Receipt struct {
	Version int
	State   string
	SentAt  *time.Time
}

// Received lists the notices corp's member userid received, newest first
// (at most 500).
func (s *Service) Received(ctx context.Context, corp, userid string) ([]Received, error) {
	if !yidu.UserID(userid).Valid() {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT m.msgid, m.app, m.title, m.sent_at, r.is_read, r.read_time, r.button_at, r.link_at, r.enter_at, u.uid
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
	var uid uint32
	for rows.Next() {
		var rc Received
		var readTime sql.NullTime
		var at [3]sql.NullTime
		if err := rows.Scan(&rc.MsgID, &rc.App, &rc.Title, &rc.SentAt, &rc.Read, &readTime, &at[0], &at[1], &at[2], &uid); err != nil {
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
	rows.Close()
	// The reading page's own signals (read to the end, acknowledged), as
	// the 告知确认书 shows them: without them 我的记录 said 已打开 of a
	// notice read to the end and acknowledged (issue 49).
	if s.page != nil {
		for i := range out {
			pe, err := s.page.PageEvents(ctx, corp, out[i].MsgID, uid)
			if err != nil {
				return nil, fmt.Errorf("evidence: page events of a member: %w", err)
			}
			for _, sg := range pe {
				if !slices.ContainsFunc(out[i].Signals, func(x Signal) bool { return x.Kind == sg.Kind }) {
					out[i].Signals = append(out[i].Signals, sg)
				}
			}
			slices.SortStableFunc(out[i].Signals, func(a, b Signal) int { return a.At.Compare(b.At) })
		}
	}
	if err := s.receipts(ctx, corp, userid, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Has reports whether rc records signal kind (yidu.Signal's words:
// button, link, enter_agent, read_to_end, acknowledged).
func (rc Received) Has(kind string) bool {
	return slices.ContainsFunc(rc.Signals, func(x Signal) bool { return x.Kind == kind })
}

// receipts fills in the receipts of the notices in out.
func (s *Service) receipts(ctx context.Context, corp, userid string, out []Received) error {
	if len(out) == 0 {
		return nil
	}
	at := make(map[string]int, len(out))
	for i, rc := range out {
		at[rc.MsgID] = i
	}
	rows, err := s.db.QueryContext(ctx, `SELECT a.msgid, a.version, a.state, a.sent_at FROM users u
		JOIN ack_receipts a ON a.corp_id = u.corp_id AND a.uid = u.uid
		WHERE u.corp_id = ? AND u.userid = ? ORDER BY a.msgid, a.version`, corp, userid)
	if err != nil {
		return fmt.Errorf("evidence: receipts of a member: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var msgid string
		var r Receipt
		var sent sql.NullTime
		if err := rows.Scan(&msgid, &r.Version, &r.State, &sent); err != nil {
			return fmt.Errorf("evidence: receipts of a member: %w", err)
		}
		if sent.Valid {
			t := sent.Time.UTC()
			r.SentAt = &t
		}
		if i, ok := at[msgid]; ok {
			out[i].Receipts = append(out[i].Receipts, r)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("evidence: receipts of a member: %w", err)
	}
	return nil
}

// SignalWord is a signal kind in the page's words (zh-CN.md).
func SignalWord(kind string) string { return orWord(signalWords, kind) }
