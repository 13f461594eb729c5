package tracker

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/flushd"
)

// maxReadTimesUIDs bounds one ReadTimes call (one page of people).
const maxReadTimesUIDs = 100_000

// LoadMessage returns an active message and its recipient and read bitmaps
// from MySQL (LoadReads without the signals).
func (r *Registry) LoadMessage(ctx context.Context, corpID, msgID string) (yidu.Message, *roaring.Bitmap, *roaring.Bitmap, bool, error) {
	m, recipients, read, _, found, err := r.LoadReads(ctx, corpID, msgID)
	return m, recipients, read, found, err
}

// LoadReads returns an active message, its recipients, the recipients who
// read it and, per signal, the recipients who gave it (button_at, link_at,
// enter_at set; a page_signals row of read_to_end or acknowledged), from
// MySQL in two queries, for bitmap.Recorder, reconcile and
// the dashboard when Redis lacks the message. found=false: no such active
// message (a registration still writing its rows does not count).
func (r *Registry) LoadReads(ctx context.Context, corpID, msgID string) (m yidu.Message, recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, found bool, err error) {
	if !yidu.MsgID(msgID).Valid() {
		return yidu.Message{}, nil, nil, nil, false, nil
	}
	row, ok, err := r.messageRow(ctx, corpID, msgID)
	if err != nil || !ok || row.state != stateActive {
		return yidu.Message{}, nil, nil, nil, false, err
	}
	recipients, read, signals, err = r.loadReadRows(ctx, corpID, msgID)
	if err != nil {
		return yidu.Message{}, nil, nil, nil, false, err
	}
	return row.m, recipients, read, signals, true, nil
}

// loadReadRows streams a message's rows into recipient, read and signal
// bitmaps.
func (r *Registry) loadReadRows(ctx context.Context, corpID, msgID string) (recipients, read *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap, err error) {
	rows, err := r.db.QueryContext(ctx, "SELECT uid, is_read, button_at IS NOT NULL, link_at IS NOT NULL, enter_at IS NOT NULL"+
		" FROM message_read_record WHERE corp_id = ? AND msgid = ?", corpID, msgID)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("tracker: load rows of %s: %w", msgID, err)
	}
	defer rows.Close()
	recipients, read = roaring.New(), roaring.New()
	button, link, enter := roaring.New(), roaring.New(), roaring.New()
	var uid uint32
	var isRead, b, l, e bool
	for rows.Next() {
		if err := rows.Scan(&uid, &isRead, &b, &l, &e); err != nil {
			return nil, nil, nil, fmt.Errorf("tracker: scan row of %s: %w", msgID, err)
		}
		recipients.Add(uid)
		for _, f := range [...]struct {
			set bool
			bm  *roaring.Bitmap
		}{{isRead, read}, {b, button}, {l, link}, {e, enter}} {
			if f.set {
				f.bm.Add(uid)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("tracker: load rows of %s: %w", msgID, err)
	}
	signals = map[yidu.Signal]*roaring.Bitmap{yidu.SignalButton: button, yidu.SignalLink: link, yidu.SignalEnterAgent: enter}
	if err := r.loadPageSignals(ctx, corpID, msgID, recipients, signals); err != nil {
		return nil, nil, nil, err
	}
	return recipients, read, signals, nil
}

// loadPageSignals adds the members who gave the reading page's signals
// read_to_end (of any version) and acknowledged (of the current material
// version or later) (page_signals, issue 39) to signals; only recipients,
// as every signal bitmap.
func (r *Registry) loadPageSignals(ctx context.Context, corpID, msgID string, recipients *roaring.Bitmap, signals map[yidu.Signal]*roaring.Bitmap) error {
	// Only acknowledgements of the current material version count
	// (yidu.ReadRule.Acknowledging): those of earlier versions are kept
	// in page_signals, not restored.
	signals[yidu.SignalReadToEnd], signals[yidu.SignalAcknowledged] = roaring.New(), roaring.New()
	err := flushd.CountingPageSignals(ctx, r.db, corpID, msgID, func(uid uint32, sig yidu.Signal) {
		if bm := signals[sig]; bm != nil && recipients.Contains(uid) {
			bm.Add(uid)
		}
	})
	if err != nil {
		return fmt.Errorf("tracker: load page signals of %s: %w", msgID, err)
	}
	return nil
}

// ActiveMessages returns the active messages of one app sent at or after
// since, oldest first: the messages an enter_agent event may have shown.
func (r *Registry) ActiveMessages(ctx context.Context, corpID string, agentID int64, since time.Time) ([]yidu.Message, error) {
	rows, err := r.db.QueryContext(ctx, "SELECT "+messageCols+
		" FROM messages WHERE corp_id = ? AND sent_at >= ? AND agent_id = ? AND state = 1 ORDER BY sent_at, msgid",
		corpID, since.UTC(), agentID)
	if err != nil {
		return nil, fmt.Errorf("tracker: active messages: %w", err)
	}
	defer rows.Close()
	var out []yidu.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("tracker: active messages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tracker: active messages: %w", err)
	}
	return out, nil
}

