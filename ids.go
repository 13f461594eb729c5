package yidu

import (
	"crypto/rand"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Identifier rules. Each has exactly one Valid, used by every layer that
// checks one: a value one package accepts and another refuses is a bug.

// MaxMsgID is the longest msgid: WeCom's task_id is at most 128 bytes
// (message/send, doc path 90236) and a send batch appends "@<batch>".
const MaxMsgID = 100

// MaxCorpID is the longest CorpID yidu stores (the corp_id columns).
const MaxCorpID = 64

// MaxUserID is the longest WeCom UserID (user/create, doc path 90195).
const MaxUserID = 64

// CorpID is a WeCom corp's id ("ww" and 16 hex digits on a real tenant).
type CorpID string

// Valid reports whether c is 1..64 bytes of [0-9A-Za-z_-]: WeCom's corp
// ids are letters and digits; yidu allows its msgid alphabet so test corps
// read well, and every byte is safe in keys, cursors and logs.
func (c CorpID) Valid() bool { return len(c) <= MaxCorpID && idChars(string(c), false) }

// MsgIDRule is MsgID.Valid's rule as a regular expression, for the
// errors that refuse a msgid to say it the same way everywhere.
const MsgIDRule = "[0-9A-Za-z_-]{1,100}"

// MsgID names a tracked message within its corp: the task_id of its
// template cards without the batch suffix.
type MsgID string

// Valid reports whether m is 1..100 bytes of [0-9A-Za-z_-]. It is WeCom's
// task_id alphabet ([0-9A-Za-z_\-@], doc path 90236) without '@', which
// separates the send batch (TaskID), and short enough for the suffix.
func (m MsgID) Valid() bool { return len(m) <= MaxMsgID && idChars(string(m), false) }

// idChars reports whether s is non-empty and every byte is in
// [0-9A-Za-z_-], or also '@' with at.
func idChars(s string, at bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || at && c == '@') {
			return false
		}
	}
	return true
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_-"

// NewMsgID returns a random 20-character msgid (120 bits).
func NewMsgID() MsgID {
	var b [20]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	for i := range b {
		b[i] = idAlphabet[b[i]&63]
	}
	return MsgID(b[:])
}

// UserID is a member's WeCom UserID.
type UserID string

// Valid reports whether u follows WeCom's rule (user/create, doc path
// 90195): 1..64 characters of letters, digits and "_-@.", the first a
// letter or digit. WeCom compares UserIDs case-insensitively.
func (u UserID) Valid() bool {
	if len(u) == 0 || len(u) > MaxUserID {
		return false
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alnum && (i == 0 || c != '_' && c != '-' && c != '@' && c != '.') {
			return false
		}
	}
	return true
}

// Storable reports whether u can be kept as a directory member's UserID:
// 1..64 bytes (user/create, doc path 90195) of UTF-8, not ending in a
// space (the users.userid collation, utf8mb4_bin, is PAD SPACE: "a" and
// "a " would be one row). It is not a second rule for UserIDs: Valid is
// WeCom's, which yidu sends with and registrations must follow; Storable
// is only how much of a UserID WeCom lists or calls back with yidu can
// hold, so a member whose UserID breaks Valid still has reads that count
// (idmap keeps and flags them, yidu.User.BadUserID; sending skips them).
func (u UserID) Storable() bool {
	return len(u) > 0 && len(u) <= MaxUserID && utf8.ValidString(string(u)) && u[len(u)-1] != ' '
}

// Fold returns the form in which yidu compares UserIDs. WeCom treats them
// case-insensitively (user/create, doc path 90195) and lower-cases them in
// message/send's invaliduser (doc path 90236), so an all-ASCII UserID is
// lower-cased; one with any other character (which breaks WeCom's rule
// anyway) is compared as spelt. The users.userid_key column computes the
// same in SQL (migrations/00002_directory.sql); idmap looks members up by it.
func (u UserID) Fold() string {
	for i := 0; i < len(u); i++ {
		if c := u[i]; c >= 'A' && c <= 'Z' {
			return string(u.AppendFold(make([]byte, 0, len(u))))
		} else if c >= 0x80 {
			return string(u)
		}
	}
	return string(u)
}

