package handle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/progress"
)

// Parsers of everything the API reads from a request. Each returns an error
// wrapping ErrBadParam, which the handlers answer with 400.

// ErrBadParam is a parameter or body that does not parse (400).
var ErrBadParam = errors.New("bad parameter")

// ErrTooLarge is a request body past its bound (413).
var ErrTooLarge = errors.New("request body too large")

// ErrNotFound is a notice, template or file the caller may not see, or
// that does not exist (404).
var ErrNotFound = errors.New("not found")

// BadParam is an error wrapping ErrBadParam saying format.
func BadParam(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadParam}, args...)...)
}

// ParseMsgID reads a msgid of the path.
func ParseMsgID(s string) (string, error) {
	if !yidu.MsgID(s).Valid() {
		return "", BadParam("msgid must match %s", yidu.MsgIDRule)
	}
	return s, nil
}

// ParseState reads a recipients state (empty: all).
func ParseState(s string) (progress.State, error) {
	switch progress.State(s) {
	case "", progress.StateAll:
		return progress.StateAll, nil
	case progress.StateRead, progress.StateUnread, progress.StateUnopened, progress.StateOpened, progress.StateReadToEnd, progress.StateAcknowledged:
		return progress.State(s), nil
	}
	return "", BadParam("state must be read, unread, all, unopened, opened, read_to_end or acknowledged")
}

// DefaultLimit and MaxLimit bound a page of recipients.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// ParseLimit reads a page's limit (empty: DefaultLimit).
func ParseLimit(s string) (int, error) {
	if s == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, BadParam("limit must be an integer in 1..%d", MaxLimit)
	}
	return n, nil
}

// ParseCursor reads a recipients cursor: the last uid of the previous page
// (decimal). ok=false means "from the start".
func ParseCursor(s string) (uid uint32, ok bool, err error) {
	n, ok, err := parseDecimal(s, 32, 0, "cursor is not valid")
	return uint32(n), ok, err
}

// ParseDepartment reads a WeCom department id (positive; 1 is the root).
func ParseDepartment(s string) (id int64, ok bool, err error) {
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
		return 0, false, BadParam("%s", msg)
	}
	n, err = strconv.ParseUint(s, 10, bits)
	if err != nil || n < least {
		return 0, false, BadParam("%s", msg)
	}
	return n, true, nil
}

const maxQueryRunes = 64

// ParseQuery reads the recipients search: a case-insensitive substring of
// UserID or name. Returned lower-cased.
func ParseQuery(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", BadParam("q must be UTF-8")
	}
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) > maxQueryRunes {
		return "", BadParam("q is longer than %d characters", maxQueryRunes)
	}
	return strings.ToLower(s), nil
}

// MaxRegisterBody bounds POST /messages: yidu.MaxUserIDs UserIDs of 64
// bytes, quoted, fit with room.
const MaxRegisterBody = 8 << 20

// BodyError is a JSON body that does not decode: a value of the wrong
// type is yidu.ErrInvalid naming its field (the page shows it beside the
// field, the API answers it in "field"); anything else a bad parameter.
func BodyError(err error) error {
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
		return yidu.Fieldf(te.Field, "%s must be %s, not a JSON %s", te.Field, kind, te.Value)
	}
	return BadParam("body: %v", err)
}

// ParseRecipientQuery reads a recipients selection (?state=&department=&q=,
// with withPaging also &cursor=&limit=).
func ParseRecipientQuery(r *http.Request, withPaging bool) (progress.Query, error) {
	v := r.URL.Query()
	var rq progress.Query
	var err error
	if rq.State, err = ParseState(v.Get("state")); err != nil {
		return rq, err
	}
	if rq.Department, rq.HasDepartment, err = ParseDepartment(v.Get("department")); err != nil {
		return rq, err
	}
	if rq.Q, err = ParseQuery(v.Get("q")); err != nil {
		return rq, err
	}
	if !withPaging {
		return rq, nil
	}
	if rq.After, rq.HasAfter, err = ParseCursor(v.Get("cursor")); err != nil {
		return rq, err
	}
	rq.Limit, err = ParseLimit(v.Get("limit"))
	return rq, err
}

// DecodeStrict decodes one JSON object, refusing unknown fields.
func DecodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return fmt.Errorf("%w: more than %d bytes", ErrTooLarge, mbe.Limit)
		}
		return BodyError(err)
	}
	return nil
}

// WriteFieldError answers a validation error naming its field (CONTRACT.md:
// {"error", "field"}).
func WriteFieldError(w http.ResponseWriter, field, msg string) {
	webedge.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": msg, "field": field})
}

// AudienceJSON is the audience object of a registration.
type AudienceJSON struct {
	UserIDs     []string `json:"userids"`
	Departments []int64  `json:"departments"`
	All         bool     `json:"all"`
	// Tags are WeCom tag ids (the directory's Audience.Tags): the page's
	// edit and duplicate read them back, and PATCH takes them.
	Tags []int64 `json:"tags"`
}

// Audience is a as the domain's audience.
func (a AudienceJSON) Audience() yidu.Audience {
	return yidu.Audience{UserIDs: a.UserIDs, Departments: a.Departments, Tags: a.Tags, All: a.All}
}

// ToAudienceJSON is a in the API, its lists never null.
func ToAudienceJSON(a yidu.Audience) *AudienceJSON {
	return &AudienceJSON{UserIDs: NonNil(a.UserIDs), Departments: NonNil(a.Departments), All: a.All, Tags: NonNil(a.Tags)}
}

// NonNil is s, or an empty slice for nil (JSON [] rather than null).
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
