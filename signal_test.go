package yidu

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestParseReadSignals(t *testing.T) {
	tests := []struct {
		name    string
		in      []string
		want    []Signal
		wantErr bool
	}{
		{"none configured", nil, []Signal{SignalButton, SignalLink}, false},
		{"enter_agent too", []string{"button", "link", "enter_agent"}, []Signal{SignalButton, SignalLink, SignalEnterAgent}, false},
		{"button only", []string{"button"}, []Signal{SignalButton}, false},
		{"empty list", []string{}, nil, true},
		{"unknown", []string{"button", "read"}, nil, true},
		{"case matters", []string{"Button"}, nil, true},
		{"twice", []string{"link", "link"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseReadSignals(tt.in)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("ParseReadSignals(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseReadSignals(%q) error %v; want ErrInvalid", tt.in, err)
			}
		})
	}
}

func TestSignalNames(t *testing.T) {
	for _, s := range Signals() {
		got, err := ParseSignal(s.String())
		if err != nil || got != s || !s.Valid() {
			t.Errorf("ParseSignal(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	// The values are message_read_record.source's codes.
	if SignalButton != 1 || SignalEnterAgent != 2 || SignalLink != 3 {
		t.Errorf("signal values %d %d %d; want the source codes 1 2 3", SignalButton, SignalEnterAgent, SignalLink)
	}
	if SignalReadToEnd != 5 || SignalAcknowledged != 6 {
		t.Errorf("page signal values %d %d; want 5 6 (4 is reconcile's source code)", SignalReadToEnd, SignalAcknowledged)
	}
	for _, s := range []Signal{0, 4, 7} {
		if s.Valid() {
			t.Errorf("signal %d is valid; want invalid", s)
		}
	}
	seen := map[int]bool{}
	for _, s := range Signals() {
		i := s.Index()
		if i < 0 || i >= NumSignals || seen[i] {
			t.Errorf("%v.Index() = %d; want a distinct index in 0..%d", s, i, NumSignals-1)
		}
		seen[i] = true
	}
}

func TestCountsAsRead(t *testing.T) {
	def := App{Name: "hr"}
	all := App{Name: "hr", ReadSignals: []Signal{SignalButton, SignalLink, SignalEnterAgent}}
	btn := App{Name: "hr", ReadSignals: []Signal{SignalButton}}
	tests := []struct {
		app  App
		s    Signal
		want bool
	}{
		{def, SignalButton, true}, {def, SignalLink, true}, {def, SignalEnterAgent, false},
		{all, SignalEnterAgent, true},
		{btn, SignalButton, true}, {btn, SignalLink, false}, {btn, SignalEnterAgent, false},
	}
	for _, tt := range tests {
		if got := tt.app.CountsAsRead(tt.s); got != tt.want {
			t.Errorf("App{ReadSignals: %v}.CountsAsRead(%v) = %v; want %v", tt.app.ReadSignals, tt.s, got, tt.want)
		}
	}
}

func TestSignalCountsJSON(t *testing.T) {
	var c SignalCounts
	for i, s := range Signals() {
		c.Set(s, int64(10+i))
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"button":10,"link":11,"enter_agent":12,"read_to_end":13,"acknowledged":14}`; string(b) != want {
		t.Errorf("json.Marshal(%+v) = %s; want %s", c, b, want)
	}
	if c.Get(SignalEnterAgent) != 12 || c.Get(Signal(9)) != 0 {
		t.Errorf("Get = %d, %d; want 12, 0", c.Get(SignalEnterAgent), c.Get(Signal(9)))
	}
}
