package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Parsers of everything the API reads from a request. Each returns an error
// wrapping errBadParam, which the handlers answer with 400.

var errBadParam = errors.New("bad parameter")

func badParam(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadParam}, args...)...)
}

// msgIDPattern is a tracked msgid: the task_id of the cards without the
// "@<batch>" suffix (docs/architecture.md, "Why one TaskId per send batch").
var msgIDPattern = regexp.MustCompile(`^[0-9A-Za-z_-]{1,100}$`)

// userIDPattern bounds WeCom UserIDs: 1-64 bytes of letters, digits and
// "_-.@" (WeCom 通讯录管理/成员管理/创建成员, path /cgi-bin/user/create: userid
// 1~64 bytes, 只能由数字、字母和“_-@.”四种字符组成).
var userIDPattern = regexp.MustCompile(`^[0-9A-Za-z_\-.@]{1,64}$`)

func parseMsgID(s string) (string, error) {
	if !msgIDPattern.MatchString(s) {
		return "", badParam("msgid must match %s", msgIDPattern)
	}
	return s, nil
}

// State selects recipients by read state.
type State string

// States of a recipient.
const (
	StateAll    State = "all"
	StateRead   State = "read"
	StateUnread State = "unread"
)

func parseState(s string) (State, error) {
	switch State(s) {
	case "", StateAll:
		return StateAll, nil
	case StateRead, StateUnread:
		return State(s), nil
	}
	return "", badParam("state must be read, unread or all")
}

const (
	defaultLimit = 100
	maxLimit     = 1000
)

func parseLimit(s string) (int, error) {
	if s == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return 0, badParam("limit must be an integer in 1..%d", maxLimit)
	}
	return n, nil
}

// parseCursor reads a recipients cursor: the last uid of the previous page
// (decimal). ok=false means "from the start".
func parseCursor(s string) (uid uint32, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if len(s) > 10 || s[0] == '+' || s[0] == '-' {
		return 0, false, badParam("cursor is not valid")
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, false, badParam("cursor is not valid")
	}
	return uint32(n), true, nil
}

// parseDepartment reads a WeCom department id (positive; 1 is the root).
func parseDepartment(s string) (id int64, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if len(s) > 19 || s[0] == '+' || s[0] == '-' {
		return 0, false, badParam("department must be a positive integer")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, false, badParam("department must be a positive integer")
	}
	return n, true, nil
}

const maxQueryRunes = 64

// parseQuery reads the recipients search: a case-insensitive substring of
// UserID or name. Returned lower-cased.
func parseQuery(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", badParam("q must be UTF-8")
	}
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > maxQueryRunes {
		return "", badParam("q is longer than %d characters", maxQueryRunes)
	}
	return strings.ToLower(s), nil
}

// registerBody is the JSON body of POST /api/v1/messages (docs/api.md).
type registerBody struct {
	MsgID    string     `json:"msgid"`
	App      string     `json:"app"`
	Title    string     `json:"title"`
	SentAt   *time.Time `json:"sent_at"`
	Audience struct {
		UserIDs     []string `json:"userids"`
		Departments []int64  `json:"departments"`
		All         bool     `json:"all"`
	} `json:"audience"`
	Send bool `json:"send"`
}

const (
	maxRegisterBody = 8 << 20 // 100,000 userids of 64 bytes fit with room
	maxTitleRunes   = 512     // messages.title VARCHAR(512)
	maxAudienceIDs  = 100_000
)

// registration is a validated POST /messages body.
type registration struct {
	MsgID, App, Title string
	SentAt            time.Time
	UserIDs           []string
	Departments       []int64
	All, Send         bool
}

// decodeRegistration parses and validates the body. A missing msgid is
// left empty (the tracker generates one).
func decodeRegistration(r io.Reader) (registration, error) {
	var b registerBody
	dec := json.NewDecoder(io.LimitReader(r, maxRegisterBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return registration{}, badParam("body: %v", err)
	}
	var rest bytes.Buffer
	if n, _ := io.Copy(&rest, io.LimitReader(dec.Buffered(), 64)); n > 0 && strings.TrimSpace(rest.String()) != "" {
		return registration{}, badParam("body: trailing data after the JSON object")
	}
	reg := registration{
		MsgID: b.MsgID, App: b.App, Title: strings.TrimSpace(b.Title), Send: b.Send,
		UserIDs: b.Audience.UserIDs, Departments: b.Audience.Departments, All: b.Audience.All,
	}
	if reg.MsgID != "" && !msgIDPattern.MatchString(reg.MsgID) {
		return registration{}, badParam("msgid must match %s", msgIDPattern)
	}
	if reg.App == "" || len(reg.App) > 64 {
		return registration{}, badParam("app is required")
	}
	if reg.Title == "" || !utf8.ValidString(reg.Title) || utf8.RuneCountInString(reg.Title) > maxTitleRunes {
		return registration{}, badParam("title is required, UTF-8, at most %d characters", maxTitleRunes)
	}
	if b.SentAt != nil {
		if b.SentAt.Year() < 2000 || b.SentAt.Year() > 9999 {
			return registration{}, badParam("sent_at out of range")
		}
		reg.SentAt = b.SentAt.UTC()
	}
	kinds := 0
	if len(reg.UserIDs) > 0 {
		kinds++
	}
	if len(reg.Departments) > 0 {
		kinds++
	}
	if reg.All {
		kinds++
	}
	if kinds != 1 {
		return registration{}, badParam("audience needs exactly one of userids, departments, all")
	}
	if len(reg.UserIDs) > maxAudienceIDs || len(reg.Departments) > maxAudienceIDs {
		return registration{}, badParam("audience lists at most %d ids", maxAudienceIDs)
	}
	for _, u := range reg.UserIDs {
		if !userIDPattern.MatchString(u) {
			return registration{}, badParam("audience.userids: %q is not a WeCom UserID", truncate(u, 70))
		}
	}
	for _, d := range reg.Departments {
		if d < 1 {
			return registration{}, badParam("audience.departments: %d is not a department id", d)
		}
	}
	return reg, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
