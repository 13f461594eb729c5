package callback

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/yidu-io/yidu"
)

// Kind is what a decrypted callback is, as far as the receiver cares.
type Kind uint8

// The kinds of callback (doc paths 90240, 90376).
const (
	KindUnknown       Kind = iota // an event the receiver does not handle
	KindMessage                   // a message a member sent (MsgType ≠ event)
	KindTemplateCard              // template_card_event: a card button press
	KindEnterAgent                // enter_agent: the member opened the app
	KindView                      // view: a menu link opened
	KindClick                     // click: a menu item pressed
	KindChangeContact             // change_contact: a directory change
)

var kindNames = [...]string{
	KindUnknown:       "unknown",
	KindMessage:       "message",
	KindTemplateCard:  "template_card_event",
	KindEnterAgent:    "enter_agent",
	KindView:          "view",
	KindClick:         "click",
	KindChangeContact: "change_contact",
}

// String returns the kind's metric label, WeCom's event name for events.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Event is one decrypted callback. Fields a kind does not carry are empty.
type Event struct {
	Kind         Kind
	ToUserName   string // the CorpID
	FromUserName string // the member's UserID ("sys" for change_contact)
	CreateTime   int64  // unix seconds; the read time of a read signal
	MsgType      string
	Event        string
	// EventKey is the pressed button's key (template_card_event), the menu
	// key (click) or the opened URL (view).
	EventKey string
	// TaskID is the task_id the card was sent with: yidu's msgid.
	TaskID       string
	CardType     string
	ResponseCode string
	AgentID      int64 // 0 when the message carries none
	// ChangeType is create_user, update_user, delete_user (or a party or
	// tag change, which the receiver ignores).
	ChangeType string
	UserID     string
	NewUserID  string // set by update_user when the UserID was changed
	Department []int64
	// MsgID identifies a message; WeCom now sends non-numeric ones, so it
	// stays a string (doc path 90238).
	MsgID string
}

// ParseEvent parses a decrypted callback message. It returns an error
// wrapping ErrBadXML when the XML is not WeCom's flat shape, a number does
// not parse, or a field that the kind's handling needs is missing.
// String fields of the Event share memory with plaintext.
func ParseEvent(plaintext string) (Event, error) {
	var f fields
	if err := parseFlat(plaintext, &f); err != nil {
		return Event{}, err
	}
	ev := Event{
		ToUserName:   f.v[fToUserName],
		FromUserName: f.v[fFromUserName],
		MsgType:      f.v[fMsgType],
		Event:        f.v[fEvent],
		EventKey:     f.v[fEventKey],
		TaskID:       f.v[fTaskID],
		CardType:     f.v[fCardType],
		ResponseCode: f.v[fResponseCode],
		ChangeType:   f.v[fChangeType],
		UserID:       f.v[fUserID],
		NewUserID:    f.v[fNewUserID],
		MsgID:        f.v[fMsgID],
	}
	var err error
	if ev.CreateTime, err = parseInt(f.v[fCreateTime], "CreateTime"); err != nil {
		return Event{}, err
	}
	if ev.AgentID, err = parseInt(f.v[fAgentID], "AgentID"); err != nil {
		return Event{}, err
	}
	if ev.MsgType == "" {
		return Event{}, fmt.Errorf("%w: no MsgType", ErrBadXML)
	}
	if ev.MsgType != "event" {
		ev.Kind = KindMessage
		return ev, nil
	}
	switch ev.Event {
	case "template_card_event":
		ev.Kind = KindTemplateCard
		if !yidu.ValidTaskID(ev.TaskID) {
			return Event{}, fmt.Errorf("%w: template_card_event TaskId %.64q is not a task_id", ErrBadXML, ev.TaskID)
		}
	case "enter_agent":
		ev.Kind = KindEnterAgent
	case "view":
		ev.Kind = KindView
	case "click":
		ev.Kind = KindClick
	case "change_contact":
		ev.Kind = KindChangeContact
		if ev.Department, err = parseDepartments(f.v[fDepartment]); err != nil {
			return Event{}, err
		}
	default:
		ev.Kind = KindUnknown
	}
	switch ev.Kind {
	case KindTemplateCard, KindEnterAgent:
		// Both become a read of FromUserName at CreateTime.
		if ev.FromUserName == "" || ev.CreateTime <= 0 {
			return Event{}, fmt.Errorf("%w: %s without FromUserName or CreateTime", ErrBadXML, ev.Event)
		}
	case KindChangeContact:
		if ev.ChangeType == "" {
			return Event{}, fmt.Errorf("%w: change_contact without ChangeType", ErrBadXML)
		}
	}
	return ev, nil
}

// parseInt parses an optional decimal; WeCom may pad numbers with
// whitespace, which encoding/xml trims too.
func parseInt(s, name string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s %.64q is not a number", ErrBadXML, name, s)
	}
	return n, nil
}

// parseDepartments parses change_contact's Department, "1,2,3".
func parseDepartments(s string) ([]int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	out := make([]int64, 0, strings.Count(s, ",")+1)
	for part := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: Department %.64q", ErrBadXML, s)
		}
		out = append(out, n)
	}
	return out, nil
}
