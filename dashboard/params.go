package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/progress"

	"github.com/yidu-io/yidu"
)

// Parsers of everything the API reads from a request. Each returns an error
// wrapping errBadParam, which the handlers answer with 400.

var errBadParam = errors.New("bad parameter")

// errTooLarge is a request body past its bound (413).
var errTooLarge = errors.New("request body too large")

func badParam(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errBadParam}, args...)...)
}

func parseMsgID(s string) (string, error) {
	if !yidu.MsgID(s).Valid() {
		return "", badParam("msgid must match %s", yidu.MsgIDRule)
	}
	return s, nil
}

func parseState(s string) (progress.State, error) {
	switch progress.State(s) {
	case "", progress.StateAll:
		return progress.StateAll, nil
	case progress.StateRead, progress.StateUnread:
		return progress.State(s), nil
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
	n, ok, err := parseDecimal(s, 32, 0, "cursor is not valid")
	return uint32(n), ok, err
}

// parseDepartment reads a WeCom department id (positive; 1 is the root).
func parseDepartment(s string) (id int64, ok bool, err error) {
	n, ok, err := parseDecimal(s, 63, 1, "department must be a positive integer")
	return int64(n), ok, err
}

// parseDecimal reads an optional unsigned decimal of at most bits bits
// and at least least, in plain digits (no sign, no spaces); ok=false when
// s is empty. Anything else is a bad parameter saying msg.
func parseDecimal(s string, bits int, least uint64, msg string) (n uint64, ok bool, err error) {
	if s == "" {
		return 0, false, nil
	}
	if len(s) > 20 || s[0] == '+' || s[0] == '-' {
		return 0, false, badParam("%s", msg)
	}
	n, err = strconv.ParseUint(s, 10, bits)
	if err != nil || n < least {
		return 0, false, badParam("%s", msg)
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
	MsgID    string           `json:"msgid"`
	App      string           `json:"app"`
	Title    string           `json:"title"`
	Body     string           `json:"body"`
	URL      string           `json:"url"`
	SentAt   *json.RawMessage `json:"sent_at"`
	Audience audienceJSON     `json:"audience"`
	Send     bool             `json:"send"`
	// SendAt and Draft store the notice for campaign instead of
	// registering it now (docs/api.md, Scheduled notices).
	SendAt *json.RawMessage `json:"send_at"`
	Draft  bool             `json:"draft"`
	// FollowUp is the notice's follow-up policy (docs/api.md, Follow-up):
	// absent, the app's default; null, none.
	FollowUp optionalPolicy `json:"follow_up"`
	// Content, ReadRule and MinReadSeconds: the notice's text and
	// attachments, kept as version 1 (docs/api.md, Content).
	Content        *contentJSON `json:"content"`
	ReadRule       string       `json:"read_rule"`
	MinReadSeconds int          `json:"min_read_seconds"`
	// Retention is the notice's retention ("3y"; yidu.ParseRetention);
	// absent: its app's default.
	Retention string `json:"retention"`
}

// optionalPolicy is a body's "follow_up": set says the key was there
// (null included), so an absent one can mean the app's default and
// null none.
type optionalPolicy struct {
	set bool
	p   *yidu.Policy
}

// UnmarshalJSON decodes a policy as strictly as the body around it;
// json calls it for null too.
func (o *optionalPolicy) UnmarshalJSON(b []byte) error {
	o.set = true
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var p yidu.Policy
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		if te := (*json.UnmarshalTypeError)(nil); errors.As(err, &te) && te.Field != "" {
			te.Field = "follow_up." + te.Field
			return te
		}
		return fmt.Errorf("follow_up: %w", err)
	}
	o.p = &p
	return nil
}

// maxRegisterBody bounds POST /messages: yidu.MaxUserIDs UserIDs of 64
// bytes, quoted, fit with room.
const maxRegisterBody = 8 << 20

// decodeRegistration parses the body into the app's name and what
// campaign.Service.Post takes (its App is set by the caller). Only the
// JSON shape is checked here; the content is campaign's and
// yidu.Registration.Validate's.
func decodeRegistration(r io.Reader) (string, campaign.Post, error) {
	var reg campaign.Post
	var b registerBody
	dec := json.NewDecoder(io.LimitReader(r, maxRegisterBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return "", reg, fmt.Errorf("%w: more than %d bytes", errTooLarge, mbe.Limit)
		}
		return "", reg, bodyError(err)
	}
	sendAt, err := bodyTime("send_at", b.SendAt)
	if err != nil {
		return "", reg, err
	}
	sentAt, err := bodyTime("sent_at", b.SentAt)
	if err != nil {
		return "", reg, err
	}
	var rest bytes.Buffer
	if n, _ := io.Copy(&rest, io.LimitReader(dec.Buffered(), 64)); n > 0 && strings.TrimSpace(rest.String()) != "" {
		return "", reg, badParam("body: trailing data after the JSON object")
	}
	if b.App == "" || len(b.App) > 64 {
		return "", reg, badParam("app is required")
	}
	reg.Registration = yidu.Registration{MsgID: b.MsgID, Title: b.Title, Body: b.Body, URL: b.URL, Send: b.Send, Audience: b.Audience.audience()}
	reg.Draft = b.Draft
	if reg.Retention, err = yidu.ParseRetention(b.Retention); err != nil {
		return "", reg, err
	}
	if !reg.Retention.IsZero() && (b.Draft || b.SendAt != nil) {
		// campaigns keeps no retention yet: refused rather than lost.
		return "", reg, yidu.Invalidf("retention is kept for notices sent now only, not yet for drafts and scheduled notices")
	}
	reg.Content = campaign.Content{Has: b.Content != nil, ReadRule: b.ReadRule, MinReadSeconds: b.MinReadSeconds}
	if b.Content != nil {
		reg.Content.Markdown, reg.Content.Attachments = b.Content.Markdown, b.Content.Attachments
	}
	reg.Kept = noticeContent(b.Content, b.ReadRule, b.MinReadSeconds)
	reg.FollowUp, reg.FollowUpSet = b.FollowUp.p, b.FollowUp.set
	if sendAt != nil {
		if sendAt.IsZero() {
			return "", reg, badParam("send_at out of range")
		}
		reg.SendAt = *sendAt
	}
	if sentAt != nil {
		if sentAt.IsZero() {
			// Explicitly year 1: not "absent" (which means now).
			return "", reg, badParam("sent_at out of range")
		}
		reg.SentAt = *sentAt
	}
	return b.App, reg, nil
}

// bodyError is a JSON body that does not decode: a value of the wrong
// type is yidu.ErrInvalid naming its field (the page shows it beside the
// field, the API answers it in "field"); anything else a bad parameter.
func bodyError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" && te.Type != nil {
		kind := "a " + te.Type.Kind().String()
		switch te.Type.Kind() {
		case reflect.Slice, reflect.Array:
			kind = "an array"
		case reflect.Struct, reflect.Map:
			kind = "an object"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
			kind = "a number"
		case reflect.Bool:
			kind = "true or false"
		}
		return yidu.Invalidf("%s must be %s, not a JSON %s", te.Field, kind, te.Value)
	}
	return badParam("body: %v", err)
}

// bodyTime parses a time field of a body (nil: absent or null). It is
// decoded here, not by the JSON decoder, whose error would not say which
// field was not a time.
func bodyTime(field string, raw *json.RawMessage) (*time.Time, error) {
	if raw == nil {
		return nil, nil
	}
	var t time.Time
	if err := json.Unmarshal(*raw, &t); err != nil {
		return nil, yidu.Invalidf("%s must be an RFC 3339 time such as 2026-12-03T09:00:00+08:00", field)
	}
	return &t, nil
}
