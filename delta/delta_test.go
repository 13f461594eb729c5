package delta

import (
	"bytes"
	"errors"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name    string
		d       Delta
		version byte
	}{
		{"card", Delta{CorpID: "ww1234567890abcdef", MsgID: "notice-2026-11-29", UID: 0, ReadTime: 1764406800, Source: SourceCard, Counted: true}, 1},
		{"max uid", Delta{CorpID: "c", MsgID: "m", UID: 1<<32 - 1, ReadTime: -1, Source: SourceEnterAgent, Counted: true}, 1},
		{"empty ids", Delta{UID: 7, ReadTime: 0, Source: SourceLink, Counted: true}, 1},
		{"reconcile", Delta{CorpID: "c", MsgID: "m", UID: 7, ReadTime: 5, Source: SourceReconcile, Counted: true}, 1},
		{"enter_agent not counted", Delta{CorpID: "c", MsgID: "m", UID: 9, ReadTime: 1764406800, Source: SourceEnterAgent}, 2},
		{"link not counted", Delta{CorpID: "c", MsgID: "m", UID: 9, ReadTime: 1764406800, Source: SourceLink}, 2},
		{"by userid, counted", Delta{CorpID: "c", MsgID: "m", UserID: "zhangsan", ReadTime: 1764406800, Source: SourceCard, Counted: true}, 3},
		{"by userid, not counted", Delta{CorpID: "c", MsgID: "m", UserID: "李四", ReadTime: 1764406800, Source: SourceLink}, 3},
		{"page ack", Delta{CorpID: "c", MsgID: "m", UID: 9, ReadTime: 1764406800, Source: SourceAck, Counted: true,
			Page: Page{Version: 2, IP: "203.0.113.7", UserAgent: "Mozilla/5.0 wxwork/4.1"}}, 4},
		{"page read to end, not counted", Delta{CorpID: "c", MsgID: "m", UID: 9, ReadTime: 1764406800, Source: SourceReadToEnd,
			Page: Page{Version: 1}}, 4},
		{"page ack archived only", Delta{CorpID: "c", MsgID: "m", UID: 9, ReadTime: 1764406800, Source: SourceAck,
			Page: Page{Version: 1, ArchiveOnly: true}}, 4},
		{"page link by userid", Delta{CorpID: "c", MsgID: "m", UserID: "zhangsan", ReadTime: 1764406800, Source: SourceLink,
			Page: Page{Version: 3, IP: "::1", UserAgent: "UA"}}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Marshal(tt.d)
			if b[0] != tt.version {
				t.Errorf("Marshal(%+v) is version %d; want %d", tt.d, b[0], tt.version)
			}
			got, err := Unmarshal(b)
			if err != nil {
				t.Fatalf("Unmarshal(Marshal(%+v)) error %v", tt.d, err)
			}
			if got != tt.d {
				t.Errorf("Unmarshal(Marshal(%+v)) = %+v", tt.d, got)
			}
		})
	}
}

// TestVersion1 decodes values as releases before read signals were kept
// apart wrote them (still in Kafka during an upgrade): every one counts,
// with its source as the signal. A counted delta is still written so,
// byte for byte, for a flushd not yet upgraded.
func TestVersion1(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want Delta
	}{
		// version, source, uvarint uid 300, varint read_time 99, "corp", "msg"
		{"card", []byte{1, 1, 0xac, 0x02, 0xc6, 0x01, 4, 'c', 'o', 'r', 'p', 3, 'm', 's', 'g'},
			Delta{CorpID: "corp", MsgID: "msg", UID: 300, ReadTime: 99, Source: SourceCard, Counted: true}},
		{"enter_agent", []byte{1, 2, 7, 10, 1, 'c', 1, 'm'},
			Delta{CorpID: "c", MsgID: "m", UID: 7, ReadTime: 5, Source: SourceEnterAgent, Counted: true}},
		{"link", []byte{1, 3, 7, 10, 1, 'c', 1, 'm'},
			Delta{CorpID: "c", MsgID: "m", UID: 7, ReadTime: 5, Source: SourceLink, Counted: true}},
		{"reconcile", []byte{1, 4, 7, 10, 1, 'c', 1, 'm'},
			Delta{CorpID: "c", MsgID: "m", UID: 7, ReadTime: 5, Source: SourceReconcile, Counted: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Unmarshal(tt.b)
			if err != nil || got != tt.want {
				t.Fatalf("Unmarshal(%x) = %+v, %v; want %+v", tt.b, got, err, tt.want)
			}
			if again := Marshal(got); !bytes.Equal(again, tt.b) {
				t.Errorf("Marshal(%+v) = %x; want the version 1 bytes %x", got, again, tt.b)
			}
		})
	}
}

