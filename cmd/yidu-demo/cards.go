package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/wecomsim"
	"github.com/yidu-io/yidu/tracker"
)

// card is what a member's read press carries: the task_id of the card that
// reached them and its button's key.
type card struct {
	TaskID, Key string
}

// cards returns each employee's card as the fake WeCom received it from the
// tracker, or, without sending, as the tracker would have numbered them.
func (m *Main) cards(c fakewecom.Corp) (map[string]card, error) {
	out := make(map[string]card, len(c.Users))
	if !m.Send {
		for i, u := range c.Users {
			out[u.UserID] = card{TaskID: wecomsim.TaskID(m.MsgID, i), Key: tracker.DefaultReadButtonKey}
		}
		return out, nil
	}
	out = m.sentCards()
	for _, u := range c.Users {
		if _, ok := out[u.UserID]; !ok {
			return nil, fmt.Errorf("fake wecom: no card was sent to %s", u.UserID)
		}
	}
	return out, nil
}

// sentCards returns the cards of the notice the fake WeCom received, by
// UserID.
func (m *Main) sentCards() map[string]card {
	out := map[string]card{}
	for _, c := range m.sentTemplateCards() {
		if !sameMsg(c.TaskID, m.MsgID) || len(c.Keys) == 0 {
			continue
		}
		for _, u := range c.To {
			out[u] = card{TaskID: c.TaskID, Key: c.Keys[0]}
		}
	}
	return out
}

// sentCard is a template card the fake WeCom received: whom it went to,
// its task_id and its buttons' keys.
type sentCard struct {
	To     []string
	TaskID string
	Keys   []string
}

// sentTemplateCards returns the template cards the fake WeCom received,
// in order (a message of another kind has no task_id).
func (m *Main) sentTemplateCards() []sentCard {
	var out []sentCard
	for _, s := range m.Fake.Sent() {
		var b struct {
			ToUser       string `json:"touser"`
			TemplateCard struct {
				TaskID     string `json:"task_id"`
				ButtonList []struct {
					Key string `json:"key"`
				} `json:"button_list"`
			} `json:"template_card"`
		}
		if json.Unmarshal(s.Raw, &b) != nil {
			continue
		}
		c := sentCard{To: strings.Split(b.ToUser, "|"), TaskID: b.TemplateCard.TaskID}
		for _, bt := range b.TemplateCard.ButtonList {
			c.Keys = append(c.Keys, bt.Key)
		}
		out = append(out, c)
	}
	return out
}

// cardsOf counts the cards of notice msgID the fake WeCom got, by
// member.
func (m *Main) cardsOf(msgID string) map[string]int {
	out := map[string]int{}
	for _, c := range m.sentTemplateCards() {
		if !sameMsg(c.TaskID, msgID) {
			continue
		}
		if _, _, ok := yidu.ParseApprovalTaskID(c.TaskID); ok {
			continue // the approval card, not the notice's
		}
		for _, u := range c.To {
			out[u]++
		}
	}
	return out
}

// awaitCards waits until each of members has notice msgID's card, then
// half a second more, and checks that nobody else got it and nobody got
// it twice.
func (m *Main) awaitCards(ctx context.Context, msgID string, members []string) error {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for len(m.cardsOf(msgID)) < len(members) {
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("%s: cards to %d of %d members: %w", msgID, len(m.cardsOf(msgID)), len(members), ctx.Err())
		}
	}
	select {
	case <-time.After(500 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	got := m.cardsOf(msgID)
	if len(got) != len(members) {
		return fmt.Errorf("%s: cards to %d members; want %d", msgID, len(got), len(members))
	}
	for _, u := range members {
		if n := got[u]; n != 1 {
			return fmt.Errorf("%s: %s got %d cards; want 1", msgID, u, n)
		}
	}
	return nil
}
