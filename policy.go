package yidu

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounds of a follow-up policy (issue 30).
const (
	// MaxReminderRounds bounds a policy's rounds: more is spam, not
	// follow-up.
	MaxReminderRounds = 10
	// DefaultMinReminderDelay is dashboard.min_reminder_delay's default:
	// the least time between the send and a round, and between two rounds.
	DefaultMinReminderDelay = 10 * time.Minute
	// maxReminderDelay bounds one delay: a reminder a quarter later is
	// a new notice.
	maxReminderDelay = 90 * 24 * time.Hour
)

// Policy is a notice's follow-up: reminder rounds to its non-readers on a
// schedule, and escalation to department leaders after one of them. The
// zero Policy has no rounds.
type Policy struct {
	// Reminders are the rounds in order. Each is a delay after the send,
	// a number and a unit ("45s", "30m", "2h", "1d"; a day is a calendar
	// day in the app's zone), or a local time of day ("next 09:30": the
	// first 09:30 after the round before, or after the send).
	Reminders []string `json:"reminders" yaml:"reminders"`
	// EscalateAfter is the round after which leaders get a digest of
	// their people who have not read; 0 is none.
	EscalateAfter int `json:"escalate_after,omitempty" yaml:"escalate_after,omitempty"`
	// Deadline ends the follow-up: no round fires after it.
	Deadline *time.Time `json:"deadline,omitempty" yaml:"deadline,omitempty"`
	// WorkingHours is "HH:MM-HH:MM" in the app's zone; a round due
	// outside them waits for the next start. Empty is any time.
	WorkingHours string `json:"working_hours,omitempty" yaml:"working_hours,omitempty"`
	// WorkingDays is a list of days and ranges ("mon-fri", "mon,wed,sat");
	// empty is every day.
	WorkingDays string `json:"working_days,omitempty" yaml:"working_days,omitempty"`
}

// reminder is one parsed entry of Policy.Reminders: a delay, or (at) a
// minute of the local day.
type reminder struct {
	delay  time.Duration
	days   int // a delay of whole days: calendar days in the zone
	at     bool
	minute int
}

// ParseReminder parses one entry of Policy.Reminders. The error wraps
// ErrInvalid and names the field.
func ParseReminder(s string) (delay time.Duration, atMinute int, isTimeOfDay bool, err error) {
	r, err := parseReminder(s)
	if err != nil {
		return 0, 0, false, err
	}
	if r.at {
		return 0, r.minute, true, nil
	}
	return r.delay, 0, false, nil
}

func parseReminder(s string) (reminder, error) {
	e := strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(e, "next "); ok {
		m, err := parseClock(strings.TrimSpace(rest))
		if err != nil {
			return reminder{}, Fieldf("reminders", "reminders: %q: %v; want a time of day like \"next 09:30\"", Truncate(s, 32), err)
		}
		return reminder{at: true, minute: m}, nil
	}
	if len(e) < 2 {
		return reminder{}, Fieldf("reminders", "reminders: %q is neither a delay like \"2h\" nor a time of day like \"next 09:30\"", Truncate(s, 32))
	}
	unit := e[len(e)-1]
	n, err := strconv.Atoi(e[:len(e)-1])
	if err != nil || n <= 0 || e[0] == '+' {
		return reminder{}, Fieldf("reminders", "reminders: %q is neither a delay like \"2h\" nor a time of day like \"next 09:30\"", Truncate(s, 32))
	}
	var u time.Duration
	switch unit {
	case 's':
		u = time.Second
	case 'm':
		u = time.Minute
	case 'h':
		u = time.Hour
	case 'd':
		u = 24 * time.Hour
	default:
		return reminder{}, Fieldf("reminders", "reminders: %q: unit %q; want s, m, h or d", Truncate(s, 32), string(unit))
	}
	if int64(n) > int64(maxReminderDelay/u) {
		return reminder{}, Fieldf("reminders", "reminders: %q is more than %d days after the send", Truncate(s, 32), int(maxReminderDelay/(24*time.Hour)))
	}
	r := reminder{delay: time.Duration(n) * u}
	if unit == 'd' {
		r.days = n
	}
	return r, nil
}