// recipientChunk bounds the msgids of one RecipientOf query.
const recipientChunk = 1000

// RecipientOf returns those of msgIDs that uid is a recipient of, in
// msgIDs' order: one primary-key probe per message (corp_id, msgid, uid).
func (r *Registry) RecipientOf(ctx context.Context, corpID string, uid uint32, msgIDs []string) ([]string, error) {
	mine := make(map[string]bool, len(msgIDs))
	for chunk := range slices.Chunk(msgIDs, recipientChunk) {
		args := make([]any, 0, 2+len(chunk))
		args = append(args, corpID, uid)
		for _, id := range chunk {
			args = append(args, id)
		}
		rows, err := r.db.QueryContext(ctx, "SELECT msgid FROM message_read_record WHERE corp_id = ? AND uid = ? AND msgid IN (?"+
			strings.Repeat(",?", len(chunk)-1)+")", args...)
		if err != nil {
			return nil, fmt.Errorf("tracker: recipient of: %w", err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("tracker: recipient of: %w", err)
			}
			mine[id] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("tracker: recipient of: %w", err)
		}
	}
	var out []string
	for _, id := range msgIDs {
		if mine[id] {
			out = append(out, id)
			delete(mine, id)
		}
	}
	return out, nil
}

// cursor is the position after the last message of a page, newest first.
type cursor struct {
	sentAt time.Time
	corpID string
	msgID  string
}

func (c cursor) String() string {
	s := strconv.FormatInt(c.sentAt.UnixMilli(), 10) + "|" + c.corpID + "|" + c.msgID
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func parseCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 256 {
		return c, yidu.Invalidf("bad cursor")
	}
	parts := strings.Split(string(b), "|")
	if len(parts) != 3 || !yidu.CorpID(parts[1]).Valid() || !yidu.MsgID(parts[2]).Valid() {
		return c, yidu.Invalidf("bad cursor")
	}
	ms, err := strconv.ParseInt(parts[0], 10, 64)
	// sent_at is a DATETIME(3) of a registration (years 2000..9999): any
	// other time names no position and would fail the query.
	if t := time.UnixMilli(ms).UTC(); err != nil || t.Year() < 2000 || t.Year() > 9999 {
		return c, yidu.Invalidf("bad cursor")
	}
	return cursor{time.UnixMilli(ms).UTC(), parts[1], parts[2]}, nil
}

// corpFilter returns " AND corp_id IN (?,…)" for corps (nil: every corp),
// or ok=false when corps is empty but not nil (no corp granted).
func corpFilter(corps []string, args []any) (string, []any, bool) {
	if corps == nil {
		return "", args, true
	}
	if len(corps) == 0 {
		return "", args, false
	}
	for _, c := range corps {
		args = append(args, c)
	}
	return " AND corp_id IN (?" + strings.Repeat(",?", len(corps)-1) + ")", args, true
}

