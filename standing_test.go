package yidu

import (
	"errors"
	"testing"
	"time"
)

func TestStandingValidate(t *testing.T) {
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	past, soon, far := now.Add(-time.Minute), now.Add(time.Hour), now.AddDate(11, 0, 0)
	tests := []struct {
		name  string
		in    Standing
		field string // "" valid
	}{
		{"default deadline", Standing{}, ""},
		{"7d, 1y, until soon", Standing{JoinDeadline: "7d", ReacknowledgeEvery: "1y", Until: &soon}, ""},
		{"48h and 6m", Standing{JoinDeadline: "48h", ReacknowledgeEvery: "6m"}, ""},
		{"2w", Standing{JoinDeadline: "2w"}, ""},
		{"unit", Standing{JoinDeadline: "7x"}, "standing.join_deadline"},
		{"negative", Standing{JoinDeadline: "-7d"}, "standing.join_deadline"},
		{"plus", Standing{JoinDeadline: "+7d"}, "standing.join_deadline"},
		{"zero", Standing{JoinDeadline: "0d"}, "standing.join_deadline"},
		{"too short", Standing{JoinDeadline: "30m"}, "standing.join_deadline"},
		{"too long", Standing{JoinDeadline: "2y"}, "standing.join_deadline"},
		{"huge", Standing{JoinDeadline: "99999y"}, "standing.join_deadline"},
		{"number only", Standing{JoinDeadline: "7"}, "standing.join_deadline"},
		{"cycle too short", Standing{ReacknowledgeEvery: "12h"}, "standing.reacknowledge_every"},
		{"cycle too long", Standing{ReacknowledgeEvery: "6y"}, "standing.reacknowledge_every"},
		{"cycle junk", Standing{ReacknowledgeEvery: "yearly"}, "standing.reacknowledge_every"},
		{"until past", Standing{Until: &past}, "standing.until"},
		{"until far", Standing{Until: &far}, "standing.until"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.in
			err := s.Validate(now)
			var se *StandingError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate(%+v) = %v; want nil", tc.in, err)
			case tc.field == "":
				if s.JoinDeadline == "" {
					t.Errorf("JoinDeadline not defaulted")
				}
			case !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, ErrInvalid):
				t.Errorf("Validate(%+v) = %v; want a StandingError naming %s, wrapping ErrInvalid", tc.in, err, tc.field)
			}
		})
	}
}

func TestStandingDeadlineAndCycle(t *testing.T) {
	sh, _ := time.LoadLocation("Asia/Shanghai")
	joined := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	s := Standing{JoinDeadline: "7d", ReacknowledgeEvery: "1y"}
	if got, want := s.Deadline(joined, sh), joined.AddDate(0, 0, 7); !got.Equal(want) {
		t.Errorf("Deadline = %v; want %v", got, want)
	}
	if got, ok := s.NextCycle(joined, sh); !ok || !got.Equal(joined.AddDate(1, 0, 0)) {
		t.Errorf("NextCycle = %v, %v; want a year on", got, ok)
	}
	if _, ok := (Standing{}).NextCycle(joined, sh); ok {
		t.Error("NextCycle without a cycle is ok")
	}
	until := joined.Add(time.Hour)
	s.Until = &until
	if !s.Enrolling(joined) || s.Enrolling(until) {
		t.Error("Enrolling: want true before until, false at it")
	}
	if err := CheckStandingAudience(Audience{UserIDs: []string{"a"}}); err == nil {
		t.Error("CheckStandingAudience(userids only) = nil")
	}
	if err := CheckStandingAudience(Audience{Departments: []int64{2}}); err != nil {
		t.Errorf("CheckStandingAudience(departments) = %v", err)
	}
}
