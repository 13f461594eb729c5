package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/cards"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

// approve shows approval before sending: a notice to 全员 (apps[].approval)
// is held 待审批 with no card sent; the approver gets the approval card
// through WeCom and presses 批准 (a callback to the receiver, delivered
// twice as WeCom may); the campaign runner then sends the notice once.
func (m *Main) approve(ctx context.Context) error {
	r, w := &m.Round, m.Stdout
	r.ApprovalMsgID = m.MsgID + "-all"
	body := map[string]any{
		"msgid": r.ApprovalMsgID, "app": demoApp, "title": "年终总结会通知 / Year-end meeting", "send": true,
		"body":     "12月20日14:00全员年终总结会，请准时参加。All hands, 20 Dec 14:00.",
		"audience": map[string]any{"all": true},
	}
	var posted struct {
		Approval string `json:"approval"`
	}
	code, err := m.api(ctx, http.MethodPost, "/messages", body, &posted)
	if err != nil {
		return fmt.Errorf("notice to 全员: %w", err)
	}
	path := "/messages/" + url.PathEscape(r.ApprovalMsgID) + "/approval"
	var ap struct {
		State       string `json:"state"`
		VersionHash string `json:"version_hash"`
		Recipients  uint64 `json:"recipients"`
	}
	if _, err := m.api(ctx, http.MethodGet, path, nil, &ap); err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	held := len(m.cardsOf(r.ApprovalMsgID))
	r.Held = code == http.StatusAccepted && posted.Approval == string(yidu.ApprovalPending) && ap.State == string(yidu.ApprovalPending) && held == 0
	if !r.Held {
		return fmt.Errorf("notice to 全员: %d, approval %q/%q, %d cards; want 202, pending and none sent", code, posted.Approval, ap.State, held)
	}
	fmt.Fprintf(w, "  5. %s to 全员 (%d people) by %s: 待审批, no card sent (apps[].approval: 全员 or over %d)\n",
		r.ApprovalMsgID, ap.Recipients, demoUser, m.employees)

	c, err := m.awaitApprovalCard(ctx, r.ApprovalMsgID)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  6. the approval card (version %.12s…) reached %s through WeCom\n", ap.VersionHash, m.Approver)
	ev := wecomsim.Event{Kind: wecomsim.KindCard, UserID: m.Approver, TaskID: c.TaskID, EventKey: c.Key, CreateTime: time.Now()}
	reqs, err := m.player.pusher.Build([]wecomsim.Event{ev})
	if err != nil {
		return err
	}
	// WeCom may deliver the press twice; the second changes nothing.
	if st := m.player.pusher.Push(ctx, []wecomsim.Request{reqs[0], reqs[0]}); st.Failures != 0 {
		return fmt.Errorf("approval press: %s", st)
	}
	if _, err := m.api(ctx, http.MethodGet, path, nil, &ap); err != nil || ap.State != string(yidu.ApprovalApproved) {
		return fmt.Errorf("approval after the press: %q, %v; want approved", ap.State, err)
	}
	fmt.Fprintf(w, "  7. %s pressed 批准 (the callback delivered twice): 已批准\n", m.Approver)
	everyone := make([]string, len(m.company.Users))
	for i, u := range m.company.Users {
		everyone[i] = u.UserID
	}
	if err := m.awaitCards(ctx, r.ApprovalMsgID, everyone); err != nil {
		return err
	}
	r.SentOnce = true
	fmt.Fprintf(w, "  8. sent once by the campaign runner: one card to each of the %d people\n", len(everyone))
	return nil
}

// awaitApprovalCard waits for the approval card of msgID to reach the
// approver and returns its task_id and 批准's key.
func (m *Main) awaitApprovalCard(ctx context.Context, msgID string) (card, error) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		for _, c := range m.sentTemplateCards() {
			id, _, ok := yidu.ParseApprovalTaskID(c.TaskID)
			if !ok || string(id) != msgID || !slices.Contains(c.To, m.Approver) {
				continue
			}
			if slices.Contains(c.Keys, cards.ApproveKey) {
				return card{TaskID: c.TaskID, Key: cards.ApproveKey}, nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return card{}, fmt.Errorf("%s: no approval card reached %s: %w", msgID, m.Approver, ctx.Err())
		}
	}
}
