package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/yidu-io/yidu/campaign"
	"github.com/yidu-io/yidu/dashboard/internal/handle"

	"github.com/yidu-io/yidu"
)

// Parsers of everything the API reads from a request are handle's; each
// returns an error wrapping errBadParam, which the handlers answer with 400.
var (
	errBadParam = handle.ErrBadParam
	errTooLarge = handle.ErrTooLarge
	badParam    = handle.BadParam
	parseMsgID  = handle.ParseMsgID
	bodyError   = handle.BodyError
	// writeFieldError answers a validation error naming its field.
	writeFieldError = handle.WriteFieldError
)

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
	// Standing makes it a standing notice (docs/api.md, Standing
	// notices; yidu.Standing).
	Standing *yidu.Standing `json:"standing"`
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

// maxRegisterBody bounds POST /messages (handle.MaxRegisterBody).
const maxRegisterBody = handle.MaxRegisterBody

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
	reg.Registration = yidu.Registration{MsgID: b.MsgID, Title: b.Title, Body: b.Body, URL: b.URL, Send: b.Send, Audience: b.Audience.Audience()}
	reg.Draft = b.Draft
	reg.Standing = b.Standing
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

// bodyTime parses a time field of a body (nil: absent or null). It is
// decoded here, not by the JSON decoder, whose error would not say which
// field was not a time.
func bodyTime(field string, raw *json.RawMessage) (*time.Time, error) {
	if raw == nil {
		return nil, nil
	}
	var t time.Time
	if err := json.Unmarshal(*raw, &t); err != nil {
		return nil, yidu.Fieldf(field, "%s must be an RFC 3339 time such as 2026-12-03T09:00:00+08:00", field)
	}
	return &t, nil
}