func TestUnmarshalRejects(t *testing.T) {
	good := Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 300, ReadTime: 99, Source: SourceCard, Counted: true})
	good2 := Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 300, ReadTime: 99, Source: SourceEnterAgent})
	uid0 := Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 0, ReadTime: 99, Source: SourceEnterAgent})[3:]
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"one byte", []byte{1}},
		{"bad version", append([]byte{3}, good[1:]...)},
		{"version 0", append([]byte{0}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"huge corp len", []byte{1, 1, 0, 0, 0xff, 0x7f}},
		{"source 0", append([]byte{1, 0}, good[2:]...)},
		{"unknown source", append([]byte{1, 7}, good[2:]...)},
		{"v2 without flags", []byte{2, 2}},
		{"v2 unknown flag", append([]byte{2, 2, 2}, good2[3:]...)},
		{"v2 reconcile not counted", append([]byte{2, 4, 0}, good2[3:]...)},
		{"v2 truncated", good2[:len(good2)-1]},
		{"v3 without the userid flag", append(append([]byte{3, 1, 1}, uid0...), 1, 'u')},
		{"v3 without a userid", append([]byte{3, 1, 3}, uid0...)},
		{"v3 with an empty userid", append(append([]byte{3, 1, 3}, uid0...), 0)},
		{"v3 with a uid", append(append([]byte{3, 1, 3}, good2[3:]...), 1, 'u')},
		{"v3 reconcile", Marshal(Delta{CorpID: "c", MsgID: "m", UserID: "u", Source: SourceReconcile, Counted: true})},
		{"v3 truncated", Marshal(Delta{CorpID: "c", MsgID: "m", UserID: "zhangsan", Source: SourceCard})[:12]},
		{"v4 version 0", append(Marshal(Delta{CorpID: "c", MsgID: "m", UID: 1, Source: SourceAck, Page: Page{Version: 1}})[:9], 0, 0, 0)},
		{"v4 reconcile", append([]byte{4, 4}, Marshal(Delta{CorpID: "c", MsgID: "m", UID: 1, Source: SourceAck, Page: Page{Version: 1}})[2:]...)},
		{"v4 without the page", Marshal(Delta{CorpID: "c", MsgID: "m", UID: 1, Source: SourceAck, Page: Page{Version: 1}})[:9]},
		{"v4 counted and archive only", append([]byte{4, 6, 5}, Marshal(Delta{CorpID: "c", MsgID: "m", UID: 1, Source: SourceAck, Page: Page{Version: 1}})[3:]...)},
		{"v4 unknown flag", append([]byte{4, 6, 8}, Marshal(Delta{CorpID: "c", MsgID: "m", UID: 1, Source: SourceAck, Page: Page{Version: 1}})[3:]...)},
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
	f.Add(Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 3, ReadTime: 5, Source: SourceCard, Counted: true}))
	f.Add(Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 3, ReadTime: 5, Source: SourceEnterAgent}))
	f.Add([]byte{2, 3, 1, 7, 10, 1, 'c', 1, 'm'}) // version 2, counted
	f.Add([]byte{1, 1})
	f.Add(Marshal(Delta{CorpID: "corp", MsgID: "msg", UserID: "zhangsan", ReadTime: 5, Source: SourceCard, Counted: true}))
	f.Add(Marshal(Delta{CorpID: "corp", MsgID: "msg", UID: 3, ReadTime: 5, Source: SourceAck, Page: Page{Version: 2, IP: "10.0.0.1", UserAgent: "wxwork"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Unmarshal(b)
		if err != nil {
			return
		}
		if !d.Source.valid() || (d.Source == SourceReconcile && (!d.Counted || d.UserID != "")) || (d.UserID != "" && d.UID != 0) ||
			(b[0] == 4) != (d.Page.Version != 0) {
			t.Fatalf("Unmarshal(%x) accepted %+v", b, d)
		}
		if again, err := Unmarshal(Marshal(d)); err != nil || again != d {
			t.Fatalf("re-encode of %+v gave %+v, %v", d, again, err)
		}
	})
}
