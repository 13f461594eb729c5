package evidence

import (
	"archive/zip"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// smallZIP is a valid one-person evidence ZIP over a one-leaf log: the
// send of person a, signed with a key of its own (in key.txt).
func smallZIP(tb testing.TB) []byte {
	tb.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "fuzz")
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		tb.Fatal(err)
	}
	body := `{"at":"2026-11-02T01:00:00Z","batch":0,"corp":"c","day":"2026-11-02","errcode":0,"index":0,"invalid":false,"kind":"send","msgid":"m","seq":1,"uid":1,"userid":"a","wecom_msgid":"w"}`
	leaf := LeafHash([]byte(body))
	cp, err := note.Sign(&note.Note{Text: string(flog.Checkpoint{Origin: "fuzz/c", Size: 1, Hash: leaf[:]}.Marshal())}, signer)
	if err != nil {
		tb.Fatal(err)
	}
	root := hexOf(leaf)
	proofs, _ := json.Marshal(ProofsFile{CorpID: "c", MsgID: "m", UserID: "a", UID: 1, LedgerConnected: true, Checkpoint: string(cp),
		Entries: []Entry{{Seq: 1, Day: "2026-11-02", Kind: "send", LeafHash: root, Body: body,
			Proof: &ProofDoc{TreeSize: 1, Root: root, Path: []string{}, Checkpoint: string(cp)}}}})
	rec, _ := json.Marshal(Record{CorpID: "c", MsgID: "m", Person: Person{UID: 1, UserID: "a"}, LedgerConnected: true,
		Deliveries: []Delivery{{Kind: "send", Batch: 0, At: time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)}}})
	pdf := []byte("%PDF-1.4")
	manifest := []byte(strings.Join(manifestHeader, ",") + "\n" + strings.Join([]string{"a", "A", "read", "", "a/" + pdfName, sha256Hex(pdf),
		"a/proofs.json", sha256Hex(proofs), "a/record.json", sha256Hex(rec)}, ",") + "\n")
	sig, err := note.Sign(&note.Note{Text: manifestNoteText("c", "m", manifest)}, signer)
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range []struct {
		name string
		b    []byte
	}{{"a/" + pdfName, pdf}, {"a/proofs.json", proofs}, {"a/record.json", rec}, {zipManifest, manifest}, {zipManifestSig, sig},
		{zipCheckpoint, cp}, {zipKey, []byte(vkey)}} {
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
	if rep, err := Check(bytes.NewReader(z), int64(len(z)), CheckOptions{}); err != nil || rep.Proofs != 1 || rep.Files != 3 || rep.Facts != 1 {
		f.Fatalf("Check(small) = %+v, %v", rep, err)
	}
	f.Add(z)
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep, err := Check(bytes.NewReader(b), int64(len(b)), CheckOptions{})
		if err == nil && (len(rep.Problems) != 0 || rep.Files != 3*rep.People) {
			t.Errorf("Check passed with %+v", rep)
		}
	})
}
