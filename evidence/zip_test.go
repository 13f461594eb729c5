package evidence

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func buildZIP(tb testing.TB, s *Service, scope Scope, f Filter) ([]byte, int) {
	tb.Helper()
	ctx := context.Background()
	sel, err := s.Select(ctx, scope, corp, "msg1", f)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	n, err := s.WriteZIP(ctx, &buf, sel)
	if err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), n
}

func manifestUsers(tb testing.TB, z []byte) []string {
	tb.Helper()
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		tb.Fatal(err)
	}
	rc, err := zr.Open(zipManifest)
	if err != nil {
		tb.Fatal(err)
	}
	rows, err := csv.NewReader(rc).ReadAll()
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, r := range rows[1:] {
		out = append(out, r[0])
	}
	return out
}

// TestZIPScope: a leader's ZIP holds their people only; the department
// and state filters narrow it; the ZIP checks.
func TestZIPScope(t *testing.T) {
	f := newFixture(t, 6) // uids 1-3 in 人力资源部 (2), 4-6 in 销售部 (3)
	s := f.service(t, true)
	leader := only{1: true, 2: true, 3: true}
	tests := []struct {
		name   string
		scope  Scope
		filter Filter
		want   []string
	}{
		{"leader of 人力资源部", leader, Filter{}, []string{"zhangsan", "user00002", "user00003"}},
		{"leader asks for 销售部", leader, Filter{Department: 3, HasDepartment: true}, nil},
		{"admin, 销售部", everyone{}, Filter{Department: 3, HasDepartment: true}, []string{"user00004", "user00005", "user00006"}},
		{"admin, 总部 with sub-departments, read", everyone{}, Filter{Department: 1, HasDepartment: true, State: "read"}, []string{"zhangsan"}},
		{"leader, unread", leader, Filter{State: "unread"}, []string{"user00002", "user00003"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z, n := buildZIP(t, s, tt.scope, tt.filter)
			got := manifestUsers(t, z)
			if !slices.Equal(got, tt.want) || n != len(tt.want) {
				t.Errorf("ZIP holds %v (%d); want %v", got, n, tt.want)
			}
			rep, err := Check(bytes.NewReader(z), int64(len(z)))
			if err != nil {
				t.Fatalf("Check = %v %v", err, rep.Problems)
			}
			if rep.People != len(tt.want) || rep.Files != 3*len(tt.want) || rep.Proofs != len(tt.want) {
				t.Errorf("Check = %+v", rep)
			}
		})
	}
}

// rewrite copies z, passing each file's bytes through edit.
func rewrite(tb testing.TB, z []byte, edit func(name string, b []byte) []byte) []byte {
	tb.Helper()
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		b = edit(f.Name, b)
		if b == nil {
			continue
		}
		w, _ := zw.Create(f.Name)
		_, _ = w.Write(b)
	}
	_ = zw.Close()
	return out.Bytes()
}

// TestCheckFailsOnEdits: an edited PDF, proof, root or manifest, a file
// removed or added: Check fails, naming the file; the untouched ZIP passes.
func TestCheckFailsOnEdits(t *testing.T) {
	f := newFixture(t, 3)
	s := f.service(t, true)
	z, _ := buildZIP(t, s, everyone{}, Filter{})
	if rep, err := Check(bytes.NewReader(z), int64(len(z))); err != nil || rep.Proofs != 3 || rep.Files != 9 || !rep.LedgerConnected {
		t.Fatalf("Check(untouched) = %+v, %v", rep, err)
	}
	tests := []struct {
		name string
		edit func(name string, b []byte) []byte
		want string
	}{
		{"PDF edited", func(n string, b []byte) []byte {
			if n == "zhangsan/"+pdfName {
				return bytes.Replace(b, []byte("/Producer"), []byte("/Producex"), 1)
			}
			return b
		}, "zhangsan/" + pdfName},
		{"proof path edited", func(n string, b []byte) []byte {
			if n == "zhangsan/proofs.json" {
				return editPath(t, b)
			}
			return b
		}, "zhangsan/proofs.json"},
		{"proof edited and manifest fixed", func(n string, b []byte) []byte {
			return b // filled below
		}, "inclusion proof"},
		{"root replaced", func(n string, b []byte) []byte {
			if n == zipRoots {
				return []byte(`{"2026-11-02": "` + strings.Repeat("0", 64) + `"}`)
			}
			return b
		}, "not the one roots.json gives"},
		{"PDF removed", func(n string, b []byte) []byte {
			if n == "user00002/"+pdfName {
				return nil
			}
			return b
		}, "missing"},
		{"file added", func(n string, b []byte) []byte {
			if n == zipReadme {
				return b
			}
			return b
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var bad []byte
			switch tt.name {
			case "proof edited and manifest fixed":
				// Whoever edits a proof and the manifest's hash still
				// fails: the path no longer leads to the root.
				var sum string
				bad = rewrite(t, z, func(n string, b []byte) []byte {
					if n == "zhangsan/proofs.json" {
						b = editPath(t, b)
						sum = sha(b)
					}
					return b
				})
				bad = rewrite(t, bad, func(n string, b []byte) []byte {
					if n == zipManifest {
						lines := strings.Split(string(b), "\n")
						for i, l := range lines {
							if strings.HasPrefix(l, "zhangsan,") {
								c := strings.Split(l, ",")
								c[7] = sum
								lines[i] = strings.Join(c, ",")
							}
						}
						return []byte(strings.Join(lines, "\n"))
					}
					return b
				})
			case "file added":
				bad = appendFile(t, z, "zhangsan/extra.pdf", []byte("%PDF-1.4"))
				tt.want = "zhangsan/extra.pdf: not in the manifest"
			default:
				bad = rewrite(t, z, tt.edit)
			}
			rep, err := Check(bytes.NewReader(bad), int64(len(bad)))
			if !errors.Is(err, ErrCheck) {
				t.Fatalf("Check = %v; want ErrCheck", err)
			}
			if !strings.Contains(strings.Join(rep.Problems, "\n"), tt.want) {
				t.Errorf("Problems = %q; want one naming %q", rep.Problems, tt.want)
			}
		})
	}
}

