package yidu

import (
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Bounds on one registration. They keep a single request from holding
// MySQL for minutes, and fit the API's 8 MiB body (100,000 UserIDs of 64
// bytes, quoted).
const (
	// MaxTitle is in characters: messages.title is VARCHAR(512).
	MaxTitle       = 512
	MaxUserIDs     = 100_000
	MaxDepartments = 1_000
	// MaxRecipients bounds the expanded audience.
	MaxRecipients = 1_000_000
	// MaxSentAtAhead is how far a registration's sent_at may be ahead of
	// yidu's clock: a message is registered when it is sent, and a sent_at
	// in the future would sort it first in every list for years.
	MaxSentAtAhead = time.Hour
)

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
	// SentAt defaults to now.
	SentAt   time.Time
	Audience Audience
	// Send sends the card through WeCom after the registration succeeded.
	Send bool
}

// Audience is who receives a message: the union of UserIDs, every member of
// Departments and their sub-departments, and (All) every active member, as
// message/send's touser and toparty combine (doc path 90236). It is
// snapshotted at registration: later directory changes do not move it.
type Audience struct {
	UserIDs     []string
	Departments []int64
	All         bool
}

// Validate checks r, fills its defaults (a generated MsgID, SentAt = now)
// and puts it in canonical form: the title trimmed, SentAt in UTC to the
// millisecond (DATETIME(3)), UserIDs and Departments sorted and unique.
// Every error wraps ErrInvalid.
func (r *Registration) Validate(now time.Time) error {
	if r.MsgID == "" {
		r.MsgID = string(NewMsgID())
	}
	if !MsgID(r.MsgID).Valid() {
		return Invalidf("msgid must match [0-9A-Za-z_-]{1,%d}", MaxMsgID)
	}
	a := r.App
	switch {
	case !CorpID(a.CorpID).Valid():
		return Invalidf("app corp_id must match [0-9A-Za-z_-]{1,%d}", MaxCorpID)
	case a.Name == "" || len(a.Name) > 64 || !idChars(a.Name, false):
		return Invalidf("app name must match [0-9A-Za-z_-]{1,64}")
	case a.AgentID <= 0:
		return Invalidf("app agent_id must be positive")
	}
	r.Title = strings.TrimSpace(r.Title)
	if t := r.Title; t == "" || !utf8.ValidString(t) || utf8.RuneCountInString(t) > MaxTitle {
		return Invalidf("title is required, UTF-8, at most %d characters", MaxTitle)
	}
	if strings.IndexFunc(r.Title, unicode.IsControl) >= 0 {
		return Invalidf("title must not contain control characters")
	}
	if r.SentAt.IsZero() {
		r.SentAt = now
	}
	r.SentAt = r.SentAt.UTC().Truncate(time.Millisecond)
	if y := r.SentAt.Year(); y < 2000 || r.SentAt.After(now.Add(MaxSentAtAhead)) {
		return Invalidf("sent_at must be after 2000 and at most %v ahead of now", MaxSentAtAhead)
	}
	au := &r.Audience
	if len(au.UserIDs) == 0 && len(au.Departments) == 0 && !au.All {
		return Invalidf("audience needs userids, departments or all")
	}
	if len(au.UserIDs) > MaxUserIDs || len(au.Departments) > MaxDepartments {
		return Invalidf("audience too large (at most %d userids, %d departments)", MaxUserIDs, MaxDepartments)
	}
	for _, u := range au.UserIDs {
		if !UserID(u).Valid() {
			return Invalidf("audience.userids: %q is not a WeCom UserID", Truncate(u, 70))
		}
	}
	for _, d := range au.Departments {
		if d <= 0 {
			return Invalidf("audience.departments: %d is not a department id", d)
		}
	}
	au.UserIDs = slices.Compact(slices.Sorted(slices.Values(au.UserIDs)))
	au.Departments = slices.Compact(slices.Sorted(slices.Values(au.Departments)))
	return nil
}
