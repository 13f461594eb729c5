package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/wecom"
)

// Receipts (issue 48): a member who acknowledged a notice on the reading
// page gets a WeCom text message from the notice's app naming the notice,
// its version's hash, the time and the acknowledgement's entry in the
// evidence log, so a copy of the fact sits with WeCom and the member.
// flushd queues one ack_receipts row per acknowledgement in the
// transaction that records it; SendReceipts claims due rows (one replica
// each, a lease: flushd.ClaimReceipts, flushd owning the table) and sends
// them with message/send (doc path 90236).
const (
	// receiptLease is how long a claim holds rows a replica is sending.
	receiptLease = 2 * time.Minute
	// receiptBatch is how many rows one SendReceipts claims.
	receiptBatch = 50
	// receiptRetryFirst and receiptRetryMax bound the backoff between
	// attempts; receiptAttempts ends the retries (state refused).
	receiptRetryFirst = 30 * time.Second
	receiptRetryMax   = time.Hour
	receiptAttempts   = 12
	// receiptsPerMinute and receiptsPerHour are WeCom's per-app limits
	// of messages to one member (每应用对同一个成员不可超过30次/分钟，
	// 1000次/小时, doc path 90312/90454): beyond them WeCom drops messages
	// silently, so a receipt past them waits instead.
	receiptsPerMinute = 30
	receiptsPerHour   = 1000
)

// Receipt states (ack_receipts.state).
const (
	ReceiptQueued  = "queued"
	ReceiptSent    = "sent"
	ReceiptRefused = "refused"
	ReceiptOff     = "off"
)

// receiptZone is the time zone receipts are written in.
var receiptZone = func() *time.Location {
	if z, err := time.LoadLocation("Asia/Shanghai"); err == nil {
		return z
	}
	return time.FixedZone("CST", 8*3600)
}()

// claimedReceipts reads back the receipts one claim took, by their owner
// (the index ack_receipts_owner, migration 00063, forced: statistics taken
// before a storm would pick the state index): never a scan of every
// queued receipt, which after a storm is every acknowledgement.
const claimedReceipts = `SELECT a.corp_id, a.msgid, a.uid, a.version, a.seq, a.acked_at, a.attempts, m.app, m.agent_id,
COALESCE(v.title, m.title), COALESCE(LOWER(HEX(v.sha256)), ''), COALESCE(u.userid, '')
FROM ack_receipts a FORCE INDEX (ack_receipts_owner) JOIN messages m ON m.corp_id = a.corp_id AND m.msgid = a.msgid
LEFT JOIN notice_versions v ON v.corp_id = a.corp_id AND v.msgid = a.msgid AND v.version = a.version
LEFT JOIN users u ON u.corp_id = a.corp_id AND u.uid = a.uid
WHERE a.owner = ? AND a.state = 'queued'`

type receiptRow struct {
	corp, msgid, app, title, sum, userid string
	uid, version                         uint32
	seq                                  uint64
	agent                                int64
	at                                   time.Time
	attempts                             int
}