// parseClock parses "HH:MM" (24 h) into minutes after midnight.
func parseClock(s string) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return 0, fmt.Errorf("%q is not HH:MM", Truncate(s, 16))
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || h[0] == '+' || h[0] == '-' || m[0] == '+' || m[0] == '-' || hh > 23 || mm > 59 || hh < 0 || mm < 0 {
		return 0, fmt.Errorf("%q is not a time of day (00:00-23:59)", Truncate(s, 16))
	}
	return hh*60 + mm, nil
}

var weekdays = map[string]time.Weekday{
	"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday, "wed": time.Wednesday,
	"thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday,
}

// window is a parsed policy's working time: minutes [start, end) of each
// day in days. all is "any time".
type window struct {
	all        bool
	start, end int
	days       [7]bool
}

// FollowUpSchedule is a validated Policy ready to say when each round fires.
type FollowUpSchedule struct {
	rounds        []reminder
	win           window
	deadline      *time.Time
	minGap        time.Duration
	escalateAfter int
}

// Validate checks p for a notice sent (or to be sent) at sentAt, with
// minDelay the least time between the send and a round and between two
// rounds (dashboard.min_reminder_delay). Every error wraps ErrInvalid and
// starts with the field's JSON name.
func (p *Policy) Validate(sentAt time.Time, minDelay time.Duration) error {
	_, err := p.Compile(sentAt, minDelay)
	return err
}

// Compile validates p (as Validate) and returns its schedule.
func (p *Policy) Compile(sentAt time.Time, minDelay time.Duration) (*FollowUpSchedule, error) {
	if len(p.Reminders) > MaxReminderRounds {
		return nil, Fieldf("reminders", "reminders: %d rounds; at most %d", len(p.Reminders), MaxReminderRounds)
	}
	s := &FollowUpSchedule{minGap: minDelay, escalateAfter: p.EscalateAfter}
	var last time.Duration
	for i, e := range p.Reminders {
		r, err := parseReminder(e)
		if err != nil {
			return nil, err
		}
		if !r.at {
			if r.delay < minDelay {
				return nil, Fieldf("reminders", "reminders: %q is less than the minimum delay %s after the send", Truncate(e, 32), minDelay)
			}
			if i > 0 && r.delay <= last {
				return nil, Fieldf("reminders", "reminders: %q is not after the round before it", Truncate(e, 32))
			}
			last = r.delay
		}
		s.rounds = append(s.rounds, r)
	}
	if p.EscalateAfter < 0 || p.EscalateAfter > len(p.Reminders) {
		return nil, Fieldf("escalate_after", "escalate_after: %d; want 0 (none) to %d, the number of reminders", p.EscalateAfter, len(p.Reminders))
	}
	if p.Deadline != nil {
		if !p.Deadline.After(sentAt) {
			return nil, Fieldf("deadline", "deadline: %s is not after the send (%s)", p.Deadline.Format(time.RFC3339), sentAt.Format(time.RFC3339))
		}
		d := *p.Deadline
		s.deadline = &d
	}
	w, err := parseWindow(p.WorkingHours, p.WorkingDays)
	if err != nil {
		return nil, err
	}
	s.win = w
	return s, nil
}

func parseWindow(hours, days string) (window, error) {
	w := window{all: hours == "" && days == "", start: 0, end: 24 * 60}
	if hours != "" {
		a, b, ok := strings.Cut(hours, "-")
		if !ok {
			return w, Fieldf("working_hours", "working_hours: %q; want HH:MM-HH:MM like \"09:00-19:00\"", Truncate(hours, 32))
		}
		start, err := parseClock(strings.TrimSpace(a))
		if err != nil {
			return w, Fieldf("working_hours", "working_hours: %v", err)
		}
		end, err := parseClock(strings.TrimSpace(b))
		if err != nil {
			return w, Fieldf("working_hours", "working_hours: %v", err)
		}
		if end <= start {
			return w, Fieldf("working_hours", "working_hours: %q ends before it starts", Truncate(hours, 32))
		}
		w.start, w.end = start, end
	}
	if days == "" {
		w.days = [7]bool{true, true, true, true, true, true, true}
		return w, nil
	}
	for part := range strings.SplitSeq(strings.ToLower(days), ",") {
		a, b, isRange := strings.Cut(strings.TrimSpace(part), "-")
		from, ok1 := weekdays[strings.TrimSpace(a)]
		to, ok2 := from, true
		if isRange {
			to, ok2 = weekdays[strings.TrimSpace(b)]
		}
		if !ok1 || !ok2 {
			return w, Fieldf("working_days", "working_days: %q; want days like \"mon-fri\" or \"mon,wed,sat\"", Truncate(days, 32))
		}
		for d := from; ; d = (d + 1) % 7 {
			w.days[d] = true
			if d == to {
				break
			}
		}
	}
	return w, nil
}

