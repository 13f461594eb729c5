package yidu

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Standing makes a notice a standing rule (issue 51): whoever joins its
// audience later (a department's subtree, a tag, 全员, as the audience was
// asked) is enrolled when a directory sync brings them in, sent the
// notice's current version with a deadline of their own (JoinDeadline
// after they joined), and counted from then on; with ReacknowledgeEvery,
// everyone in the audience is asked again on that cycle. Until ends it:
// nobody is enrolled, and no cycle starts, after it.
type Standing struct {
	// JoinDeadline is how long a joiner has: "7d" (the default), "48h",
	// "2w".
	JoinDeadline string `json:"join_deadline,omitempty"`
	// ReacknowledgeEvery is the cycle on which the whole audience
	// acknowledges again: "1y", "6m", "90d"; empty is none.
	ReacknowledgeEvery string `json:"reacknowledge_every,omitempty"`
	// Until ends the notice's standing; nil: until an admin ends it.
	Until *time.Time `json:"until"`
}

// DefaultJoinDeadline is a joiner's deadline when the notice names none.
const DefaultJoinDeadline = "7d"

// Bounds of a standing notice: a joiner's deadline between an hour and a
// year, a cycle between a day and five years, its end at most ten years
// ahead.
const (
	minJoinDeadline    = time.Hour
	maxJoinDeadline    = 366 * 24 * time.Hour
	minCycle           = 24 * time.Hour
	maxCycle           = 5 * 366 * 24 * time.Hour
	MaxStandingYears   = 10
	standingPeriodHelp = "a number and h, d, w, m or y (48h, 7d, 2w, 6m, 1y)"
)

// StandingError is a refused standing spec: Field names the JSON field
// ("standing.join_deadline"), Reason why. It wraps ErrInvalid.
type StandingError struct {
	Field, Reason string
}

func (e *StandingError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap makes a StandingError an ErrInvalid (400).
func (e *StandingError) Unwrap() error { return ErrInvalid }

func standingErr(field, format string, args ...any) error {
	return &StandingError{Field: "standing." + field, Reason: strings.TrimSpace(fmt.Sprintf(format, args...))}
}

// period is a parsed duration of Standing: N units, by the calendar for
// days and longer.
type period struct {
	n    int
	unit byte
}

func parsePeriod(s string) (period, bool) {
	if len(s) < 2 || len(s) > 6 || s[0] == '+' || s[0] == '-' {
		return period{}, false
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	u := s[len(s)-1]
	if err != nil || n < 1 || !strings.ContainsRune("hdwmy", rune(u)) {
		return period{}, false
	}
	return period{n, u}, true
}

// add returns t plus p in loc's calendar (a day is a calendar day).
func (p period) add(t time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	l := t.In(loc)
	switch p.unit {
	case 'h':
		return t.Add(time.Duration(p.n) * time.Hour)
	case 'd':
		return l.AddDate(0, 0, p.n).UTC()
	case 'w':
		return l.AddDate(0, 0, 7*p.n).UTC()
	case 'm':
		return l.AddDate(0, p.n, 0).UTC()
	default:
		return l.AddDate(p.n, 0, 0).UTC()
	}
}

// Validate checks s and fills its default (JoinDeadline "7d"); Until is
// put in UTC to the millisecond and must be after now. Every error is a
// *StandingError naming the field.
func (s *Standing) Validate(now time.Time) error {
	s.JoinDeadline = strings.TrimSpace(s.JoinDeadline)
	if s.JoinDeadline == "" {
		s.JoinDeadline = DefaultJoinDeadline
	}
	if err := checkPeriod("join_deadline", s.JoinDeadline, now, minJoinDeadline, maxJoinDeadline, "an hour and a year"); err != nil {
		return err
	}
	s.ReacknowledgeEvery = strings.TrimSpace(s.ReacknowledgeEvery)
	if s.ReacknowledgeEvery != "" {
		if err := checkPeriod("reacknowledge_every", s.ReacknowledgeEvery, now, minCycle, maxCycle, "a day and five years"); err != nil {
			return err
		}
	}
	return s.ValidateUntil(now)
}

// checkPeriod is the one rule for a period of Standing (field): it
// parses, and from now lasts between lo and hi (between says so in
// words).
func checkPeriod(field, v string, now time.Time, lo, hi time.Duration, between string) error {
	p, ok := parsePeriod(v)
	if !ok {
		return standingErr(field, "%q: want %s", Truncate(v, 16), standingPeriodHelp)
	}
	if d := p.add(now, nil).Sub(now); d < lo || d > hi {
		return standingErr(field, "%q: between %s", v, between)
	}
	return nil
}

// ValidateUntil checks Until alone (an admin ending a standing notice):
// after now, at most MaxStandingYears ahead.
func (s *Standing) ValidateUntil(now time.Time) error {
	if s.Until == nil {
		return nil
	}
	u := s.Until.UTC().Truncate(time.Millisecond)
	if !u.After(now) || u.After(now.AddDate(MaxStandingYears, 0, 0)) {
		return standingErr("until", "must be after now and at most %d years ahead", MaxStandingYears)
	}
	s.Until = &u
	return nil
}

// Deadline is a joiner's deadline: JoinDeadline after joined, in loc's
// calendar. s must be valid.
func (s Standing) Deadline(joined time.Time, loc *time.Location) time.Time {
	p, ok := parsePeriod(s.JoinDeadline)
	if !ok {
		p, _ = parsePeriod(DefaultJoinDeadline)
	}
	return p.add(joined, loc)
}

// NextCycle is when the cycle that began at start ends and the next
// begins; ok is false without ReacknowledgeEvery.
func (s Standing) NextCycle(start time.Time, loc *time.Location) (time.Time, bool) {
	p, ok := parsePeriod(s.ReacknowledgeEvery)
	if !ok {
		return time.Time{}, false
	}
	return p.add(start, loc), true
}

// Enrolling reports whether the notice still enrols joiners at now.
func (s Standing) Enrolling(now time.Time) bool { return s.Until == nil || now.Before(*s.Until) }

// CheckStandingAudience is the rule that a standing notice's audience can
// have newcomers: departments, tags or 全员, not UserIDs alone.
func CheckStandingAudience(a Audience) error {
	if !a.All && len(a.Departments) == 0 && len(a.Tags) == 0 {
		return standingErr("audience", "a standing notice's audience needs departments, tags or all: a list of UserIDs has no newcomers")
	}
	return nil
}

// Enrolment is one member enrolled in a standing notice after its first
// send: who, the version they were sent, when they joined its audience,
// their deadline, and when their card left (nil: not yet) with its
// outcome (pending, sent, unknown, refused, nobody).
type Enrolment struct {
	UID      uint32
	UserID   string
	Version  int
	Batch    int
	JoinedAt time.Time
	Deadline time.Time
	SentAt   *time.Time
	Status   string
}
