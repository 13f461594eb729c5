package tracker

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/yidu-io/yidu"
)

// RemindBatch sends one batch of a follow-up round (campaign.Rounds): the
// same reminder card as Remind, "remind now", with the round's task_id,
// recorded in message_sends as a reminder batch numbered batch (so recall recalls it, and
// LastReminder sees it). invalid are WeCom's invaliduser. Any outcome but
// sent is an error: the round keeps the batch pending and sends it again
// later with the same task_id and bytes, which WeCom's duplicate check
// drops if the first one was delivered (message/send, doc path 90236).
// A refusal for frequency (45009, 45033) has already been waited on and
// retried by r.batch.
func (r *Registry) RemindBatch(ctx context.Context, m yidu.Message, taskID string, batch int, users []string) (invalid []string, err error) {
	if r.sender == nil {
		return nil, yidu.ErrNoSender
	}
	if m.Recalled() {
		return nil, fmt.Errorf("%w: %s", yidu.ErrRecalled, m.MsgID)
	}
	c, err := r.card(r.appOf(m), m, reminderDesc)
	if err != nil {
		return nil, err
	}
	body, err := c.request(users, taskID)
	if err != nil {
		return nil, fmt.Errorf("tracker: card body: %w", err)
	}
	if !r.allowNotice(m.App) {
		return nil, fmt.Errorf("%w: app %s", yidu.ErrRateLimited, m.App)
	}
	var rep yidu.SendReport
	o, err := r.batch(ctx, kindRemind, m, batch, sendBatch{users: users}, body, nil, &rep)
	if err != nil {
		return nil, err
	}
	if o.Status == yidu.SendStatus(statusRefused) && o.ErrCode == errTaskIDUsed {
		// A round's task_id names one batch: WeCom has it only if an
		// earlier attempt of this batch was delivered, by a replica that
		// died before marking it (doc path 90236: a reused task_id is
		// 42014). Sent; its invalid users are unknown.
		return nil, nil
	}
	if o.Status != yidu.SendStatus(statusSent) {
		return nil, fmt.Errorf("tracker: follow-up batch %s: %s (errcode %d)", taskID, o.Status, o.ErrCode)
	}
	// r.batch counts the invalid ones; their names are in message_sends.
	if o.Invalid > 0 {
		var inv string
		if err := r.db.QueryRowContext(ctx, "SELECT COALESCE(invalid, '') FROM message_sends"+
			" WHERE corp_id = ? AND msgid = ? AND kind = ? AND sent_at = ? AND batch = ?", m.CorpID, m.MsgID, kindRemind, o.At, batch).Scan(&inv); err == nil && inv != "" {
			invalid = splitBar(inv)
		}
	}
	return invalid, nil
}

func splitBar(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '|' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// digestBody is a text message (message/send msgtype text, doc path
// 90236: content at most 2048 bytes), with the duplicate check on.
type digestBody struct {
	ToUser                 string            `json:"touser"`
	MsgType                string            `json:"msgtype"`
	AgentID                int64             `json:"agentid"`
	Text                   map[string]string `json:"text"`
	EnableDuplicateCheck   int               `json:"enable_duplicate_check"`
	DuplicateCheckInterval int               `json:"duplicate_check_interval"`
}

// Digest sends a leader's digest of a follow-up round as a text message
// through m's app: the leader's count of non-readers and up to 10 names
// (campaign.DigestText). taskID only names it in logs: a text message
// has no task_id.
func (r *Registry) Digest(ctx context.Context, m yidu.Message, taskID, userID, text string) error {
	if r.sender == nil {
		return yidu.ErrNoSender
	}
	if !yidu.UserID(userID).Valid() {
		return yidu.Invalidf("userid: not a WeCom UserID")
	}
	text = yidu.Truncate(text, 2000)
	body, err := json.Marshal(digestBody{ToUser: userID, MsgType: "text", AgentID: m.AgentID, Text: map[string]string{"content": text},
		EnableDuplicateCheck: 1, DuplicateCheckInterval: int(r.dup.Seconds())})
	if err != nil {
		return fmt.Errorf("tracker: digest body: %w", err)
	}
	status, res, err := r.call(ctx, m, body)
	if err != nil || status != statusSent {
		return fmt.Errorf("tracker: digest %s: %s (errcode %d): %v", taskID, status, res.ErrCode, err)
	}
	return nil
}
