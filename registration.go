package yidu

import (
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/RoaringBitmap/roaring/v2"
)

// Bounds on one registration. They keep a single request from holding
// MySQL for minutes, and fit the API's 8 MiB body (100,000 UserIDs of 64
// bytes, quoted).
const (
	// MaxTitle is in characters: messages.title is VARCHAR(512).
	MaxTitle       = 512
	MaxUserIDs     = 100_000
	MaxDepartments = 1_000
	// MaxTags bounds audience.tags like departments (WeCom's totag takes
	// 100 per message/send call, doc path 90236; yidu expands tags to
	// UserIDs, so more is fine).
	MaxTags = 1_000
	// MaxRecipients bounds the expanded audience.
	MaxRecipients = 1_000_000
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

// Audience is who receives a message: the union of UserIDs, every member of
// Departments and their sub-departments, and (All) every active member, as
// message/send's touser and toparty combine (doc path 90236). It is
// snapshotted at registration: later directory changes do not move it.
type Audience struct {
	UserIDs     []string
	Departments []int64
	// Tags are WeCom tag ids (标签, message/send's totag): each adds its
	// users and every member of its departments' subtrees.
	Tags []int64
	All  bool
}

// Expansion is an audience expanded against the synced directory.
type Expansion struct {
	// Recipients are the active members the audience reaches: the union
	// of its UserIDs, its departments' subtrees, its tags (users and
	// departments' subtrees) and, with All, every active member.
	Recipients *roaring.Bitmap
	// Unknown are the audience's UserIDs that name no member at all, as
	// given; Left those naming members who left. Neither is a recipient.
	Unknown, Left []string
}

// CheckRecipients is the rule for an audience's expansion (n active
// members, idmap.Mapper.Expand): it must reach someone and at most
// MaxRecipients. The tracker applies it when a registration snapshots the
// audience and campaign when a notice is stored, so a notice that would
// not register is refused when it is written, not when it fires. The
// error names the field: audience.userids when only UserIDs were given.
func (a Audience) CheckRecipients(n uint64) error {
	switch {
	case n == 0 && !a.All && len(a.Departments) == 0 && len(a.Tags) == 0:
		return Fieldf("audience.userids", "audience.userids: none of the %d UserIDs is an active member", len(a.UserIDs))
	case n == 0:
		return Fieldf("audience", "audience has no members: its departments, tags and UserIDs reach no active member")
	case n > MaxRecipients:
		return Fieldf("audience", "audience has %d members, at most %d", n, MaxRecipients)
	}
	return nil
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

// Validate checks a and puts it in canonical form: UserIDs, Departments
// and Tags sorted and unique. It is the audience part of
// Registration.Validate, and the one rule for an audience wherever one is
// checked (a stored notice, the compose page's preview). Every error wraps
// ErrInvalid and starts with the field.
func (a *Audience) Validate() error {
	if len(a.UserIDs) == 0 && len(a.Departments) == 0 && len(a.Tags) == 0 && !a.All {
		return Fieldf("audience", "audience needs userids, departments, tags or all")
	}
	if len(a.UserIDs) > MaxUserIDs || len(a.Departments) > MaxDepartments || len(a.Tags) > MaxTags {
		return Fieldf("audience", "audience too large (at most %d userids, %d departments, %d tags)", MaxUserIDs, MaxDepartments, MaxTags)
	}
	for _, t := range a.Tags {
		if t < 0 { // tagid is a non-negative integer (tag/create, doc path 90210)
			return Fieldf("audience.tags", "audience.tags: %d is not a tag id", t)
		}
	}
	for _, u := range a.UserIDs {
		if !UserID(u).Valid() {
			return Fieldf("audience.userids", "audience.userids: %q is not a WeCom UserID", Truncate(u, 70))
		}
	}
	for _, d := range a.Departments {
		if d <= 0 {
			return Fieldf("audience.departments", "audience.departments: %d is not a department id", d)
		}
	}
	a.UserIDs = slices.Compact(slices.Sorted(slices.Values(a.UserIDs)))
	a.Departments = slices.Compact(slices.Sorted(slices.Values(a.Departments)))
	if a.Tags != nil {
		a.Tags = slices.Compact(slices.Sorted(slices.Values(a.Tags)))
	}
	return nil
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
