package evidence

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// stampedLedger is fakeLedger with a day checkpoint timestamped by a TSA
// at stampAt, covering every entry.
type stampedLedger struct {
	*fakeLedger
	asked []int64
}

var stampAt = time.Date(2026, 3, 3, 16, 0, 2, 0, time.UTC)

func (l *stampedLedger) DayStamp(_ context.Context, _ string, seq, _ int64) (DayStamp, bool, error) {
	l.asked = append(l.asked, seq)
	return DayStamp{Day: "2026-03-03", Size: int64(len(l.leaves)), Root: strings.Repeat("ab", 32), Time: stampAt, Token: []byte{0x30}}, true, nil
}

// TestPDFStampAndOpening (issue 48): the 告知确认书 prints the TSA time
// of the day checkpoint covering the member's newest entry, and each
// version's first lines; without a stamped checkpoint it says there is
// none.
func TestPDFStampAndOpening(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	f := newFixture(t, 3)
	stamped := &stampedLedger{fakeLedger: f.ledger}
	opts := Options{PageEvents: f.page, Now: func() time.Time { return t0.Add(72 * time.Hour) },
		Ledger: stamped, Signer: f.ledger.signer, VerifierKey: f.ledger.vkey}
	s, err := New(f.db, f.versions, opts)
	testenv.Check(t, "New", err)
	text := func(rec Record) string {
		var buf bytes.Buffer
		testenv.Check(t, "PDF", s.PDF(&buf, rec))
		file := filepath.Join(t.TempDir(), "e.pdf")
		testenv.Check(t, "write", os.WriteFile(file, buf.Bytes(), 0o600))
		out, err := exec.Command(pdftotext, "-layout", file, "-").Output()
		testenv.Check(t, "pdftotext", err)
		return string(out)
	}
	rec, err := s.Record(context.Background(), everyone{}, corp, "msg1", "zhangsan")
	testenv.Check(t, "Record", err)
	if rec.Stamp == nil || !rec.Stamp.Time.Equal(stampAt) || len(stamped.asked) != 1 || stamped.asked[0] != rec.Ledger[len(rec.Ledger)-1].Seq {
		t.Fatalf("record's day checkpoint = %+v (asked for %v); want the TSA time, asked for the newest entry", rec.Stamp, stamped.asked)
	}
	if len(rec.Versions) == 0 || rec.Versions[0].Opening != "第一条 上班时间为 9:00。" {
		t.Fatalf("versions = %+v; want v1 opening with its first line", rec.Versions)
	}
	out := text(rec)
	for _, want := range []string{"2026-03-04 00:00:02", "可信时间戳", "正文开头：第一条 上班时间为 9:00。", "正文开头：第一条 上班时间为 8:30。"} {
		if !strings.Contains(out, want) {
			t.Errorf("PDF lacks %q:\n%s", want, out)
		}
	}
	rec.Stamp = nil
	if out := text(rec); !strings.Contains(out, "当日检查点尚无可信时间戳") {
		t.Errorf("PDF without a stamped checkpoint:\n%s\nwant it said", out)
	}
}

// TestFirstLines: the opening quotes three non-empty lines without
// Markdown marks, at most 120 characters.
func TestFirstLines(t *testing.T) {
	for md, want := range map[string]string{
		"# 标题\n\n- 第一条\n> 引用\n第四行": "标题 / 第一条 / 引用",
		"":                       "",
		strings.Repeat("长", 130): strings.Repeat("长", 120) + "…",
	} {
		if got := firstLines(md); got != want {
			t.Errorf("firstLines(%q) = %q; want %q", md, got, want)
		}
	}
}
