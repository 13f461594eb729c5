package delta

import (
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		d    Delta
	}{
		{"card", Delta{CorpID: "ww1234567890abcdef", MsgID: "notice-2026-11-29", UID: 0, ReadTime: 1764406800, Source: SourceCard}},
		{"max uid", Delta{CorpID: "c", MsgID: "m", UID: 1<<32 - 1, ReadTime: -1, Source: SourceEnterAgent}},
		{"empty ids", Delta{UID: 7, ReadTime: 0, Source: SourceLink}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Unmarshal(Marshal(tt.d))
			if err != nil {
				t.Fatalf("Unmarshal(Marshal(%+v)) error %v", tt.d, err)
			}
			if got != tt.d {
				t.Errorf("Unmarshal(Marshal(%+v)) = %+v", tt.d, got)
			}
		})
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good := Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 300, ReadTime: 99, Source: SourceCard})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"one byte", []byte{1}},
		{"bad version", append([]byte{2}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"huge corp len", []byte{1, 1, 0, 0, 0xff, 0x7f}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Unmarshal(tt.b); !errors.Is(err, ErrMalformed) {
				t.Errorf("Unmarshal(%x) error = %v; want ErrMalformed", tt.b, err)
			}
		})
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add(Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 3, ReadTime: 5, Source: SourceCard}))
	f.Add([]byte{1, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Unmarshal(b)
		if err != nil {
			return
		}
		if again, err := Unmarshal(Marshal(d)); err != nil || again != d {
			t.Fatalf("re-encode of %+v gave %+v, %v", d, again, err)
		}
	})
}
