package yidu

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestScheduleValidate(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	cst := time.FixedZone("CST", 8*3600)
	cases := []struct {
		name  string
		s     Schedule
		field string // "" when valid
	}{
		{"a minute ahead", Schedule{SendAt: now.Add(time.Minute)}, ""},
		{"in another zone", Schedule{SendAt: time.Date(2026, 12, 3, 18, 0, 0, 0, cst)}, ""},
		{"a year ahead", Schedule{SendAt: now.Add(MaxScheduleAhead)}, ""},
		{"over a year", Schedule{SendAt: now.Add(MaxScheduleAhead + time.Millisecond)}, "send_at"},
		{"now", Schedule{SendAt: now}, "send_at"},
		{"past", Schedule{SendAt: now.Add(-time.Second)}, "send_at"},
		{"missing", Schedule{}, "send_at"},
		{"draft", Schedule{Draft: true}, ""},
		{"draft with a time", Schedule{Draft: true, SendAt: now.Add(time.Hour)}, "send_at"},
		{"bad zone", Schedule{SendAt: now.Add(time.Hour), Timezone: "Mars/Olympus"}, "timezone"},
		{"zone", Schedule{SendAt: now.Add(time.Hour), Timezone: "Asia/Shanghai"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			err := s.Validate(now)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if s.Timezone == "" || (!s.Draft && s.SendAt.Location() != time.UTC) {
					t.Errorf("not canonical: %+v", s)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(strings.TrimPrefix(err.Error(), "invalid: "), tc.field) {
				t.Fatalf("Validate: %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
}

func TestNoticeStates(t *testing.T) {
	editable := map[NoticeState]bool{StateDraft: true, StateScheduled: true, StateHeld: true}
	for _, s := range []NoticeState{StateDraft, StateScheduled, StateSending, StateSent, StateCancelled, StateFailed, StateHeld} {
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
		if s.Editable() != editable[s] {
			t.Errorf("%s editable %v", s, s.Editable())
		}
	}
	if NoticeState("maybe").Valid() {
		t.Error("maybe is valid")
	}
}
