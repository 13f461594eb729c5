// Package wecomsim plays the WeCom platform for tests, the demo and load
// runs: it builds signed, encrypted callbacks (template_card_event,
// enter_agent, change_contact), pushes them at a receiver with WeCom's
// delivery rules (5 s timeout, three tries in all, any status but 200 is a
// failure; doc path 90238) at a bounded rate and concurrency, and generates a
// synthetic company for the fake WeCom API (internal/fakewecom).
package wecomsim

import (
	"encoding/xml"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Kind is the kind of a simulated callback event.
type Kind int

// The events the simulator sends; their XML follows doc paths 90240
// (template_card_event, enter_agent) and 90970 (change_contact).
const (
	KindCard Kind = iota + 1
	KindEnterAgent
	KindContact
)

// String returns the event's name as WeCom writes it in <Event>.
func (k Kind) String() string {
	switch k {
	case KindCard:
		return "template_card_event"
	case KindEnterAgent:
		return "enter_agent"
	case KindContact:
		return "change_contact"
	}
	return "unknown"
}

// Event is one callback's plaintext content.
type Event struct {
	Kind Kind
	// UserID is the member (FromUserName; change_contact's UserID).
	UserID     string
	CreateTime time.Time
	// TaskID and EventKey are a template card's task_id and pressed button.
	TaskID, EventKey string
	// ChangeType (create_user, update_user, delete_user), NewUserID (a
	// rename) and Departments are change_contact's.
	ChangeType  string
	NewUserID   string
	Departments []int64
}

// eventXML is the decrypted callback body. Empty optional fields are left
// out, as WeCom leaves out the fields an event does not have.
type eventXML struct {
	XMLName      xml.Name `xml:"xml"`
	ToUserName   cdata    `xml:"ToUserName"`
	FromUserName cdata    `xml:"FromUserName"`
	CreateTime   int64    `xml:"CreateTime"`
	MsgType      cdata    `xml:"MsgType"`
	Event        cdata    `xml:"Event"`
	EventKey     *cdata   `xml:"EventKey,omitempty"`
	TaskID       *cdata   `xml:"TaskId,omitempty"`
	CardType     *cdata   `xml:"CardType,omitempty"`
	ResponseCode *cdata   `xml:"ResponseCode,omitempty"`
	ChangeType   *cdata   `xml:"ChangeType,omitempty"`
	UserID       *cdata   `xml:"UserID,omitempty"`
	NewUserID    *cdata   `xml:"NewUserID,omitempty"`
	Department   *cdata   `xml:"Department,omitempty"`
	AgentID      int64    `xml:"AgentID,omitempty"`
}

// validText reports whether s is UTF-8 of XML 1.0 characters that survive a
// parse: encoding/xml writes CDATA unchecked, so a NUL would make a body no
// XML parser accepts, and a parser turns \r into \n.
func validText(s string) bool {
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			return false
		case r == '\t' || r == '\n':
		case r < 0x20, r >= 0xD800 && r <= 0xDFFF, r == 0xFFFE || r == 0xFFFF:
			return false
		}
	}
	return true
}

type cdata struct {
	V string `xml:",cdata"`
}

func ptr(s string) *cdata { return &cdata{s} }

// XML returns the decrypted callback body WeCom would send corpID's app
// agentID for e.
func (e Event) XML(corpID string, agentID int64) ([]byte, error) {
	for _, f := range []string{corpID, e.UserID, e.TaskID, e.EventKey, e.ChangeType, e.NewUserID} {
		if !validText(f) {
			return nil, fmt.Errorf("wecomsim: %q has characters XML cannot carry", f)
		}
	}
	x := eventXML{
		ToUserName: cdata{corpID},
		CreateTime: e.CreateTime.Unix(),
		MsgType:    cdata{"event"},
		Event:      cdata{e.Kind.String()},
	}
	switch e.Kind {
	case KindCard:
		x.FromUserName = cdata{e.UserID}
		x.EventKey, x.TaskID = ptr(e.EventKey), ptr(e.TaskID)
		x.CardType = ptr("button_interaction")
		x.ResponseCode = ptr("rc" + strconv.FormatInt(e.CreateTime.UnixNano(), 36))
		x.AgentID = agentID
	case KindEnterAgent:
		x.FromUserName = cdata{e.UserID}
		x.EventKey = ptr("")
		x.AgentID = agentID
	case KindContact:
		// change_contact comes from "sys" and names the member in UserID
		// (doc path 90970).
		x.FromUserName = cdata{"sys"}
		x.ChangeType, x.UserID = ptr(e.ChangeType), ptr(e.UserID)
		if e.NewUserID != "" {
			x.NewUserID = ptr(e.NewUserID)
		}
		if len(e.Departments) > 0 {
			ds := make([]string, len(e.Departments))
			for i, d := range e.Departments {
				ds[i] = strconv.FormatInt(d, 10)
			}
			x.Department = ptr(strings.Join(ds, ","))
		}
	default:
		return nil, fmt.Errorf("wecomsim: unknown event kind %d", e.Kind)
	}
	b, err := xml.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("wecomsim: marshal %s: %w", e.Kind, err)
	}
	return b, nil
}

// SendBatch is how many UserIDs one message/send takes (doc path 90236);
// the card of send batch N carries task_id "<msgid>@<N>" (docs/architecture.md).
const SendBatch = 1000

// TaskID returns the task_id of the card that reached member i of a message
// sent to members in order, SendBatch per call.
func TaskID(msgID string, i int) string { return msgID + "@" + strconv.Itoa(i/SendBatch) }

// CardReads returns one template_card_event per user, pressing key on the
// card of msgID, the k-th at start + k*step.
func CardReads(userIDs []string, msgID, key string, start time.Time, step time.Duration) []Event {
	evs := make([]Event, len(userIDs))
	for i, u := range userIDs {
		evs[i] = Event{Kind: KindCard, UserID: u, CreateTime: start.Add(time.Duration(i) * step), TaskID: TaskID(msgID, i), EventKey: key}
	}
	return evs
}

// EnterAgents returns one enter_agent per user, the k-th at start + k*step.
func EnterAgents(userIDs []string, start time.Time, step time.Duration) []Event {
	evs := make([]Event, len(userIDs))
	for i, u := range userIDs {
		evs[i] = Event{Kind: KindEnterAgent, UserID: u, CreateTime: start.Add(time.Duration(i) * step)}
	}
	return evs
}

// ContactChanges returns change_contact events over userIDs in turn: a
// create_user (in department 1), an update_user renaming the member to
// UserID+"_r", and a delete_user, the k-th at start + k*step.
func ContactChanges(userIDs []string, start time.Time, step time.Duration) []Event {
	evs := make([]Event, len(userIDs))
	for i, u := range userIDs {
		e := Event{Kind: KindContact, UserID: u, CreateTime: start.Add(time.Duration(i) * step)}
		switch i % 3 {
		case 0:
			e.ChangeType, e.Departments = "create_user", []int64{1}
		case 1:
			e.ChangeType, e.NewUserID = "update_user", u+"_r"
		default:
			e.ChangeType = "delete_user"
		}
		evs[i] = e
	}
	return evs
}
