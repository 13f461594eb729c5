package evidence

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
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
			rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{})
			if err != nil {
				t.Fatalf("Check = %v %v", err, rep.Problems)
			}
			if rep.People != len(tt.want) || rep.Files != 3*len(tt.want) || rep.Proofs < 3*len(tt.want) || rep.Facts < 3*len(tt.want) {
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
	if rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey}); err != nil || rep.Proofs != 3+2*3+3 || rep.Files != 9 ||
		!rep.LedgerConnected || !rep.ManifestSigned || rep.KeyFromPack || rep.Size != uint64(len(f.ledger.leaves)) {
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
		{"checkpoint replaced", func(n string, b []byte) []byte {
			if n == zipCheckpoint {
				n := len(f.ledger.leaves)
				return bytes.Replace(b, fmt.Appendf(nil, "\n%d\n", n), fmt.Appendf(nil, "\n%d\n", n+1), 1)
			}
			return b
		}, "checkpoint.txt: not signed by the log's key"},
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
				// fails: the manifest's signature, and the path no
				// longer leads to the root.
				bad = rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
					if n == "zhangsan/proofs.json" {
						b = editPath(t, b)
					}
					return b
				}))
			case "file added":
				bad = appendFile(t, z, "zhangsan/extra.pdf", []byte("%PDF-1.4"))
				tt.want = "zhangsan/extra.pdf: not in the manifest"
			default:
				bad = rewrite(t, z, tt.edit)
			}
			rep, err := Check(bytes.NewReader(bad), int64(len(bad)), CheckOptions{Key: f.ledger.vkey})
			if !errors.Is(err, ErrCheck) {
				t.Fatalf("Check = %v; want ErrCheck", err)
			}
			if !strings.Contains(strings.Join(rep.Problems, "\n"), tt.want) {
				t.Errorf("Problems = %q; want one naming %q", rep.Problems, tt.want)
			}
		})
	}
}

// rehash rewrites z's manifest.csv with each listed file's SHA-256 as it
// now is: what a holder who edited a file does next.
func rehash(tb testing.TB, z []byte) []byte {
	tb.Helper()
	files := map[string][]byte{}
	rewrite(tb, z, func(n string, b []byte) []byte { files[n] = b; return b })
	return rewrite(tb, z, func(n string, b []byte) []byte {
		if n != zipManifest {
			return b
		}
		rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range rows[1:] {
			r[5], r[7], r[9] = sha(files[r[4]]), sha(files[r[6]]), sha(files[r[8]])
		}
		var out bytes.Buffer
		w := csv.NewWriter(&out)
		_ = w.WriteAll(rows)
		return out.Bytes()
	})
}