// AppendFold appends u.Fold() to dst, for callers on a hot path that fold
// into a buffer of their own instead of allocating.
func (u UserID) AppendFold(dst []byte) []byte {
	for i := 0; i < len(u); i++ {
		if u[i] >= 0x80 {
			return append(dst, u...)
		}
	}
	for i := 0; i < len(u); i++ {
		c := u[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// MaxTaskID is WeCom's limit on a template card's task_id (doc path 90236).
const MaxTaskID = 128

// TaskID returns the task_id of send batch n of message m. WeCom refuses a
// reused task_id (errcode 42014, doc path 90236) and message/send takes at
// most 1000 UserIDs, so each batch of a message carries its own:
// "<msgid>@<n>" (docs/architecture.md, "Why one TaskId per send batch").
func TaskID(m MsgID, n int) string { return string(m) + "@" + strconv.Itoa(n) }

// ReminderTaskID returns the task_id of batch n of manual reminder k (1,
// 2, …) of message m: "<msgid>@r<k>-<n>". A press on it counts as a read
// of m (ParseTaskID takes the part before the '@').
func ReminderTaskID(m MsgID, k, n int) string {
	return string(m) + "@r" + strconv.Itoa(k) + "-" + strconv.Itoa(n)
}

// RoundTaskID returns the task_id of batch n of follow-up round k of
// message m: "<msgid>@f<k>-<n>". A resent batch keeps it, so WeCom's
// duplicate check stops a second delivery (doc path 90236).
func RoundTaskID(m MsgID, k, n int) string {
	return string(m) + "@f" + strconv.Itoa(k) + "-" + strconv.Itoa(n)
}

// DigestTaskID returns the task_id of leader digest i of follow-up round
// k of message m: "<msgid>@d<k>-<i>".
func DigestTaskID(m MsgID, k, i int) string {
	return string(m) + "@d" + strconv.Itoa(k) + "-" + strconv.Itoa(i)
}

// ValidTaskID reports whether s is a WeCom task_id: [0-9A-Za-z_\-@]{1,128}
// (message/send, doc path 90236). Any card's, not only ours.
func ValidTaskID(s string) bool { return len(s) <= MaxTaskID && idChars(s, true) }

// ParseTaskID returns the message a template card's TaskId belongs to: the
// part before the first '@'. ok is false unless taskID is ValidTaskID and
// its msgid part is Valid; such input names no message of ours and must
// touch nothing.
func ParseTaskID(taskID string) (MsgID, bool) {
	if !ValidTaskID(taskID) {
		return "", false
	}
	m, _, _ := strings.Cut(taskID, "@")
	if !MsgID(m).Valid() {
		return "", false
	}
	return MsgID(m), true
}

// AppNameRule is ValidAppName's rule as a regular expression, for the
// errors that refuse an app name to say it the same way everywhere.
const AppNameRule = "[a-z0-9][a-z0-9_-]{0,63}"

// ValidAppName reports whether name is an app name yidu accepts
// (apps[].name, yidu.App.Name): 1..64 bytes of [a-z0-9_-], the first a
// letter or digit. It names the callback route (/callback/{app}), the
// API's "app", a metric label and the apps' environment variables
// (YIDU_APP_<NAME>_SECRET), so it is lower-case and never starts with
// '_' (callback's "_unknown" label cannot be an app).
func ValidAppName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z'
		if !alnum && (i == 0 || c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// CheckPublicURL checks a public URL yidu builds links on (the receiver's
// tracked links and their OAuth2 redirect, the dashboard's sign-in
// redirect): empty, or an absolute http(s) URL with a host and without
// credentials, query or fragment, since paths are appended to it. The one
// rule for receiver.public_url and dashboard.public_url.
func CheckPublicURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return err
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("must be an http(s) URL")
	case u.Host == "":
		return errors.New("has no host")
	case u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "":
		return errors.New("must not carry credentials, a query or a fragment")
	}
	return nil
}
