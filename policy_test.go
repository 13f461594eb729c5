package yidu

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestPolicyValidate(t *testing.T) {
	sent := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	before := sent.Add(-time.Hour)
	after := sent.Add(time.Hour)
	tests := []struct {
		name    string
		p       Policy
		wantErr string // the field the error starts with; "" is valid
	}{
		{"empty", Policy{}, ""},
		{"issue example", Policy{Reminders: []string{"2h", "next 09:30", "1d"}, EscalateAfter: 2, WorkingHours: "09:00-19:00", WorkingDays: "mon-fri"}, ""},
		{"under minimum", Policy{Reminders: []string{"5m"}}, "reminders"},
		{"at minimum", Policy{Reminders: []string{"10m"}}, ""},
		{"bad time of day", Policy{Reminders: []string{"next 25:00"}}, "reminders"},
		{"time without minutes", Policy{Reminders: []string{"next 9"}}, "reminders"},
		{"no unit", Policy{Reminders: []string{"30"}}, "reminders"},
		{"bad unit", Policy{Reminders: []string{"3w"}}, "reminders"},
		{"negative", Policy{Reminders: []string{"-2h"}}, "reminders"},
		{"out of order", Policy{Reminders: []string{"1d", "2h"}}, "reminders"},
		{"too far", Policy{Reminders: []string{"400d"}}, "reminders"},
		{"deadline before send", Policy{Reminders: []string{"2h"}, Deadline: &before}, "deadline"},
		{"deadline after send", Policy{Reminders: []string{"2h"}, Deadline: &after}, ""},
		{"hours end before start", Policy{WorkingHours: "19:00-09:00"}, "working_hours"},
		{"hours equal", Policy{WorkingHours: "09:00-09:00"}, "working_hours"},
		{"hours no dash", Policy{WorkingHours: "09:00"}, "working_hours"},
		{"bad day", Policy{WorkingDays: "mon-fry"}, "working_days"},
		{"day list", Policy{WorkingDays: "mon,wed,sat"}, ""},
		{"wrapping days", Policy{WorkingDays: "sat-mon"}, ""},
		{"eleven rounds", Policy{Reminders: []string{"1h", "2h", "3h", "4h", "5h", "6h", "7h", "8h", "9h", "10h", "11h"}}, "reminders"},
		{"ten rounds", Policy{Reminders: []string{"1h", "2h", "3h", "4h", "5h", "6h", "7h", "8h", "9h", "10h"}}, ""},
		{"escalate past rounds", Policy{Reminders: []string{"1h"}, EscalateAfter: 2}, "escalate_after"},
		{"escalate negative", Policy{Reminders: []string{"1h"}, EscalateAfter: -1}, "escalate_after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate(sent, DefaultMinReminderDelay)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate = %v; want ErrInvalid", err)
			}
			if msg := strings.TrimPrefix(err.Error(), "invalid: "); !strings.HasPrefix(msg, tt.wantErr) {
				t.Fatalf("Validate = %q; want it to start with %q", msg, tt.wantErr)
			}
		})
	}
}

