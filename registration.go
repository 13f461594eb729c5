package yidu

import (
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on one registration (its audience's are in audience.go).
const (
	// MaxTitle is in characters: messages.title is VARCHAR(512).
	MaxTitle = 512
	// MaxSentAtAhead is how far a registration's sent_at may be ahead of
	// yidu's clock: a message is registered when it is sent, and a sent_at
	// in the future would sort it first in every list for years.
	MaxSentAtAhead = time.Hour
)

// Limits of the template card yidu sends: a button_interaction card
// (message/send, doc path 90236) whose main_title.title is the title,
// sub_title_text the body and card_action the url. WeCom words its text
// limits as 建议不超过 N 个字 (characters) and cuts longer text; yidu
// refuses it instead, so HR never sends a notice whose end nobody sees.
const (
	// MaxCardTitle bounds the title of a message that is sent as a card
	// (main_title.title: 36 characters).
	MaxCardTitle = 36
	// MaxCardDesc bounds main_title.desc (44 characters).
	MaxCardDesc = 44
	// MaxBody bounds the body (sub_title_text: 160 characters).
	MaxBody = 160
	// MaxButtonText bounds a button's text (button_list.text: 10
	// characters); MaxButtonKey its key (1024 bytes); MaxButtons the
	// button_list (at most 6).
	MaxButtonText = 10
	MaxButtonKey  = 1024
	MaxButtons    = 6
	// MaxURL bounds the url in bytes: the card opens it through a tracked
	// link, whose target is at most 2048 bytes (docs/api.md, Tracked links).
	MaxURL = 2048
)

// ReadButtonText is the text of the card's read button (button_list.text,
// at most MaxButtonText characters, doc path 90236), the one the tracker
// sends and the compose page previews. It is card content the member reads
// in WeCom, not page chrome: one language (zh-CN.md keeps 我已阅读), the
// same whatever language the sender's page speaks.
const ReadButtonText = "我已阅读"

// Listing bounds of every paged list (messages, recipients pages use their
// own cursor but the same limits).
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// Registration is one tracked message to register.
type Registration struct {
	// MsgID is the template card task_id base; empty generates one.
	MsgID string
	// App is the WeCom application the message is (or was) sent from.
	App   App
	Title string
	// Body is the notice's text, shown on the card (optional).
	Body string
	// URL is the document the card opens, through a tracked link when the
	// receiver has a public URL (optional).
	URL string
	// SentAt defaults to now.
	SentAt   time.Time
	Audience Audience
	// Send sends the card through WeCom after the registration succeeded.
	Send bool
	// ReadRule is what makes the message read ("" or ReadRuleApp: the
	// app's read signals); a notice with content may choose another.
	ReadRule ReadRule
	// FromNotice marks the registration that sends a draft or scheduled
	// notice (campaign's Runner), which alone may register the msgid the
	// notice holds (issue 38). The API never sets it.
	FromNotice bool
	// Retention is how long the notice keeps personal data after it was
	// sent (issue 40); zero: its app's default (apps[].retention).
	Retention Retention
}

// Validate checks r, fills its defaults (a generated MsgID, SentAt = now)
// and puts it in canonical form: the title and body trimmed, SentAt in UTC
// to the millisecond (DATETIME(3)), UserIDs and Departments sorted and
// unique. With Send, the title, body and url must also fit the card
// (CheckCard). Every error wraps ErrInvalid and starts with the field.
func (r *Registration) Validate(now time.Time) error {
	if r.MsgID == "" {
		r.MsgID = string(NewMsgID())
	}
	if !MsgID(r.MsgID).Valid() {
		return Fieldf("msgid", "msgid must match %s", MsgIDRule)
	}
	a := r.App
	switch {
	case !CorpID(a.CorpID).Valid():
		return Fieldf("app", "app corp_id must match [0-9A-Za-z_-]{1,%d}", MaxCorpID)
	case !ValidAppName(a.Name):
		return Fieldf("app", "app name must match %s", AppNameRule)
	case a.AgentID <= 0:
		return Fieldf("app", "app agent_id must be positive")
	}
	r.Title = strings.TrimSpace(r.Title)
	if t := r.Title; t == "" || !utf8.ValidString(t) || utf8.RuneCountInString(t) > MaxTitle {
		return Fieldf("title", "title is required, UTF-8, at most %d characters", MaxTitle)
	}
	if strings.IndexFunc(r.Title, unicode.IsControl) >= 0 {
		return Fieldf("title", "title must not contain control characters")
	}
	r.Body = strings.TrimSpace(r.Body)
	if err := checkBody(r.Body); err != nil {
		return err
	}
	if r.URL != "" {
		if err := CheckURL(r.URL); err != nil {
			return err
		}
	}
	if r.Send {
		if err := CheckCard(r.Title, r.Body, r.URL); err != nil {
			return err
		}
	}
	if r.SentAt.IsZero() {
		r.SentAt = now
	}
	r.SentAt = r.SentAt.UTC().Truncate(time.Millisecond)
	if y := r.SentAt.Year(); y < 2000 || r.SentAt.After(now.Add(MaxSentAtAhead)) {
		return Fieldf("sent_at", "sent_at must be after 2000 and at most %v ahead of now", MaxSentAtAhead)
	}
	return r.Audience.Validate()
}

// CheckCard checks that a message with title, body and url fits the
// template card yidu sends (message/send, doc path 90236): the title at
// most MaxCardTitle characters (main_title.title), the body at most
// MaxBody (sub_title_text), the url a valid target (card_action.url). The
// tracker checks a stored message again before sending or reminding it:
// one registered without send may have a longer title. The error wraps
// ErrInvalid and names the field.
func CheckCard(title, body, url string) error {
	if n := utf8.RuneCountInString(title); n > MaxCardTitle {
		return Fieldf("title", "title: %d characters; a card shows at most %d (WeCom's main_title.title, doc path 90236)", n, MaxCardTitle)
	}
	if err := checkBody(body); err != nil {
		return err
	}
	if url != "" {
		return CheckURL(url)
	}
	return nil
}

// checkBody: UTF-8, at most MaxBody characters, no control character but
// a line break.
func checkBody(body string) error {
	if !utf8.ValidString(body) {
		return Fieldf("body", "body must be UTF-8")
	}
	if n := utf8.RuneCountInString(body); n > MaxBody {
		return Fieldf("body", "body: %d characters; a card shows at most %d (WeCom's sub_title_text, doc path 90236)", n, MaxBody)
	}
	if strings.IndexFunc(body, func(c rune) bool { return c != '\n' && unicode.IsControl(c) }) >= 0 {
		return Fieldf("body", "body must not contain control characters but line breaks")
	}
	return nil
}

// CheckURL checks the url a card opens: an absolute http(s) URL with a
// host, at most MaxURL bytes, without spaces or control characters (it
// becomes a tracked link's signed target and a Location header; the
// receiver accepts exactly these, docs/api.md, Tracked links). The error
// wraps ErrInvalid and names the field.
func CheckURL(s string) error {
	if len(s) > MaxURL {
		return Fieldf("url", "url: %d bytes; at most %d", len(s), MaxURL)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return Fieldf("url", "url must not contain spaces or control characters")
		}
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Fieldf("url", "url must be an absolute http(s) URL")
	}
	return nil
}

// Registered says what a registration did.
type Registered struct {
	Message Message
	// Created is false for a repeated registration of the same message.
	Created bool
	// UnknownUserIDs are audience UserIDs the directory does not know as
	// active members (never synced, or left): not recipients, and never
	// made members by a registration; a directory sync brings real new
	// hires in. Sorted.
	UnknownUserIDs []string
	// Send is what sending did (zero without Registration.Send).
	Send SendReport
}
