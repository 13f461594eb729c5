package yidu

import (
	"errors"
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	sent := time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time // sent + retention; zero: an error
	}{
		{"3y", time.Date(2029, 1, 31, 9, 0, 0, 0, time.UTC)},
		{"18m", time.Date(2027, 7, 31, 9, 0, 0, 0, time.UTC)},
		{"90d", time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)},
		{"30y", time.Date(2056, 1, 31, 9, 0, 0, 0, time.UTC)},
		{"31y", time.Time{}},
		{"0d", time.Time{}},
		{"-1y", time.Time{}},
		{"+1y", time.Time{}},
		{"3w", time.Time{}},
		{"y", time.Time{}},
		{"3 y", time.Time{}},
		{"99999d", time.Time{}},
	}
	for _, tt := range tests {
		r, err := ParseRetention(tt.in)
		if tt.want.IsZero() {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseRetention(%q) = %v, %v; want ErrInvalid", tt.in, r, err)
			}
			continue
		}
		if err != nil || !r.Add(sent).Equal(tt.want) || r.String() != tt.in {
			t.Errorf("ParseRetention(%q) = %v (adds to %v), %v; want %v", tt.in, r, r.Add(sent), err, tt.want)
		}
	}
	if r, err := ParseRetention(""); err != nil || !r.IsZero() {
		t.Errorf("ParseRetention(\"\") = %v, %v; want the zero Retention", r, err)
	}
}