func editPath(tb testing.TB, b []byte) []byte {
	tb.Helper()
	// The first hex digit of the first path element, flipped.
	i := bytes.Index(b, []byte(`"path": [`))
	j := bytes.IndexByte(b[i+9:], '"')
	k := i + 9 + j + 1
	out := bytes.Clone(b)
	if out[k] == '0' {
		out[k] = '1'
	} else {
		out[k] = '0'
	}
	return out
}

func appendFile(tb testing.TB, z []byte, name string, body []byte) []byte {
	tb.Helper()
	out := rewrite(tb, z, func(_ string, b []byte) []byte { return b })
	zr, _ := zip.NewReader(bytes.NewReader(out), int64(len(out)))
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		_ = zw.Copy(f)
	}
	w, _ := zw.Create(name)
	_, _ = w.Write(body)
	_ = zw.Close()
	return buf.Bytes()
}

// BenchmarkZIP1000 builds the ZIP of a 1,000-person department on the
// real MariaDB, streamed to a writer that keeps only the byte count, and
// reports the heap in use after it.
func BenchmarkZIP1000(b *testing.B) {
	f := newFixture(b, 2000) // department 3 holds uids 1001..2000
	s := f.service(b, true)
	ctx := context.Background()
	for b.Loop() {
		sel, err := s.Select(ctx, everyone{}, corp, "msg1", Filter{Department: 3, HasDepartment: true})
		if err != nil {
			b.Fatal(err)
		}
		if len(sel.People) != 1000 {
			b.Fatalf("%d people", len(sel.People))
		}
		var cw countWriter
		start := time.Now()
		if _, err := s.WriteZIP(ctx, &cw, sel); err != nil {
			b.Fatal(err)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.ReportMetric(float64(cw.n)/1e6, "MB/zip")
		b.ReportMetric(time.Since(start).Seconds(), "s/zip")
		b.ReportMetric(float64(ms.HeapInuse)/1e6, "MB-heap")
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// TestZIPBadUserID: a UserID that breaks WeCom's rule (kept so their
// reads count) names no path in the ZIP: their directory is uid-N, and
// the ZIP still checks.
func TestZIPBadUserID(t *testing.T) {
	f := newFixture(t, 2)
	mustExec(t, f.db, `INSERT INTO users (corp_id, uid, userid, name, departments) VALUES (?, 99, '../evil', '坏账号', '3')`, corp)
	mustExec(t, f.db, `INSERT INTO message_read_record (corp_id, msgid, uid) VALUES (?, 'msg1', 99)`, corp)
	// A valid UserID may hold "..": it stays its own directory.
	mustExec(t, f.db, `INSERT INTO users (corp_id, uid, userid, name, departments) VALUES (?, 98, 'wang..wu', '王五', '3')`, corp)
	mustExec(t, f.db, `INSERT INTO message_read_record (corp_id, msgid, uid) VALUES (?, 'msg1', 98)`, corp)
	s := f.service(t, false)
	z, n := buildZIP(t, s, everyone{}, Filter{})
	if n != 4 {
		t.Fatalf("ZIP of %d people; want 4", n)
	}
	zr, _ := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	for _, file := range zr.File {
		if strings.HasPrefix(file.Name, "../") || strings.Contains(file.Name, "/../") || strings.HasPrefix(file.Name, "/") {
			t.Errorf("ZIP holds %q", file.Name)
		}
	}
	if _, err := zr.Open("uid-99/" + pdfName); err != nil {
		t.Errorf("uid-99's PDF: %v", err)
	}
	if _, err := zr.Open("wang..wu/" + pdfName); err != nil {
		t.Errorf("wang..wu's PDF: %v", err)
	}
	if rep, err := Check(bytes.NewReader(z), int64(len(z))); err != nil || rep.People != 4 {
		t.Errorf("Check = %+v, %v", rep, err)
	}
}
