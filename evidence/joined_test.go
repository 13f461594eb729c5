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

// TestPDFJoiner (issue 51): the 告知确认书 of a member who joined a
// standing notice's audience after its first send says when they joined
// and when they were told (and their own deadline), in the corp's time;
// one not yet sent says 尚未发送. A first-send recipient's has no such
// line.
func TestPDFJoiner(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	f := newFixture(t, 4)
	s := f.service(t, false)
	joined, told := t0.Add(30*24*time.Hour+2*time.Hour), t0.Add(30*24*time.Hour+2*time.Hour+90*time.Second)
	// user00002 joined and was sent the card; user00003 joined, not yet sent.
	mustExec(t, f.db, `INSERT INTO standing_enrolments (corp_id, msgid, uid, userid, version, batch, joined_at, deadline, sent_at, status)
		VALUES (?, 'msg1', 2, 'user00002', 2, 1000000, ?, ?, ?, 'sent'), (?, 'msg1', 3, 'user00003', 2, 1000001, ?, ?, NULL, 'pending')`,
		corp, joined, joined.AddDate(0, 0, 7), told, corp, joined, joined.AddDate(0, 0, 7))
	// 03:00 UTC in Beijing time (UTC+8), as every time of the PDF.
	const joinedText, toldText, deadlineText = "2026-12-02 11:00:00", "2026-12-02 11:01:30", "2026-12-09 11:00:00"
	tests := []struct {
		userid string
		want   []string // nil: no joiner's line
	}{
		{"user00002", []string{"加入发送范围：" + joinedText, "告知时间：" + toldText, "截止时间：" + deadlineText}},
		{"user00003", []string{"加入发送范围：" + joinedText, "告知时间：尚未发送"}},
		{"zhangsan", nil},
	}
	for _, tt := range tests {
		t.Run(tt.userid, func(t *testing.T) {
			rec, err := s.Record(context.Background(), everyone{}, corp, "msg1", tt.userid)
			testenv.Check(t, "Record", err)
			if (rec.Joined != nil) != (tt.want != nil) {
				t.Fatalf("Record.Joined = %+v; want a joiner's: %v", rec.Joined, tt.want != nil)
			}
			var buf bytes.Buffer
			testenv.Check(t, "PDF", s.PDF(&buf, rec))
			file := filepath.Join(t.TempDir(), "e.pdf")
			testenv.Check(t, "write", os.WriteFile(file, buf.Bytes(), 0o600))
			out, err := exec.Command(pdftotext, file, "-").Output()
			testenv.Check(t, "pdftotext", err)
			// pdftotext may break a long line: look at the text unwrapped.
			text := strings.Join(strings.Fields(string(out)), "")
			for _, w := range tt.want {
				if !strings.Contains(text, strings.Join(strings.Fields(w), "")) {
					t.Errorf("the PDF lacks %q:\n%s", w, out)
				}
			}
			if tt.want == nil && strings.Contains(text, "加入发送范围") {
				t.Errorf("a first-send recipient's PDF says 加入发送范围:\n%s", out)
			}
		})
	}
}