// TestPackForgeries (issue 48): a holder of the pack moves or edits a
// claim and rehashes the manifest; Check refuses, naming what is wrong,
// even when they re-sign everything with a key of their own (Check is
// given the log's key).
func TestPackForgeries(t *testing.T) {
	f := newFixture(t, 3)
	s := f.service(t, true)
	z, _ := buildZIP(t, s, everyone{}, Filter{})
	files := map[string][]byte{}
	rewrite(t, z, func(n string, b []byte) []byte { files[n] = b; return b })
	tests := []struct {
		name string
		bad  func() []byte
		want []string
	}{
		{"zhangsan's claim copied to user00002's folder, rehashed", func() []byte {
			return rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
				switch n {
				case "user00002/record.json":
					return bytes.ReplaceAll(files["zhangsan/record.json"], []byte(`"userid":"zhangsan"`), []byte(`"userid":"user00002"`))
				case "user00002/proofs.json":
					return files["zhangsan/proofs.json"]
				}
				return b
			}))
		}, []string{"manifest.sig: the signed manifest has SHA-256", "user00002/record.json: about user00002 (uid 1)"}},
		{"claim and proofs moved with the uid, rehashed", func() []byte {
			rec := bytes.ReplaceAll(files["zhangsan/record.json"], []byte(`"userid":"zhangsan"`), []byte(`"userid":"user00002"`))
			rec = bytes.Replace(rec, []byte(`"uid":1,`), []byte(`"uid":2,`), 1)
			pf := bytes.ReplaceAll(files["zhangsan/proofs.json"], []byte(`"userid": "zhangsan"`), []byte(`"userid": "user00002"`))
			return rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
				switch n {
				case "user00002/record.json":
					return rec
				case "user00002/proofs.json":
					return pf
				}
				return b
			}))
		}, []string{"manifest.sig", "user00002/proofs.json: entry", "is about zhangsan"}},
		{"record edited (read time), rehashed", func() []byte {
			return rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
				if n == "zhangsan/record.json" {
					return bytes.ReplaceAll(b, []byte(`"read_time":"2026-11-02T04:05:00Z"`), []byte(`"read_time":"2026-11-02T02:05:00Z"`))
				}
				return b
			}))
		}, []string{"manifest.sig", "zhangsan/record.json: the read at 2026-11-02T02:05:00Z is not proved"}},
		{"record edited, everything re-signed with the holder's key", func() []byte {
			skey, vkey, _ := note.GenerateKey(rand.Reader, "yidu.test")
			signer, _ := note.NewSigner(skey)
			out := rehash(t, rewrite(t, z, func(n string, b []byte) []byte {
				switch n {
				case "zhangsan/record.json":
					return bytes.ReplaceAll(b, []byte(`"read_time":"2026-11-02T04:05:00Z"`), []byte(`"read_time":"2026-11-02T02:05:00Z"`))
				case zipKey:
					return []byte(vkey)
				}
				return b
			}))
			return rewrite(t, out, func(n string, b []byte) []byte {
				if n == zipManifestSig {
					m := map[string][]byte{}
					rewrite(t, out, func(n string, b []byte) []byte { m[n] = b; return b })
					sig, _ := note.Sign(&note.Note{Text: manifestNoteText(corp, "msg1", m[zipManifest])}, signer)
					return sig
				}
				return b
			})
		}, []string{"manifest.sig: not signed by the log's key", "zhangsan/record.json: the read at 2026-11-02T02:05:00Z is not proved"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := tt.bad()
			rep, err := Check(bytes.NewReader(bad), int64(len(bad)), CheckOptions{Key: f.ledger.vkey})
			if !errors.Is(err, ErrCheck) {
				t.Fatalf("Check = %+v, %v; want ErrCheck", rep, err)
			}
			all := strings.Join(rep.Problems, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems:\n%s\nwant one naming %q", all, w)
				}
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
	f.ledger.add("../evil", 99, "send", ledger.Body{"userid": "../evil", "batch": int64(0), "at": t0.Format(time.RFC3339), "errcode": int64(0), "wecom_msgid": "wxmsg-0", "invalid": false})
	f.ledger.add("wang..wu", 98, "send", ledger.Body{"userid": "wang..wu", "batch": int64(0), "at": t0.Format(time.RFC3339), "errcode": int64(0), "wecom_msgid": "wxmsg-0", "invalid": false})
	s := f.service(t, true)
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
	if rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey}); err != nil || rep.People != 4 {
		t.Errorf("Check = %+v, %v", rep, err)
	}
}

// TestCheckNewerCheckpoint: given a newer signed checkpoint of the log
// and the consistency proof from the pack's (what yidu evidence
// consistency prints), Check relies on the newer one; a proof that does
// not hold, or a checkpoint of another key, is refused.
func TestCheckNewerCheckpoint(t *testing.T) {
	f := newFixture(t, 3)
	s := f.service(t, true)
	z, _ := buildZIP(t, s, everyone{}, Filter{})
	old := uint64(len(f.ledger.leaves))
	for i := range 5 {
		f.ledger.add("", 0, "recall", ledger.Body{"at": t0.Add(time.Duration(i) * time.Hour).Format(time.RFC3339), "by": "hr", "batches": int64(1), "failed": int64(0)})
	}
	root, newer := f.ledger.checkpoint()
	path, err := ledger.NewTree(f.ledger.leaves).Consistency(old, uint64(len(f.ledger.leaves)))
	testenv.Check(t, "consistency", err)
	hexes := make([]string, len(path))
	for i, h := range path {
		hexes[i] = h.String()
	}
	rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey, Newer: newer, Consistency: hexes})
	if err != nil || rep.Size != uint64(len(f.ledger.leaves)) || rep.Root != root.String() {
		t.Fatalf("Check with a newer checkpoint = %+v, %v; want it relied on (%d entries, root %s)", rep, err, len(f.ledger.leaves), root)
	}
	bad := append([]string{}, hexes...)
	bad[0] = strings.Repeat("0", 64)
	if rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey, Newer: newer, Consistency: bad}); err == nil ||
		!strings.Contains(strings.Join(rep.Problems, "\n"), "is not consistent with --checkpoint") {
		t.Errorf("Check with a bad consistency proof = %v %q; want refused", err, rep.Problems)
	}
	other := newFakeLedger(t, "2026-11-02")
	other.leaves = f.ledger.leaves
	_, forged := other.checkpoint()
	if rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{Key: f.ledger.vkey, Newer: forged, Consistency: hexes}); err == nil ||
		!strings.Contains(strings.Join(rep.Problems, "\n"), "--checkpoint: not signed by the log's key") {
		t.Errorf("Check with a checkpoint of another key = %v %q; want refused", err, rep.Problems)
	}
}
