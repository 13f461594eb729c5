package opt

import (
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