// SendReceipts claims up to receiptBatch due receipts for owner (this
// replica) and sends each: it returns how many it sent. A failure of one
// receipt reschedules it with backoff (a final errcode records it
// refused); the acknowledgement itself is never touched.
func (r *Registry) SendReceipts(ctx context.Context, owner string) (int, error) {
	now := r.now().UTC()
	claim := fmt.Sprintf("%s@%d", owner, now.UnixNano())
	if err := flushd.ClaimReceipts(ctx, r.db, claim, now, now.Add(receiptLease), receiptBatch); err != nil {
		return 0, fmt.Errorf("tracker: %w", err)
	}
	rows, err := r.db.QueryContext(ctx, claimedReceipts, claim)
	if err != nil {
		return 0, fmt.Errorf("tracker: claimed receipts: %w", err)
	}
	var rs []receiptRow
	for rows.Next() {
		var x receiptRow
		if err := rows.Scan(&x.corp, &x.msgid, &x.uid, &x.version, &x.seq, &x.at, &x.attempts, &x.app, &x.agent, &x.title, &x.sum, &x.userid); err != nil {
			rows.Close()
			return 0, fmt.Errorf("tracker: claimed receipts: %w", err)
		}
		rs = append(rs, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("tracker: claimed receipts: %w", err)
	}
	sent := 0
	for _, x := range rs {
		ok, err := r.sendReceipt(ctx, x)
		if err != nil {
			return sent, err
		}
		if ok {
			sent++
		}
	}
	return sent, nil
}

// sendReceipt sends one claimed receipt and records the outcome.
func (r *Registry) sendReceipt(ctx context.Context, x receiptRow) (bool, error) {
	k := flushd.ReceiptKey{CorpID: x.corp, MsgID: x.msgid, UID: x.uid, Version: x.version}
	set := func(q string, a ...any) error {
		if err := flushd.SetReceipt(ctx, r.db, k, q, a...); err != nil {
			return fmt.Errorf("tracker: %w", err)
		}
		return nil
	}
	app := r.appOf(yidu.Message{CorpID: x.corp, MsgID: x.msgid, App: x.app, AgentID: x.agent})
	if app.NoReceipts {
		return false, set("state = ?", ReceiptOff)
	}
	if x.userid == "" {
		// The member left the directory: nobody to send to.
		return false, set("state = ?, attempts = attempts + 1", ReceiptRefused)
	}
	now := r.now().UTC()
	if !r.allowReceipt(x.app, x.userid, now) {
		return false, set("next_at = ?", now.Add(time.Minute))
	}
	body, err := receiptBody(x)
	if err != nil {
		return false, set("state = ?", ReceiptRefused)
	}
	res, err := r.sender.SendMessage(ctx, x.corp, x.agent, body)
	switch {
	case err == nil && res.ErrCode == 0 && !slices.ContainsFunc(res.InvalidUsers, func(u string) bool { return strings.EqualFold(u, x.userid) }):
		r.log.Info("tracker: receipt sent", "corp", x.corp, "msgid", x.msgid, "uid", x.uid)
		return true, set("state = ?, attempts = attempts + 1, sent_at = ?, errcode = 0", ReceiptSent, now)
	case err == nil && res.ErrCode == 0:
		return false, set("state = ?, attempts = attempts + 1, errcode = 0", ReceiptRefused)
	case err == nil && !retryableCodes[res.ErrCode]:
		// A final errcode (global error codes, doc path 90313): sending
		// again would be refused again.
		r.log.Warn("tracker: receipt refused", "corp", x.corp, "msgid", x.msgid, "uid", x.uid, "errcode", res.ErrCode)
		return false, set("state = ?, attempts = attempts + 1, errcode = ?", ReceiptRefused, res.ErrCode)
	}
	// Not delivered (a retryable errcode, a request that never left) or
	// not known: again later. A receipt sent twice is harmless; one never
	// sent is the loss this queue prevents.
	if err != nil && !errors.Is(err, wecom.ErrNotSent) {
		r.log.Warn("tracker: receipt outcome unknown", "corp", x.corp, "msgid", x.msgid, "uid", x.uid, "err", err)
	}
	if x.attempts+1 >= receiptAttempts {
		return false, set("state = ?, attempts = attempts + 1, errcode = ?", ReceiptRefused, res.ErrCode)
	}
	wait := receiptRetryFirst << min(x.attempts, 10)
	if frequencyCodes[res.ErrCode] {
		wait = max(wait, rateLimitWait)
	}
	return false, set("attempts = attempts + 1, next_at = ?, errcode = ?", now.Add(min(wait, receiptRetryMax)), res.ErrCode)
}

// allowReceipt reports whether app may send userid one more message now
// (receiptsPerMinute, receiptsPerHour), and counts it. The window is
// this process's.
func (r *Registry) allowReceipt(app, userid string, now time.Time) bool {
	return r.allow("receipt\x00"+app+"\x00"+strings.ToLower(userid), now, receiptsPerMinute, receiptsPerHour)
}

// ReceiptText is a receipt's text: the notice's title, the version and
// its hash (the first 16 hex digits, then in full), the time in
// Asia/Shanghai and the entry's index in the log (its seq − 1, the index
// of its inclusion proof; none without a ledger).
func ReceiptText(title string, version uint32, sum string, at time.Time, seq uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "【已确认回执】您已确认阅读「%s」\n", title)
	fmt.Fprintf(&b, "确认时间：%s（北京时间）\n", at.In(receiptZone).Format("2006-01-02 15:04:05"))
	if sum != "" {
		fmt.Fprintf(&b, "版本：第 %d 版，内容哈希 %s\n", version, sum[:min(16, len(sum))])
	}
	if seq > 0 {
		fmt.Fprintf(&b, "证据日志条目：第 %d 条（索引 %d）\n", seq, seq-1)
	}
	if sum != "" {
		fmt.Fprintf(&b, "完整哈希（SHA-256）：%s\n", sum)
	}
	b.WriteString("请保留此消息，作为您确认的凭据。")
	return b.String()
}

func receiptBody(x receiptRow) ([]byte, error) {
	type text struct {
		Content string `json:"content"`
	}
	return json.Marshal(struct {
		ToUser  string `json:"touser"`
		MsgType string `json:"msgtype"`
		AgentID int64  `json:"agentid"`
		Text    text   `json:"text"`
	}{x.userid, "text", x.agent, text{ReceiptText(x.title, x.version, x.sum, x.at, x.seq)}})
}
