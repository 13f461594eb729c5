package notice

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

func TestCheckNote(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"empty", "", "", true},
		{"spaces", "   ", "", true},
		{"trimmed", "  第四条改为半年 ", "第四条改为半年", true},
		{"200 characters", strings.Repeat("改", 200), strings.Repeat("改", 200), true},
		{"201 characters", strings.Repeat("改", 201), "", false},
		{"markup stays text", "<b>x</b> & y", "<b>x</b> & y", true},
		{"line break", "第一行\n第二行", "", false},
		{"tab", "a\tb", "", false},
		{"NUL", "a\x00", "", false},
		{"DEL", "a\x7f", "", false},
		{"C1", "a\u0085b", "", false},
		{"right-to-left override", "a\u202eb", "", false},
		{"isolate", "a\u2066b", "", false},
		{"not UTF-8", "a\xffb", "", false},
	}
	for _, tc := range tests {
		got, err := CheckNote(tc.in)
		var fe *yidu.FieldError
		if tc.ok && (err != nil || got != tc.want) {
			t.Errorf("%s: CheckNote(%q) = %q, %v; want %q", tc.name, tc.in, got, err, tc.want)
		}
		if !tc.ok && (!errors.As(err, &fe) || fe.Field != "change_note") {
			t.Errorf("%s: CheckNote(%q) = %q, %v; want a FieldError on change_note", tc.name, tc.in, got, err)
		}
	}
}

// TestVersionNote: Update stores a version's change note, Get and List
// answer it, version 1 has none; a hostile note makes no version; the
// version's ledger entry carries the note and the ledger verifies.
func TestVersionNote(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	s0, atts := newStore(t)
	l, err := ledger.New(db, ledger.Options{Now: s0.now})
	testenv.Check(t, "ledger.New", err)
	s, err := New(db, atts, Options{Now: s0.now, Ledger: l})
	testenv.Check(t, "notice.New", err)
	prep := func(md string) Version {
		v, err := s.Prepare(ctx, corp, Draft{Title: "绩效考核办法", Markdown: md})
		testenv.Check(t, "Prepare", err)
		return v
	}
	v1 := prep("第四条 一年")
	v1.Note = "ignored on version 1"
	if v, err := s.Create(ctx, corp, "perf", v1, Settings{ReadRule: yidu.ReadRuleAcknowledged}, "hr"); err != nil || v.Note != "" {
		t.Fatalf("Create = %+v, %v; want no note", v, err)
	}
	for _, bad := range []string{strings.Repeat("长", 201), "a\nb", "a\u202eb"} {
		v := prep("第四条 半年")
		v.Note = bad
		if _, made, err := s.Update(ctx, corp, "perf", v, true, "hr"); made || !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("Update with note %q = %v, %v; want refused", bad, made, err)
		}
	}
	if list, err := s.List(ctx, corp, "perf"); err != nil || len(list) != 1 {
		t.Fatalf("after refused notes: %d versions, %v; want 1", len(list), err)
	}
	v := prep("第四条 半年")
	v.Note = " 第四条：一年改为半年 "
	v2, made, err := s.Update(ctx, corp, "perf", v, true, "hr")
	if err != nil || !made || v2.N != 2 || v2.Note != "第四条：一年改为半年" {
		t.Fatalf("Update = %+v, %v, %v", v2, made, err)
	}
	if got, err := s.Get(ctx, corp, "perf", 2); err != nil || got.Note != "第四条：一年改为半年" {
		t.Fatalf("Get v2 note = %q, %v", got.Note, err)
	}
	if got, err := s.Get(ctx, corp, "perf", 1); err != nil || got.Note != "" {
		t.Fatalf("Get v1 note = %q, %v; want none", got.Note, err)
	}
	var n int
	testenv.Check(t, "count", db.QueryRowContext(ctx, `SELECT COUNT(*) FROM notice_versions WHERE corp_id = ? AND msgid = 'perf' AND change_note IS NULL`, corp).Scan(&n))
	if n != 1 {
		t.Fatalf("%d versions without a note; want 1 (version 1, NULL)", n)
	}
	es, err := l.EntriesOf(ctx, corp, "perf")
	testenv.Check(t, "EntriesOf", err)
	if len(es) != 2 || strings.Contains(string(es[0].Body), `"note"`) || !strings.Contains(string(es[1].Body), `"note":"第四条：一年改为半年"`) {
		t.Fatalf("ledger entries %v; want version 1 without a note, version 2 with it", es)
	}
	rep, err := l.Verify(ctx, corp, "")
	if err != nil || len(rep.Problems) != 0 || rep.Facts == 0 {
		t.Fatalf("Verify = %d facts, %+v, %v; want clean", rep.Facts, rep.Problems, err)
	}
}
