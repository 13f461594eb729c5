package yidu

import (
	"time"
)

// NoticeState is where a notice sent from yidu (the campaign package) is
// in its life: a draft or a scheduled notice is not registered yet (its
// audience is snapshotted when it is sent), sending is claimed by one
// replica, sent is registered and delivered.
type NoticeState string

// Notice states (campaigns.state, migration 00011).
const (
	// StateDraft: saved without a send time; sent only by a person.
	StateDraft NoticeState = "draft"
	// StateScheduled: waits for its send_at; editable and cancellable.
	StateScheduled NoticeState = "scheduled"
	// StateSending: claimed by one replica (owner and lease); no longer
	// editable. A lease that runs out is resumed by another replica.
	StateSending NoticeState = "sending"
	// StateSent: registered and every batch has a final outcome.
	StateSent NoticeState = "sent"
	// StateCancelled: cancelled by a person before it started sending.
	StateCancelled NoticeState = "cancelled"
	// StateFailed: sending gave up; StateReason says why.
	StateFailed NoticeState = "failed"
	// StateHeld: its time passed by more than the allowed lateness (yidu
	// was down): a person must send or cancel it.
	StateHeld NoticeState = "held"
)

// Valid reports whether s is one of the notice states.
func (s NoticeState) Valid() bool {
	switch s {
	case StateDraft, StateScheduled, StateSending, StateSent, StateCancelled, StateFailed, StateHeld:
		return true
	}
	return false
}

// Editable reports whether a notice in state s may still be edited,
// cancelled or sent by hand: only before it starts sending.
func (s NoticeState) Editable() bool {
	return s == StateDraft || s == StateScheduled || s == StateHeld
}

// MaxScheduleAhead bounds how far ahead a notice may be scheduled.
const MaxScheduleAhead = 366 * 24 * time.Hour

// DefaultTimezone is an app's time zone when the config names none: the
// time zone send_at is shown and entered in.
const DefaultTimezone = "Asia/Shanghai"

// Shanghai is China Standard Time, UTC+8 all year (no daylight saving
// since 1991), so no time zone database is needed: the ledger's calendar
// and the default zone of the reading page and the evidence PDF.
var Shanghai = time.FixedZone("Asia/Shanghai", 8*3600)

// Schedule is when a notice is sent: at SendAt, or (Draft) not until a
// person sends it.
type Schedule struct {
	// SendAt is the instant to send; zero for a draft.
	SendAt time.Time
	Draft  bool
	// Timezone is the app's IANA time zone (empty: DefaultTimezone); it
	// decides how SendAt is shown, not the instant.
	Timezone string
}

// Validate checks s against now and puts SendAt in UTC to the millisecond
// (DATETIME(3)): a draft has no SendAt; otherwise SendAt must be after now
// and at most MaxScheduleAhead ahead. Every error wraps ErrInvalid and
// starts with the field.
func (s *Schedule) Validate(now time.Time) error {
	if s.Timezone == "" {
		s.Timezone = DefaultTimezone
	}
	if _, err := time.LoadLocation(s.Timezone); err != nil {
		return &FieldError{Field: "timezone", Value: s.Timezone, Echo: 64, Reason: "timezone %q is not an IANA time zone"}
	}
	if s.Draft {
		if !s.SendAt.IsZero() {
			return Fieldf("send_at", "send_at must be empty for a draft")
		}
		return nil
	}
	if s.SendAt.IsZero() {
		return Fieldf("send_at", "send_at is required to schedule a notice")
	}
	s.SendAt = s.SendAt.UTC().Truncate(time.Millisecond)
	if !s.SendAt.After(now) {
		return Fieldf("send_at", "send_at must be in the future")
	}
	if s.SendAt.After(now.Add(MaxScheduleAhead)) {
		return Fieldf("send_at", "send_at must be at most one year ahead")
	}
	return nil
}
