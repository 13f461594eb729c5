package yidu

import (
	"fmt"
	"strconv"
	"time"
)

// Signal is one way yidu learns that a member saw a tracked message. WeCom
// sends no read receipt for application messages (doc path 90376), so each
// signal says something different, and they are kept apart: only the ones
// an app lists in its read signals make a message "read".
//
// The values are those of message_read_record.source (docs/analytics.md).
type Signal uint8

// The read signals.
const (
	// SignalButton: the member pressed the card's read button
	// (template_card_event): acknowledged.
	SignalButton Signal = 1
	// SignalEnterAgent: the member opened the app after the message was
	// sent (enter_agent). It fires on any entry into the app, and only when
	// the app reports entries (上报进入应用事件), so it does not prove the
	// notice was read.
	SignalEnterAgent Signal = 2
	// SignalLink: the member opened the notice through its tracked link
	// (identified by WeCom OAuth2).
	SignalLink Signal = 3
	// SignalReadToEnd: on the reading page (issue 39), the end of the text
	// (#notice-end) and the last page of every attachment were on screen.
	// Its value is 5: 4 is message_read_record.source's code of a read
	// yidu reconcile re-emitted (delta.SourceReconcile), kept stable.
	SignalReadToEnd Signal = 5
	// SignalAcknowledged: on the reading page, the reader pressed
	// 我已阅读并知悉 (#ack) after reading to the end.
	SignalAcknowledged Signal = 6
)

// NumSignals is the number of signals; arrays indexed by Signal.Index have
// this length.
const NumSignals = 5

// Signals returns every signal, in the order the API and the page list them.
func Signals() []Signal {
	return []Signal{SignalButton, SignalLink, SignalEnterAgent, SignalReadToEnd, SignalAcknowledged}
}

// PageSignals returns the signals the reading page records with the
// version read (link opened on the page, read to the end, acknowledged).
func PageSignals() []Signal { return []Signal{SignalLink, SignalReadToEnd, SignalAcknowledged} }

// DefaultReadSignals returns the signals that count as read when an app
// lists none: a button press (acknowledged) and a tracked link opened (the
// notice itself on screen). enter_agent counts only where it is listed.
func DefaultReadSignals() []Signal { return []Signal{SignalButton, SignalLink} }

// Valid reports whether s is a known signal.
func (s Signal) Valid() bool {
	return s >= SignalButton && s <= SignalLink || s == SignalReadToEnd || s == SignalAcknowledged
}

// Index returns s's position 0..NumSignals-1 in arrays indexed by signal.
// It panics for an invalid signal.
func (s Signal) Index() int {
	switch {
	case s >= SignalButton && s <= SignalLink:
		return int(s) - 1
	case s == SignalReadToEnd || s == SignalAcknowledged:
		return int(s) - 2
	}
	panic("yidu: index of invalid signal " + strconv.Itoa(int(s)))
}

// String returns the signal's name in the configuration and the API.
func (s Signal) String() string {
	switch s {
	case SignalButton:
		return "button"
	case SignalEnterAgent:
		return "enter_agent"
	case SignalLink:
		return "link"
	case SignalReadToEnd:
		return "read_to_end"
	case SignalAcknowledged:
		return "acknowledged"
	}
	return "signal(" + strconv.Itoa(int(s)) + ")"
}

// ParseSignal returns the signal named name (button, link, enter_agent,
// read_to_end, acknowledged).
func ParseSignal(name string) (Signal, error) {
	for _, s := range Signals() {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, Invalidf("unknown read signal %q (want button, link, enter_agent, read_to_end or acknowledged)", Truncate(name, 32))
}

// ParseReadSignals parses an app's read_signals: at least one signal, each
// known and listed once. Nil names (none configured) is DefaultReadSignals.
func ParseReadSignals(names []string) ([]Signal, error) {
	if names == nil {
		return DefaultReadSignals(), nil
	}
	if len(names) == 0 {
		return nil, Invalidf("read_signals is empty: nothing would ever count as read")
	}
	out := make([]Signal, 0, len(names))
	for _, n := range names {
		s, err := ParseSignal(n)
		if err != nil {
			return nil, err
		}
		for _, o := range out {
			if o == s {
				return nil, Invalidf("read signal %q listed twice", n)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// CountsAsRead reports whether signal s makes a message of app a read: s is
// in a.ReadSignals, or in DefaultReadSignals when the app lists none.
func (a App) CountsAsRead(s Signal) bool {
	list := a.ReadSignals
	if list == nil {
		list = DefaultReadSignals()
	}
	for _, c := range list {
		if c == s {
			return true
		}
	}
	return false
}

// FirstRead is a member's first read of a message as the archive keeps it
// (message_read_record read_time and source): when, and the signal that
// made it. Signal 0: re-emitted by yidu reconcile, which knows no signal.
type FirstRead struct {
	At     time.Time
	Signal Signal
}

// SignalName returns the name of the read's signal, "reconcile" for 0.
func (f FirstRead) SignalName() string {
	if f.Signal == 0 {
		return "reconcile"
	}
	return f.Signal.String()
}

// SignalCounts is how many recipients gave each signal, each member at
// most once per signal (the API's "by_signal"). A member who pressed the
// button and opened the app counts in both.
type SignalCounts struct {
	Button     int64 `json:"button"`
	Link       int64 `json:"link"`
	EnterAgent int64 `json:"enter_agent"`
	// ReadToEnd and Acknowledged are the reading page's signals (issue
	// 39), of any version.
	ReadToEnd    int64 `json:"read_to_end"`
	Acknowledged int64 `json:"acknowledged"`
}

// Get returns the count of signal s (0 for an invalid signal).
func (c SignalCounts) Get(s Signal) int64 {
	switch s {
	case SignalButton:
		return c.Button
	case SignalLink:
		return c.Link
	case SignalEnterAgent:
		return c.EnterAgent
	case SignalReadToEnd:
		return c.ReadToEnd
	case SignalAcknowledged:
		return c.Acknowledged
	}
	return 0
}

// Set sets the count of signal s; it panics for an invalid signal.
func (c *SignalCounts) Set(s Signal, n int64) {
	switch s {
	case SignalButton:
		c.Button = n
	case SignalLink:
		c.Link = n
	case SignalEnterAgent:
		c.EnterAgent = n
	case SignalReadToEnd:
		c.ReadToEnd = n
	case SignalAcknowledged:
		c.Acknowledged = n
	default:
		panic(fmt.Sprintf("yidu: set count of invalid signal %d", s))
	}
}