// ListMessages lists active messages of corps (nil: all corps) newest first,
// limit per page (≤0: yidu.DefaultListLimit; at most yidu.MaxListLimit). next is the
// opaque cursor of the following page, empty after the last page.
func (r *Registry) ListMessages(ctx context.Context, corps []string, cur string, limit int) ([]yidu.Message, string, error) {
	return r.SearchMessages(ctx, corps, "", "", cur, limit)
}

// SearchMessages is ListMessages of the messages whose title contains title
// (compared as the column's collation does: case-insensitively on MySQL's
// utf8mb4 default) and, when app is not empty, that app sent. A cursor
// belongs to the search that returned it.
func (r *Registry) SearchMessages(ctx context.Context, corps []string, title, app, cur string, limit int) ([]yidu.Message, string, error) {
	if limit <= 0 {
		limit = yidu.DefaultListLimit
	}
	limit = min(limit, yidu.MaxListLimit)
	where, args, ok := corpFilter(corps, nil)
	if !ok {
		return nil, "", nil
	}
	if title != "" {
		where += " AND title LIKE ?" // backslash is LIKE's default escape
		args = append(args, "%"+likeEscaper.Replace(title)+"%")
	}
	if app != "" {
		where += " AND app = ?"
		args = append(args, app)
	}
	if cur != "" {
		c, err := parseCursor(cur)
		if err != nil {
			return nil, "", err
		}
		where += " AND (sent_at < ? OR sent_at = ? AND (corp_id < ? OR corp_id = ? AND msgid < ?))"
		args = append(args, c.sentAt, c.sentAt, c.corpID, c.corpID, c.msgID)
	}
	args = append(args, limit+1)
	rows, err := r.db.QueryContext(ctx, "SELECT "+messageCols+" FROM messages WHERE state = 1"+where+
		" ORDER BY sent_at DESC, corp_id DESC, msgid DESC LIMIT ?", args...)
	if err != nil {
		return nil, "", fmt.Errorf("tracker: list messages: %w", err)
	}
	defer rows.Close()
	var out []yidu.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, "", fmt.Errorf("tracker: list messages: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("tracker: list messages: %w", err)
	}
	var next string
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1]
		next = cursor{last.SentAt, last.CorpID, last.MsgID}.String()
	}
	return out, next, nil
}

// MaxVisibleScan bounds how many messages one SearchVisible call reads
// to fill a page of the visible ones; a caller who sees few of many gets
// a shorter page and a cursor past what was read.
const MaxVisibleScan = 5000

// SearchVisible is SearchMessages of the messages keep keeps: the filter
// comes first, then the page (issue 38), so that neither the page nor
// its cursor says anything of a message keep refused. next names the
// last message returned, or, when MaxVisibleScan messages were read
// without filling the page, only the millisecond before which the next
// page starts (every message of that millisecond was read). keep nil
// keeps every message.
func (r *Registry) SearchVisible(ctx context.Context, corps []string, title, app, cur string, limit int, keep func(yidu.Message) (bool, error)) ([]yidu.Message, string, error) {
	if limit <= 0 {
		limit = yidu.DefaultListLimit
	}
	limit = min(limit, yidu.MaxListLimit)
	if keep == nil {
		return r.SearchMessages(ctx, corps, title, app, cur, limit)
	}
	var out []yidu.Message
	scanned := 0
	var last yidu.Message
	for {
		page, next, err := r.SearchMessages(ctx, corps, title, app, cur, yidu.MaxListLimit)
		if err != nil {
			return nil, "", err
		}
		for i, m := range page {
			// Past the scan bound, only the rest of the same millisecond
			// is read, so that a time-only cursor skips nothing.
			if scanned >= MaxVisibleScan && !m.SentAt.Equal(last.SentAt) {
				return out, cursor{last.SentAt, "-", "-"}.String(), nil
			}
			scanned++
			last = m
			ok, err := keep(m)
			if err != nil {
				return nil, "", err
			}
			if !ok {
				continue
			}
			out = append(out, m)
			if len(out) == limit {
				if i == len(page)-1 && next == "" {
					return out, "", nil // the very last message
				}
				return out, cursor{m.SentAt, m.CorpID, m.MsgID}.String(), nil
			}
		}
		if next == "" {
			return out, "", nil
		}
		cur = next
	}
}

