package flushd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
)

// FuzzDecode feeds arbitrary record values through what the Flusher does
// with them: a value is either rejected (counted as malformed) or yields a
// delta that pending accepts and the Writer can bind without error, its
// counted read and its signal's time each in their place.
func FuzzDecode(f *testing.F) {
	f.Add(delta.Marshal(delta.Delta{CorpID: "ww1", MsgID: "task-1", UID: 7, ReadTime: base, Source: delta.SourceCard, Counted: true}))
	f.Add(delta.Marshal(delta.Delta{CorpID: "ww1", MsgID: "task-1", UID: 7, ReadTime: base, Source: delta.SourceEnterAgent}))
	f.Add(delta.Marshal(delta.Delta{CorpID: "ww1", MsgID: "task-1", UID: 7, ReadTime: base, Source: delta.SourceReconcile, Counted: true}))
	f.Add(delta.Marshal(delta.Delta{CorpID: "ww1", MsgID: "bad id", UID: 7, ReadTime: base, Source: delta.SourceCard, Counted: true}))
	f.Add(delta.Marshal(delta.Delta{CorpID: "ww1", MsgID: "t", UID: 1<<32 - 1, ReadTime: -1}))
	f.Add([]byte{})
	f.Add([]byte{1, 1, 0x80})
	f.Fuzz(func(t *testing.T, value []byte) {
		d, err := decode(value)
		if err != nil {
			return
		}
		back, err := delta.Unmarshal(delta.Marshal(d))
		if err != nil || back != d {
			t.Fatalf("round trip of %+v = %+v, %v", d, back, err)
		}
		p := newPending()
		p.add(0, at(0), d, time.Now())
		reads := p.parts[0].batches[msgKey{d.CorpID, d.MsgID}].reads()
		if len(reads) != 1 || reads[0].check() != nil {
			t.Fatalf("pending holds %+v for %+v; want one read the Writer accepts", reads, d)
		}
		_, args := updateStatement(d.CorpID, d.MsgID, reads)
		// [uid, counted read_time, counted source, button, link, enter]
		at := datetime(d.ReadTime)
		cols := []string{noTime, "0", noTime, noTime, noTime}
		if d.Counted {
			cols[0], cols[1] = at, strconv.Itoa(int(d.Source))
		}
		// A signal with a column of its own sets it; read_to_end and
		// acknowledged have none here (page_signals holds them).
		column := false
		if sig, ok := d.Source.Signal(); ok {
			if i, ok := map[yidu.Signal]int{yidu.SignalButton: 2, yidu.SignalLink: 3, yidu.SignalEnterAgent: 4}[sig]; ok {
				cols[i], column = at, true
			}
		}
		want := fmt.Sprintf(`[[%d,"%s",%s,"%s","%s","%s"]]`, d.UID, cols[0], cols[1], cols[2], cols[3], cols[4])
		if len(args) != 3 || args[0] != want || len(at) != len(time.DateTime) {
			t.Fatalf("updateStatement of %+v binds %v; want %s", d, args, want)
		}
		if !json.Valid([]byte(args[0].(string))) {
			t.Fatalf("updateStatement of %+v binds invalid JSON %s", d, args[0])
		}
		// One delta is one time: the Writer sends it compact,
		// [uid, time, counted source, signal bits], unless no column
		// takes that time (a read_to_end or acknowledged not counted:
		// only its page event is written).
		if _, full := splitCompact(reads); (full != nil) != (!d.Counted && !column) {
			t.Fatalf("the read of %+v: compact %v; want %v", d, full == nil, d.Counted || column)
		}
		if !d.Counted && !column {
			return
		}
		src, bits := 0, 0
		if d.Counted {
			src = int(d.Source)
		}
		if sig, ok := d.Source.Signal(); ok {
			bits = map[yidu.Signal]int{yidu.SignalButton: bitButton, yidu.SignalLink: bitLink, yidu.SignalEnterAgent: bitEnter}[sig]
		}
		_, args = compactStatement(d.CorpID, d.MsgID, reads)
		if want := fmt.Sprintf(`[[%d,"%s",%d,%d]]`, d.UID, at, src, bits); len(args) != 3 || args[0] != want {
			t.Fatalf("compactStatement of %+v binds %v; want %s", d, args, want)
		}
	})
}
