package opt

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	tests := []struct {
		name string
		v    time.Duration
		want time.Duration
	}{
		{"left out takes the default", 0, time.Second},
		{"negative takes the default", -time.Minute, time.Second},
		{"set is kept", time.Millisecond, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tt.v
			Positive(&v, time.Second)
			if v != tt.want {
				t.Errorf("Positive(%v) = %v; want %v", tt.v, v, tt.want)
			}
		})
	}
	n := 0
	Positive(&n, 1000)
	if n != 1000 {
		t.Errorf("Positive(0) = %d; want 1000", n)
	}
}

func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	set := slog.New(slog.NewTextHandler(&buf, nil))
	tests := []struct {
		name string
		l    *slog.Logger
		want func(*slog.Logger) bool
	}{
		{"left out discards", nil, func(l *slog.Logger) bool {
			return l != nil && !l.Enabled(context.Background(), slog.LevelError)
		}},
		{"set is kept", set, func(l *slog.Logger) bool { return l == set }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.l
			Logger(&l)
			if !tt.want(l) {
				t.Errorf("Logger(%p) = %p", tt.l, l)
			}
		})
	}
}

func TestClock(t *testing.T) {
	fixed := time.Date(2026, 12, 6, 18, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		now  func() time.Time
		want func(before, got, after time.Time) bool
	}{
		{"left out is time.Now", nil, func(before, got, after time.Time) bool { return !got.Before(before) && !got.After(after) }},
		{"set is kept", func() time.Time { return fixed }, func(_, got, _ time.Time) bool { return got.Equal(fixed) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := tt.now
			Clock(&now)
			if now == nil {
				t.Fatal("Clock left the clock nil")
			}
			before := time.Now()
			got := now()
			if after := time.Now(); !tt.want(before, got, after) {
				t.Errorf("Clock: now() = %v", got)
			}
		})
	}
}
