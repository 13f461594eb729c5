package dashboard

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestRemindByStateEdge: POST …/remind passes its optional state to
// campaign, which decides whom; a state a reminder cannot be for, a
// state that is not a string or a field that is not state is 400 naming
// it, and nothing is sent (issue 49, finding 6). hello's 9 opened the
// link, which counts as read under its rule: remind opened reaches
// nobody; remind unopened the unread who never opened it.
func TestRemindByStateEdge(t *testing.T) {
	f := newFixture(t)
	remind := func(body string) (int, map[string]any) {
		t.Helper()
		w := f.do(t, "POST", "/api/v1/messages/hello/remind", acmeToken, strings.NewReader(body))
		return w.Code, decode[map[string]any](t, w)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"state":"acknowledged"}`, "state"},
		{`{"state":"unread"}`, "state"},
		{`{"state":7}`, "state"},
		{`{"who":"all"}`, ""},
		{`{"state":"opened"`, ""},
	} {
		code, got := remind(tc.body)
		if code != http.StatusBadRequest || (tc.field != "" && got["field"] != tc.field) {
			t.Errorf("remind %s = %d %v; want 400 naming %q", tc.body, code, got, tc.field)
		}
	}
	if n := len(f.wecom.reminders()); n != 0 {
		t.Fatalf("refused reminders sent %d reminders", n)
	}
	if code, got := remind(`{"state":"opened"}`); code != http.StatusOK || got["reminded"] != 0.0 {
		t.Errorf("remind opened = %d %v; want 200 reminding nobody (9 opened and is counted read)", code, got)
	}
	if n := len(f.wecom.reminders()); n != 0 {
		t.Errorf("remind opened sent %d reminders; want none", n)
	}
	code, got := remind(`{"state":"unopened"}`)
	// Unread and never opened: 2 3 5 7 8 10; dave (8) has left.
	want := []string{"bob", "carol", "frank", "lisi", "wangwu"}
	if rs := f.wecom.reminders(); code != http.StatusOK || got["reminded"] != 5.0 || len(rs) != 1 || !slices.Equal(slices.Sorted(slices.Values(rs[0])), want) {
		t.Errorf("remind unopened = %d %v to %v; want 200 to %v", code, got, rs, want)
	}
}

// TestProgressByState: GET /progress of a notice read under read_rule
// acknowledged says how many are in each of the reading page's states
// (the remind choice's numbers), and a reminder by one of them reaches
// that many; another notice's progress has no by_state.
func TestProgressByState(t *testing.T) {
	f := newFixture(t)
	m := f.add(t, seeded{m: yidu.Message{CorpID: "acme", MsgID: "ack", App: "hr", Title: "员工手册确认", SentAt: t0},
		rec: []uint32{1, 2, 3, 4, 5, 6}, cold: true})
	m.ReadRule = yidu.ReadRuleAcknowledged
	f.exec(t, "UPDATE messages SET read_rule = ? WHERE corp_id = 'acme' AND msgid = 'ack'", m.ReadRule.Code())
	// 1 and 6 never opened it, 2 opened it, 3 and 4 read it to the end,
	// 5 acknowledged.
	testenv.Check(t, "restore reads", f.bms.RestoreReads(context.Background(), m, roaring.BitmapOf(1, 2, 3, 4, 5, 6), roaring.BitmapOf(5),
		map[yidu.Signal]*roaring.Bitmap{
			yidu.SignalLink:         roaring.BitmapOf(2, 3, 4, 5),
			yidu.SignalReadToEnd:    roaring.BitmapOf(3, 4, 5),
			yidu.SignalAcknowledged: roaring.BitmapOf(5),
		}))
	var p struct {
		ByState map[string]uint64 `json:"by_state"`
	}
	if err := json.Unmarshal(f.ok(t, "GET", "/api/v1/messages/ack/progress").Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if want := map[string]uint64{"unopened": 2, "opened": 1, "read_to_end": 2, "acknowledged": 1}; !maps.Equal(p.ByState, want) {
		t.Errorf("by_state = %v; want %v", p.ByState, want)
	}
	if body := f.ok(t, "GET", "/api/v1/messages/hello/progress").Body.String(); strings.Contains(body, "by_state") {
		t.Errorf("hello (read_rule app) has by_state: %s", body)
	}
	w := f.do(t, "POST", "/api/v1/messages/ack/remind", acmeToken, strings.NewReader(`{"state":"read_to_end"}`))
	if got := decode[remindJSON](t, w); w.Code != http.StatusOK || got.Reminded != 2 {
		t.Errorf("remind read_to_end = %d %+v; want 200, the 2 who read it to the end", w.Code, got)
	}
}