// Reaches reports whether any of uids is a recipient of msgID in MySQL
// (its message_read_record rows, one primary-key probe per uid): the
// scope check of a notice whose Redis keys expired, which must not
// restore them for a caller who may not see it (issue 38).
func (r *Registry) Reaches(ctx context.Context, corpID, msgID string, uids *roaring.Bitmap) (bool, error) {
	if uids == nil || uids.IsEmpty() {
		return false, nil
	}
	const chunk = 1000
	it := uids.Iterator()
	args := make([]any, 0, chunk+2)
	for it.HasNext() {
		args = append(args[:0], corpID, msgID)
		for len(args) < chunk+2 && it.HasNext() {
			args = append(args, it.Next())
		}
		var one int
		err := r.db.QueryRowContext(ctx, "SELECT 1 FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid IN (?"+
			strings.Repeat(",?", len(args)-3)+") LIMIT 1", args...).Scan(&one)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("tracker: recipients of %s within a scope: %w", msgID, err)
		}
	}
	return false, nil
}

// likeEscaper quotes LIKE's wildcards (and its escape character) so a
// search finds them as typed.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// GetMessage returns the active message msgID within corps (nil: any corp).
// Should two granted corps use one msgid, the newest is returned.
func (r *Registry) GetMessage(ctx context.Context, corps []string, msgID string) (yidu.Message, bool, error) {
	if !yidu.MsgID(msgID).Valid() {
		return yidu.Message{}, false, nil
	}
	where, args, ok := corpFilter(corps, []any{msgID})
	if !ok {
		return yidu.Message{}, false, nil
	}
	rows, err := r.db.QueryContext(ctx, "SELECT "+messageCols+
		" FROM messages WHERE msgid = ? AND state = 1"+where+" ORDER BY sent_at DESC LIMIT 1", args...)
	if err != nil {
		return yidu.Message{}, false, fmt.Errorf("tracker: get message: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return yidu.Message{}, false, rows.Err()
	}
	m, err := scanMessage(rows)
	if err != nil {
		return yidu.Message{}, false, fmt.Errorf("tracker: get message: %w", err)
	}
	return m, true, nil
}

// ReadTimes returns the read_time of each of uids that has a flushed read
// (reads still on their way through Kafka are not there yet).
func (r *Registry) ReadTimes(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]time.Time, error) {
	first, err := r.FirstReads(ctx, corpID, msgID, uids)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]time.Time, len(first))
	for uid, f := range first {
		out[uid] = f.At
	}
	return out, nil
}

// FirstReads returns, for each of uids that has a flushed read, its first
// read that counted: read_time and source (yidu.FirstRead).
func (r *Registry) FirstReads(ctx context.Context, corpID, msgID string, uids []uint32) (map[uint32]yidu.FirstRead, error) {
	if len(uids) > maxReadTimesUIDs {
		return nil, yidu.Invalidf("at most %d uids", maxReadTimesUIDs)
	}
	out := make(map[uint32]yidu.FirstRead, len(uids))
	for len(uids) > 0 {
		n := min(len(uids), InsertBatch)
		args := make([]any, 0, n+2)
		args = append(args, corpID, msgID)
		for _, u := range uids[:n] {
			args = append(args, u)
		}
		if err := r.firstReads(ctx, out, n, args); err != nil {
			return nil, err
		}
		uids = uids[n:]
	}
	return out, nil
}

