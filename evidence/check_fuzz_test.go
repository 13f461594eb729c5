package evidence

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// smallZIP is a valid one-person evidence ZIP over a one-leaf tree.
func smallZIP(tb testing.TB) []byte {
	tb.Helper()
	leaf := LeafHash([]byte("send"))
	root := hexOf(leaf)
	proofs, _ := json.Marshal(ProofsFile{UserID: "a", LedgerConnected: true, Roots: map[string]string{"d": root},
		Entries: []Entry{{Seq: 1, Day: "d", Kind: "send", LeafHash: root, Proof: &ProofDoc{Day: "d", TreeSize: 1, Root: root, Path: []string{}}}}})
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }
	pdf, rec := []byte("%PDF-1.4"), []byte("{}")
	manifest := strings.Join(manifestHeader, ",") + "\n" + strings.Join([]string{"a", "A", "read", "", "a/" + pdfName, sum(pdf),
		"a/proofs.json", sum(proofs), "a/record.json", sum(rec)}, ",") + "\n"
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"a/" + pdfName, pdf}, {"a/proofs.json", proofs}, {"a/record.json", rec}, {zipManifest, []byte(manifest)}, {zipRoots, []byte(`{"d":"` + root + `"}`)}} {
		w, _ := zw.Create(f.name)
		_, _ = w.Write(f.b)
	}
	_ = zw.Close()
	return buf.Bytes()
}

// FuzzCheck: Check reads hostile ZIPs without panicking, and passes one
// only when every file it counted matched.
func FuzzCheck(f *testing.F) {
	z := smallZIP(f)
	if rep, err := Check(bytes.NewReader(z), int64(len(z))); err != nil || rep.Proofs != 1 || rep.Files != 3 {
		f.Fatalf("Check(small) = %+v, %v", rep, err)
	}
	f.Add(z)
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Check(bytes.NewReader(b), int64(len(b)))
		if err == nil && (len(rep.Problems) != 0 || rep.Files != 3*rep.People) {
			t.Errorf("Check passed with %+v", rep)
		}
	})
}