func TestScheduleTimes(t *testing.T) {
	sh := mustLoc(t, "Asia/Shanghai")
	ny := mustLoc(t, "America/New_York")
	at := func(loc *time.Location, s string) time.Time {
		t.Helper()
		v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	dl := func(loc *time.Location, s string) *time.Time { v := at(loc, s); return &v }
	tests := []struct {
		name string
		loc  *time.Location
		p    Policy
		sent string
		want []string // local times
	}{
		{"plain delays", sh, Policy{Reminders: []string{"2h", "30m"}}, "2026-12-03 09:00", nil /* invalid: checked below */},
		{"delays, no window", sh, Policy{Reminders: []string{"30m", "2h", "1d"}}, "2026-12-03 09:00",
			[]string{"2026-12-03 09:30", "2026-12-03 11:00", "2026-12-04 09:00"}},
		// Friday 18:00 + 2h is 20:00, after hours: Monday 09:00 (2026-12-07).
		{"working hours across a weekend", sh, Policy{Reminders: []string{"2h"}, WorkingHours: "09:00-19:00", WorkingDays: "mon-fri"},
			"2026-12-04 18:00", []string{"2026-12-07 09:00"}},
		// Saturday send, 1h: Monday 09:00.
		{"sent on saturday", sh, Policy{Reminders: []string{"1h"}, WorkingHours: "09:00-19:00", WorkingDays: "mon-fri"},
			"2026-12-05 10:00", []string{"2026-12-07 09:00"}},
		{"inside hours stays", sh, Policy{Reminders: []string{"1h"}, WorkingHours: "09:00-19:00", WorkingDays: "mon-fri"},
			"2026-12-03 10:00", []string{"2026-12-03 11:00"}},
		{"days only", sh, Policy{Reminders: []string{"1d"}, WorkingDays: "mon-fri"},
			"2026-12-04 15:00", []string{"2026-12-07 00:00"}},
		// Sent 10:00, "next 09:30" is tomorrow's.
		{"next 09:30 after 09:30", sh, Policy{Reminders: []string{"next 09:30"}}, "2026-12-03 10:00", []string{"2026-12-04 09:30"}},
		{"next 09:30 before 09:30", sh, Policy{Reminders: []string{"next 09:30"}}, "2026-12-03 08:00", []string{"2026-12-03 09:30"}},
		// 09:25: next 09:30 is 5 min away, under the 10 min minimum: 09:35.
		{"next under minimum gap", sh, Policy{Reminders: []string{"next 09:30"}}, "2026-12-03 09:25", []string{"2026-12-03 09:35"}},
		// Thursday 10:00 → Friday 09:30 → "next 09:30" after that is Saturday, outside: Monday 09:00? No: Monday 09:30 is
		// not what the window gives; the window moves Saturday 09:30 to Monday 09:00.
		{"next then weekend", sh, Policy{Reminders: []string{"next 09:30", "next 09:30"}, WorkingHours: "09:00-19:00", WorkingDays: "mon-fri"},
			"2026-12-03 10:00", []string{"2026-12-04 09:30", "2026-12-07 09:00"}},
		{"deadline cuts", sh, Policy{Reminders: []string{"1h", "2h", "1d"}, Deadline: dl(sh, "2026-12-03 12:00")},
			"2026-12-03 09:00", []string{"2026-12-03 10:00", "2026-12-03 11:00"}},
		{"deadline after window move", sh, Policy{Reminders: []string{"2h"}, WorkingHours: "09:00-19:00", Deadline: dl(sh, "2026-12-04 08:00")},
			"2026-12-03 18:00", []string{}},
		// New York leaves DST on 2026-11-01 at 02:00: a calendar day
		// after 2026-10-31 09:00 EDT is 2026-11-01 09:00 EST, 25 h later.
		{"dst: a day is a calendar day", ny, Policy{Reminders: []string{"1d"}}, "2026-10-31 09:00", []string{"2026-11-01 09:00"}},
		{"dst: hours are hours", ny, Policy{Reminders: []string{"24h"}}, "2026-10-31 09:00", []string{"2026-11-01 08:00"}},
		// 2026-03-08 02:00 EST jumps to 03:00 EDT.
		{"dst: working hours after spring jump", ny, Policy{Reminders: []string{"next 09:30"}, WorkingHours: "09:00-17:00"},
			"2026-03-07 18:00", []string{"2026-03-08 09:30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := at(tt.loc, tt.sent)
			s, err := tt.p.Compile(sent, DefaultMinReminderDelay)
			if tt.want == nil {
				if err == nil {
					t.Fatal("Compile accepted an out-of-order policy")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := s.Times(sent, tt.loc)
			if len(got) != len(tt.want) {
				t.Fatalf("Times = %v; want %v", got, tt.want)
			}
			for i := range got {
				if w := at(tt.loc, tt.want[i]); !got[i].Equal(w) {
					t.Errorf("round %d at %s; want %s", i+1, got[i].In(tt.loc), w)
				}
			}
		})
	}
	// The dst case above must differ by 25 h, not 24.
	s, _ := (&Policy{Reminders: []string{"1d"}}).Compile(at(ny, "2026-10-31 09:00"), time.Minute)
	if d := s.Times(at(ny, "2026-10-31 09:00"), ny)[0].Sub(at(ny, "2026-10-31 09:00")); d != 25*time.Hour {
		t.Errorf("a day across the DST end is %s; want 25h", d)
	}
}

func TestScheduleDue(t *testing.T) {
	sh := mustLoc(t, "Asia/Shanghai")
	sent := time.Date(2026, 12, 3, 9, 0, 0, 0, sh)
	s, err := (&Policy{Reminders: []string{"1h", "3h"}, Deadline: ptr(sent.Add(5 * time.Hour))}).Compile(sent, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		now       time.Time
		done      int
		wantRound int
		wantNext  time.Time
	}{
		{"before round 1", sent.Add(30 * time.Minute), 0, 0, sent.Add(time.Hour)},
		{"round 1 due", sent.Add(time.Hour), 0, 1, sent.Add(time.Hour)},
		// Down from 09:30 to 13:00: round 1 is due at start, then round 2.
		{"due during downtime", sent.Add(4 * time.Hour), 0, 1, sent.Add(time.Hour)},
		{"second after downtime", sent.Add(4 * time.Hour), 1, 2, sent.Add(3 * time.Hour)},
		{"all done", sent.Add(4 * time.Hour), 2, 0, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			round, next, ok := s.Due(sent, tt.now, sh, tt.done)
			if round != tt.wantRound || ok != (tt.wantRound > 0) || !next.Equal(tt.wantNext) {
				t.Fatalf("Due = %d, %s, %v; want %d, %s", round, next, ok, tt.wantRound, tt.wantNext)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzParseReminder: any entry either parses to a delay within bounds or
// a minute of the day, or is refused with ErrInvalid naming the field.
func FuzzParseReminder(f *testing.F) {
	for _, s := range []string{"2h", "next 09:30", "1d", "45s", "30m", "next 9:05", "+1h", "0s", "next 24:00", "99999999999d", "next 09:-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, m, isAt, err := ParseReminder(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "invalid: reminders") {
				t.Fatalf("ParseReminder(%q) = %v; want ErrInvalid starting with reminders", s, err)
			}
			return
		}
		if isAt && (m < 0 || m >= 24*60) {
			t.Fatalf("ParseReminder(%q) minute %d", s, m)
		}
		if !isAt && (d <= 0 || d > maxReminderDelay) {
			t.Fatalf("ParseReminder(%q) delay %s", s, d)
		}
		p := Policy{Reminders: []string{s}, WorkingHours: "09:00-19:00", WorkingDays: "mon-fri"}
		sc, err := p.Compile(time.Unix(0, 0), time.Second)
		if err != nil {
			return
		}
		for _, at := range sc.Times(time.Unix(0, 0), time.UTC) {
			if h := at.UTC().Hour(); h < 9 || h >= 19 {
				t.Fatalf("%q fires at %s, outside working hours", s, at)
			}
		}
	})
}