func (r *Registry) firstReads(ctx context.Context, out map[uint32]yidu.FirstRead, n int, args []any) error {
	rows, err := r.db.QueryContext(ctx, "SELECT uid, read_time, source FROM message_read_record"+
		" WHERE corp_id = ? AND msgid = ? AND is_read = 1 AND read_time IS NOT NULL AND uid IN (?"+
		strings.Repeat(",?", n-1)+")", args...)
	if err != nil {
		return fmt.Errorf("tracker: read times: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid uint32
		var t time.Time
		var source uint8
		if err := rows.Scan(&uid, &t, &source); err != nil {
			return fmt.Errorf("tracker: read times: %w", err)
		}
		f := yidu.FirstRead{At: t.UTC()}
		if s := yidu.Signal(source); s.Valid() {
			f.Signal = s
		}
		out[uid] = f
	}
	return rows.Err()
}

// ReadsPerMinute counts a message's flushed reads per UTC minute of
// read_time, oldest first, each split by the signal that made it count, in
// one GROUP BY query. TIMESTAMPDIFF keeps the
// session time zone out of it (read_time is DATETIME in UTC).
func (r *Registry) ReadsPerMinute(ctx context.Context, corpID, msgID string) ([]yidu.MinuteCount, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MINUTE, '1970-01-01 00:00:00', read_time) AS m, source, COUNT(*)
		FROM message_read_record
		WHERE corp_id = ? AND msgid = ? AND is_read = 1 AND read_time IS NOT NULL
		GROUP BY m, source ORDER BY m, source`, corpID, msgID)
	if err != nil {
		return nil, fmt.Errorf("tracker: reads per minute: %w", err)
	}
	defer rows.Close()
	var out []yidu.MinuteCount
	for rows.Next() {
		var minute, n int64
		var source uint8
		if err := rows.Scan(&minute, &source, &n); err != nil {
			return nil, fmt.Errorf("tracker: reads per minute: %w", err)
		}
		at := time.Unix(minute*60, 0).UTC()
		if k := len(out); k == 0 || !out[k-1].Minute.Equal(at) {
			out = append(out, yidu.MinuteCount{Minute: at})
		}
		c := &out[len(out)-1]
		c.Reads += n
		if sig := yidu.Signal(source); sig.Valid() {
			c.BySignal.Set(sig, c.BySignal.Get(sig)+n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tracker: reads per minute: %w", err)
	}
	return out, nil
}

// HasPageSignal reports whether the archive holds member uid's signal sig
// on version of message msgID (page_signals, flushd's): the reading page
// asks when Redis lacks what a member did on a version (an ack needs
// read_to_end of the same version first).
func (r *Registry) HasPageSignal(ctx context.Context, corpID, msgID string, uid uint32, sig yidu.Signal, version int) (bool, error) {
	found, err := flushd.HasPageSignal(ctx, r.db, corpID, msgID, uid, sig, version)
	if err != nil {
		return false, fmt.Errorf("tracker: %w", err)
	}
	return found, nil
}

// ResetAcknowledged makes the acknowledgements of message msgID stop
// counting after a material new version (issue 39; "a read never goes
// back to unread, except when a material new version asks for it"):
// under read_rule acknowledged every read is an acknowledgement, so every
// read row becomes unread (MySQL first, the truth a restore reads), then
// Redis's read and acknowledged bitmaps are emptied. The acknowledgements
// stay in page_signals, per version. A message under another rule is
// left alone (reset false).
func (r *Registry) ResetAcknowledged(ctx context.Context, m yidu.Message) (reset bool, err error) {
	if !m.ReadRule.Acknowledging() {
		return false, nil
	}
	if err := flushd.ResetReads(ctx, r.db, m.CorpID, m.MsgID); err != nil {
		return false, fmt.Errorf("tracker: reset acknowledgements of %s: %w", m.MsgID, err)
	}
	if err := r.store.ResetAcknowledged(ctx, m.CorpID, m.MsgID); err != nil {
		return false, err
	}
	return true, nil
}