// Rounds is the number of rounds in the schedule.
func (s *FollowUpSchedule) Rounds() int { return len(s.rounds) }

// EscalateAfter is the round after which leaders are told; 0 is none.
func (s *FollowUpSchedule) EscalateAfter() int { return s.escalateAfter }

// Times returns when each round fires for a notice sent at sentAt, in
// loc (the app's zone): round N (index N-1) at the first moment past its
// time that lies inside the working hours and days, and at least the
// minimum delay after the round before. Rounds that would fire after the
// deadline are left out, with every round after them.
func (s *FollowUpSchedule) Times(sentAt time.Time, loc *time.Location) []time.Time {
	var out []time.Time
	prev := sentAt
	for _, r := range s.rounds {
		var t time.Time
		switch {
		case r.at:
			t = nextClock(prev, r.minute, loc)
		case r.days > 0:
			t = sentAt.In(loc).AddDate(0, 0, r.days)
		default:
			t = sentAt.Add(r.delay)
		}
		if t.Before(prev.Add(s.minGap)) {
			t = prev.Add(s.minGap)
		}
		t = s.win.next(t, loc)
		if s.deadline != nil && t.After(*s.deadline) {
			break
		}
		out = append(out, t)
		prev = t
	}
	return out
}

// Due says which round should fire at now: the first round after done
// (the rounds already fired) whose time has come. A round due while yidu
// was down is due at its start. ok is false when none is due; next is
// then the next round's time (zero when the schedule is over).
func (s *FollowUpSchedule) Due(sentAt, now time.Time, loc *time.Location, done int) (round int, next time.Time, ok bool) {
	times := s.Times(sentAt, loc)
	if done >= len(times) {
		return 0, time.Time{}, false
	}
	if !times[done].After(now) {
		return done + 1, times[done], true
	}
	return 0, times[done], false
}

// nextClock returns the first instant strictly after t whose local time
// in loc is minute (after midnight). A minute a DST jump skips is taken
// as Go's time.Date normalises it (the same wall offset later).
func nextClock(t time.Time, minute int, loc *time.Location) time.Time {
	l := t.In(loc)
	c := time.Date(l.Year(), l.Month(), l.Day(), minute/60, minute%60, 0, 0, loc)
	for !c.After(t) {
		l = l.AddDate(0, 0, 1)
		c = time.Date(l.Year(), l.Month(), l.Day(), minute/60, minute%60, 0, 0, loc)
	}
	return c
}

// next returns the first instant at or after t inside the window.
func (w window) next(t time.Time, loc *time.Location) time.Time {
	if w.all {
		return t
	}
	l := t.In(loc)
	for i := 0; i < 8; i++ {
		day := time.Date(l.Year(), l.Month(), l.Day()+i, 0, 0, 0, 0, loc)
		if !w.days[day.Weekday()] {
			continue
		}
		start := time.Date(day.Year(), day.Month(), day.Day(), w.start/60, w.start%60, 0, 0, loc)
		end := time.Date(day.Year(), day.Month(), day.Day(), w.end/60, w.end%60, 0, 0, loc)
		if w.end == 24*60 {
			end = time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
		}
		if t.Before(start) {
			return start
		}
		if t.Before(end) {
			return t
		}
	}
	return t // no working day at all cannot pass Compile
}

// NextDay returns the start of the working time on the first working day
// after t's day in loc: where a round spread over days (the app's daily
// quota ran out) sends its next part.
func (s *FollowUpSchedule) NextDay(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	return s.win.next(time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc), loc)
}

// DayEnd returns the end of the working time of t's day in loc (the next
// midnight when the policy has no working hours).
func (s *FollowUpSchedule) DayEnd(t time.Time, loc *time.Location) time.Time {
	l := t.In(loc)
	if s.win.all || s.win.end == 24*60 {
		return time.Date(l.Year(), l.Month(), l.Day()+1, 0, 0, 0, 0, loc)
	}
	return time.Date(l.Year(), l.Month(), l.Day(), s.win.end/60, s.win.end%60, 0, 0, loc)
}

// Deadline is the policy's deadline; nil is none.
func (s *FollowUpSchedule) Deadline() *time.Time { return s.deadline }
