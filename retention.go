package yidu

import (
	"strconv"
	"time"
)

// Retention is how long a notice's personal data is kept after it was
// sent (PIPL Art. 19: no longer than necessary): a number of years,
// months or days, written "3y", "18m", "90d". The zero Retention keeps
// it until a purge by date.
type Retention struct {
	N    int
	Unit byte // 'y', 'm' or 'd'
}

// MaxRetentionYears bounds a retention: a typo of "300y" is refused.
const MaxRetentionYears = 30

// ParseRetention parses "3y", "18m" or "90d"; "" is the zero Retention.
func ParseRetention(s string) (Retention, error) {
	if s == "" {
		return Retention{}, nil
	}
	if len(s) < 2 || len(s) > 5 {
		return Retention{}, Invalidf("retention %q: want a number and y, m or d (3y, 18m, 90d)", Truncate(s, 16))
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	u := s[len(s)-1]
	if err != nil || n < 1 || s[0] == '+' || (u != 'y' && u != 'm' && u != 'd') {
		return Retention{}, Invalidf("retention %q: want a number and y, m or d (3y, 18m, 90d)", Truncate(s, 16))
	}
	r := Retention{N: n, Unit: u}
	if r.Add(time.Time{}).After(time.Time{}.AddDate(MaxRetentionYears, 0, 0)) {
		return Retention{}, Invalidf("retention %q: at most %d years", s, MaxRetentionYears)
	}
	return r, nil
}

// IsZero reports whether r keeps data until a purge by date.
func (r Retention) IsZero() bool { return r.N == 0 }

// String is r as ParseRetention reads it.
func (r Retention) String() string {
	if r.IsZero() {
		return ""
	}
	return strconv.Itoa(r.N) + string(r.Unit)
}

// Add returns t plus r, by the calendar (3y after 2024-02-29 is
// 2027-03-01, as time.AddDate normalises).
func (r Retention) Add(t time.Time) time.Time {
	switch r.Unit {
	case 'y':
		return t.AddDate(r.N, 0, 0)
	case 'm':
		return t.AddDate(0, r.N, 0)
	case 'd':
		return t.AddDate(0, 0, r.N)
	}
	return t
}
