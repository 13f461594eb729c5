// Package cards tells approvers and authors of notices through WeCom
// (issue 41): the approval card that asks an approver, and the texts
// that tell an author what became of their notice. It is campaign's
// ApprovalNotifier; campaign decides, cards only speaks.
package cards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
)

// Approvers are told through WeCom (issue 41): a button_interaction
// template card from the notice's app (message/send, doc path 90236)
// with two buttons. 批准 (type 0, key ApproveKey) comes back as a
// template_card_event with the card's TaskId (doc paths 90236, 90240)
// through the receiver's verified callback and is applied by Press; 驳回
// (type 1) opens the approval page, where a reason is asked for. The
// card's own jump opens the same page, which shows the recipients, the
// card and the reading page.

// ApproveKey is the 批准 button's key on an approval card.
const ApproveKey = "approve"

// RefusedError is message/send answered with an errcode other than 0
// (doc path 90236): the message reached nobody.
type RefusedError struct {
	Code int64
	Msg  string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("wecom: message/send refused: errcode %d: %s", e.Code, yidu.Truncate(e.Msg, 128))
}

// errAllInvalid is message/send's errcode when every touser is invalid
// (82001, doc path 90236): no such member of the app.
const errAllInvalid = 82001

// Notifier is the ApprovalNotifier that sends WeCom messages through
// the notice's app.
type Notifier struct {
	// Send posts a message/send body through the app (wecom.Sender's
	// SendMessage, adapted); WeCom's refusal is a *RefusedError.
	Send func(ctx context.Context, corpID string, agentID int64, body []byte) error
	// Page is the approval page's absolute URL for a notice of app.
	Page func(app, msgID string) string
}

// AskApproval sends the approval card to the approvers.
func (c *Notifier) AskApproval(ctx context.Context, n yidu.Notice, hash, taskID string, recipients uint64, approvers []string) error {
	if len(approvers) == 0 {
		return nil
	}
	page := c.Page(n.App.Name, n.MsgID)
	body, err := json.Marshal(map[string]any{
		"touser":  strings.Join(approvers, "|"),
		"msgtype": "template_card",
		"agentid": n.App.AgentID,
		"template_card": map[string]any{
			"card_type":  "button_interaction",
			"source":     map[string]any{"desc": "通知审批"},
			"main_title": map[string]any{"title": yidu.Truncate("待审批："+n.Title, 33), "desc": "发给 " + yidu.GroupDigits(strconv.FormatUint(recipients, 10)) + " 人"},
			"horizontal_content_list": []map[string]any{
				{"keyname": "发起人", "value": yidu.Truncate(n.CreatedBy, 26)},
				{"keyname": "版本", "value": hash[:min(12, len(hash))]},
			},
			"card_action": map[string]any{"type": 1, "url": page},
			"task_id":     taskID,
			"button_list": []map[string]any{
				{"text": "批准", "style": 1, "key": ApproveKey},
				{"text": "驳回", "style": 2, "type": 1, "url": page},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("cards: approval card: %w", err)
	}
	return c.Send(ctx, n.App.CorpID, n.App.AgentID, body)
}

// Decided tells the author what became of their notice.
func (c *Notifier) Decided(ctx context.Context, n yidu.Notice, st store.ApprovalStep) error {
	text := "你的通知《" + n.Title + "》已批准"
	switch st.Step {
	case store.StepRejected:
		text = "你的通知《" + n.Title + "》已驳回：" + st.Reason
	case store.StepHeld:
		text = "你的通知《" + n.Title + "》到发送时间仍未审批，已暂停发送（待审批）"
	}
	return c.text(ctx, n, text)
}

func (c *Notifier) text(ctx context.Context, n yidu.Notice, text string) error {
	if n.CreatedBy == "" || !yidu.UserID(n.CreatedBy).Valid() {
		return nil // a token's or a password user's notice: the page tells them
	}
	body, err := json.Marshal(map[string]any{"touser": n.CreatedBy, "msgtype": "text", "agentid": n.App.AgentID,
		"text": map[string]any{"content": yidu.Truncate(text, 2000) + "\n" + c.Page(n.App.Name, n.MsgID)}})
	if err != nil {
		return fmt.Errorf("cards: approval text: %w", err)
	}
	err = c.Send(ctx, n.App.CorpID, n.App.AgentID, body)
	if re := (*RefusedError)(nil); errors.As(err, &re) && re.Code == errAllInvalid {
		return nil // a token's or a user's name shaped like a UserID, no member: the page tells them
	}
	return err
}

// Held tells the author of a notice held at its time
// (RunnerOptions.OnHeld): for want of approval, or because it is outside
// what the author may send to now. A text message from the app (content
// at most 2048 bytes, doc path 90236); the reason is short (a field and
// a sentence), the title bounded by the card's.
func (c *Notifier) Held(ctx context.Context, n yidu.Notice) error {
	switch {
	case strings.HasPrefix(n.Reason, loops.ReasonOutsideAudience):
		return c.text(ctx, n, "你的通知《"+n.Title+"》到发送时间已超出你可发送的范围，已暂停发送："+strings.TrimPrefix(n.Reason, loops.ReasonOutsideAudience))
	case strings.HasPrefix(n.Reason, loops.LateReasonHead):
		return c.text(ctx, n, "你的通知《"+n.Title+"》已错过发送时间太久（超过允许的延迟），已暂停发送：请在 yidu 中立即发送或取消")
	case n.Reason == loops.ReasonAuthorMayNotSend:
		return c.text(ctx, n, "你的通知《"+n.Title+"》到发送时间你已无权通过此应用发送，已暂停发送")
	}
	return c.Decided(ctx, n, store.ApprovalStep{Step: store.StepHeld})
}

// Preview sends n's card to userID alone (发给我预览): the notice's
// title, body and link as members will see them, with a button that
// opens the approval page instead of one that counts as a read.
func (c *Notifier) Preview(ctx context.Context, n yidu.Notice, userID, taskID string) error {
	page := c.Page(n.App.Name, n.MsgID)
	open := cmpURL(n.URL, page)
	if n.Content != nil {
		// A notice with its full text links its reading page, which
		// serves published versions to recipients only: the approval
		// page shows the text as members will read it.
		open = page
	}
	card := map[string]any{
		"card_type":   "button_interaction",
		"source":      map[string]any{"desc": "预览"},
		"main_title":  map[string]any{"title": yidu.Truncate(n.Title, 33), "desc": yidu.Truncate(n.Body, 40)},
		"card_action": map[string]any{"type": 1, "url": open},
		"task_id":     taskID,
		"button_list": []map[string]any{{"text": "打开审批页", "style": 1, "type": 1, "url": page}},
	}
	body, err := json.Marshal(map[string]any{"touser": userID, "msgtype": "template_card", "agentid": n.App.AgentID, "template_card": card})
	if err != nil {
		return fmt.Errorf("cards: preview card: %w", err)
	}
	return c.Send(ctx, n.App.CorpID, n.App.AgentID, body)
}

// cmpURL is the notice's link when it is an absolute http(s) URL, else
// the fallback.
func cmpURL(u, fallback string) string {
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return u
	}
	return fallback
}
