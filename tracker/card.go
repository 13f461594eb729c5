package tracker

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
)

type templateCardBody struct {
	ToUser       string       `json:"touser"`
	MsgType      string       `json:"msgtype"`
	AgentID      int64        `json:"agentid"`
	TemplateCard templateCard `json:"template_card"`
	// Always on: an identical request within the interval is not
	// delivered twice (path 90236).
	EnableDuplicateCheck   int `json:"enable_duplicate_check"`
	DuplicateCheckInterval int `json:"duplicate_check_interval"`
}

type templateCard struct {
	CardType     string       `json:"card_type"`
	MainTitle    mainTitle    `json:"main_title"`
	SubTitleText string       `json:"sub_title_text,omitempty"`
	CardAction   *cardAction  `json:"card_action,omitempty"`
	TaskID       string       `json:"task_id"`
	ButtonList   []cardButton `json:"button_list"`
}

type mainTitle struct {
	Title string `json:"title"`
	Desc  string `json:"desc,omitempty"`
}

// cardAction is the whole card's jump: type 1 opens url (path 90236).
type cardAction struct {
	Type int    `json:"type"`
	URL  string `json:"url"`
}

type cardButton struct {
	Text  string `json:"text"`
	Style int    `json:"style"`
	Key   string `json:"key"`
	// Type 1 opens URL instead of calling back (button_list.type, path
	// 90236).
	Type int    `json:"type,omitempty"`
	URL  string `json:"url,omitempty"`
}

// readOnPageText is the card's button under read_rule acknowledged: it
// opens the reading page, where only 我已阅读并知悉 after reading to the
// end counts (issue 49: a 我已阅读 press there counted for nothing).
const readOnPageText = "阅读并确认"

// card is what every batch of one send or reminder shows.
type card struct {
	agentID int64
	title   string
	desc    string
	body    string
	action  string // card_action.url; "" none
	key     string
	// onPage: the button opens action (read_rule acknowledged) instead
	// of calling back.
	onPage   bool
	interval int // duplicate_check_interval, seconds
}

// card builds m's card for app. The message must fit it (yidu.CheckCard:
// one registered without send may not); its url goes through the tracked
// link when Options.Links is set.
func (r *Registry) card(app yidu.App, m yidu.Message, desc string) (card, error) {
	if err := yidu.CheckCard(m.Title, m.Body, m.URL); err != nil {
		return card{}, err
	}
	c := card{agentID: m.AgentID, title: m.Title, desc: desc, body: m.Body, key: app.ReadButtonKey,
		action: m.URL, interval: int(r.dup / time.Second)}
	if c.key == "" {
		c.key = DefaultReadButtonKey
	}
	if m.URL != "" && r.links != nil {
		link, err := r.links(app, m.MsgID, m.URL)
		if err != nil {
			return card{}, fmt.Errorf("tracker: tracked link of %s: %w", m.MsgID, err)
		}
		c.action = link
	}
	c.onPage = m.ReadRule.Acknowledging() && c.action != ""
	return c, nil
}

// request is the message/send body of one batch: a button_interaction
// template card whose task_id is unique per batch (path 90236; WeCom
// refuses a reused task_id with 42014), the body as sub_title_text, the
// url as the card's jump, and the duplicate check on. The same batch
// always gives the same bytes, which the duplicate check compares.
func (c card) request(users []string, taskID string) ([]byte, error) {
	tc := templateCard{
		CardType:     "button_interaction",
		MainTitle:    mainTitle{Title: c.title, Desc: c.desc},
		SubTitleText: c.body,
		TaskID:       taskID,
		ButtonList:   []cardButton{{Text: readButtonText, Style: 1, Key: c.key}},
	}
	if c.onPage {
		tc.ButtonList = []cardButton{{Text: readOnPageText, Style: 1, Key: c.key, Type: 1, URL: c.action}}
	}
	if c.action != "" {
		tc.CardAction = &cardAction{Type: 1, URL: c.action}
	}
	return json.Marshal(templateCardBody{
		ToUser:                 strings.Join(users, "|"),
		MsgType:                "template_card",
		AgentID:                c.agentID,
		TemplateCard:           tc,
		EnableDuplicateCheck:   1,
		DuplicateCheckInterval: c.interval,
	})
}
