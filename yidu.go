// Package yidu is the domain of yidu (已读): tracked messages, the WeCom
// apps they are sent from, the identifiers that name them, registrations
// and their one validation, the directory entries an audience is made of,
// and the errors every layer shares.
//
// It imports nothing of yidu's and no driver. Storage packages (idmap,
// tracker, bitmap, flushd) and HTTP packages (callback, dashboard) import it
// and never each other's types (benbjohnson/wtf's shape); cmd wires them.
package yidu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Message is a tracked message: one notice sent to an audience snapshotted
// at registration.
type Message struct {
	CorpID  string
	MsgID   string
	App     string
	AgentID int64
	Title   string
	// Body is the notice's text, shown on the card (may be empty).
	Body string
	// URL is the document the card opens (may be empty).
	URL    string
	SentAt time.Time
	// Recipients is the audience size at registration: the denominator.
	Recipients int64
	// RecalledAt is when the message was recalled through WeCom (zero:
	// not recalled). A recalled message's numbers are frozen at that
	// moment: ReadAtRecall is its read count then.
	RecalledAt   time.Time
	ReadAtRecall int64
	// ReadRule is what makes the message read ("" or ReadRuleApp: the
	// app's read signals; messages.read_rule).
	ReadRule ReadRule
}

// Recalled reports whether m was recalled.
func (m Message) Recalled() bool { return !m.RecalledAt.IsZero() }

// App is one WeCom self-built application as the domain sees it. It holds
// no secret: the callback Token and EncodingAESKey reach only the receiver,
// the app secret only the WeCom API clients (cmd hands them out).
type App struct {
	// Name is yidu's name for the app (the callback route, the API's "app").
	Name    string
	CorpID  string
	AgentID int64
	// ReadButtonKey is the template card button key that means "read";
	// empty accepts any button of a tracked card.
	ReadButtonKey string
	// ReadSignals are the signals that make the app's messages read
	// (ParseReadSignals); nil means DefaultReadSignals. Every signal is
	// recorded either way (by_signal); see CountsAsRead.
	ReadSignals []Signal
	// Timezone is the app's IANA time zone (apps[].timezone; empty means
	// DefaultTimezone): scheduled notices are entered and shown in it.
	Timezone string
	// FollowUp is the app's default follow-up policy (apps[].follow_up):
	// a notice posted without "follow_up" gets it; nil is none.
	FollowUp *Policy
	// Approval is the app's approval rule (apps[].approval, issue 41):
	// nil sends without a second person.
	Approval *Approval
	// NoReceipts turns off the WeCom receipt a member who acknowledged a
	// notice of the app gets (apps[].receipts: false, issue 48).
	NoReceipts bool
}

// MinuteCount is the number of flushed reads whose read_time falls in one
// UTC minute.
type MinuteCount struct {
	Minute time.Time
	Reads  int64
	// BySignal splits Reads by the signal that made each read count (its
	// first counted signal, message_read_record.source); a read
	// reconcile re-emitted counts in Reads only.
	BySignal SignalCounts
}

// Errors shared by every layer. A request outcome wraps one of them with
// its detail; the HTTP packages map each to a status in one table.
var (
	// ErrInvalid is input yidu refuses; nothing was written.
	ErrInvalid = errors.New("invalid")
	// ErrConflict is a registration of an existing msgid with another
	// audience, title or app.
	ErrConflict = errors.New("message exists with different content")
	// ErrRateLimited is one more notice that would break WeCom's
	// per-member limits (doc path 90236); the registration is kept.
	ErrRateLimited = errors.New("app notice rate limit reached")
	// ErrNoSender is sending asked of a deployment that cannot send.
	ErrNoSender = errors.New("no sender configured")
	// ErrRecalled is sending or reminding a message that was recalled.
	ErrRecalled = errors.New("message was recalled")
	// ErrNotRecallable is a recall WeCom would refuse or that has nothing
	// to recall: past WeCom's 24 h window (message/recall, doc path
	// 96460), or no batch sent through yidu. Nothing was recalled.
	ErrNotRecallable = errors.New("cannot recall")
	// ErrRecallIncomplete is a recall WeCom refused for some batches; the
	// others were recalled, and recalling again retries the rest.
	ErrRecallIncomplete = errors.New("recall incomplete")
)

// Invalidf returns an error wrapping ErrInvalid with a message.
func Invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// FieldError is a request field that is not valid: Field names it as the
// API spells it ("title", "audience.userids", "follow_up.deadline"), so
// an edge finds it with errors.As and never by reading the message;
// Reason is the sentence that says why, starting with the field as the
// API has always answered ("title is required, ..."). It wraps ErrInvalid.
//
// A sentence that quotes the input refused holds it in Value, whole, and
// marks its place in Reason with %q: the error shows it quoted (as fmt's
// %q) and cut to Echo bytes (Truncate), so that it is safe to echo however
// long the input was. The check says what it refused; how much of it may
// be shown is the error's rule, applied when the error is shown.
type FieldError struct {
	Field, Reason string
	// Value is the input refused; Echo is how many bytes of it the
	// sentence shows (0: Reason quotes no input).
	Value string
	Echo  int
}

func (e *FieldError) Error() string { return ErrInvalid.Error() + ": " + e.Why() }

// Why is the sentence that says why: Reason, with Value in its place.
func (e *FieldError) Why() string {
	if e.Echo <= 0 {
		return e.Reason
	}
	return strings.Replace(e.Reason, "%q", strconv.Quote(Truncate(e.Value, e.Echo)), 1)
}

// Unwrap makes a FieldError an ErrInvalid (400).
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Fieldf returns a *FieldError for field with a message, which starts
// with the field ("send_at must be in the future").
func Fieldf(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Truncate returns s cut to at most n bytes without splitting a UTF-8
// sequence, with "…" appended when it was cut: safe to echo in an error.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// GroupDigits writes a run of digits with thousands separators (98231 →
// 98,231), as the page, the dashboard and the cards show counts.
func GroupDigits(digits string) string {
	for i := len(digits) - 3; i > 0; i -= 3 {
		digits = digits[:i] + "," + digits[i:]
	}
	return digits
}
