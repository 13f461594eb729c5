package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	flog "github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/tsatest"
	"github.com/yidu-io/yidu/ledger"
)

// writeEvidenceZIP writes a one-person evidence ZIP whose log is one
// leaf (zhangsan's send), signed with a key of its own; pdf is the
// person's PDF as stored (the manifest lists the hash of want). It
// returns the path and the log's verifier key.
func writeEvidenceZIP(t *testing.T, want, pdf string) (string, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, "yidu.test")
	if err != nil {
		t.Fatal(err)
	}
	return writeEvidenceZIPWith(t, want, pdf, skey, vkey, nil)
}

// writeEvidenceZIPWith is writeEvidenceZIP with the log's key and, when
// stamp is not nil, the record's day checkpoint: stamp's answer for the
// pack's signed checkpoint.
func writeEvidenceZIPWith(t *testing.T, want, pdf, skey, vkey string, stamp func(cp string) *evidence.DayStamp) (string, string) {
	t.Helper()
	signer, _ := note.NewSigner(skey)
	body := `{"at":"2026-11-02T01:00:00Z","batch":0,"corp":"wwc","day":"2026-11-02","errcode":0,"index":0,"invalid":false,"kind":"send","msgid":"msg1","seq":1,"uid":1,"userid":"zhangsan","wecom_msgid":"w"}`
	leaf := evidence.LeafHash([]byte(body))
	root := hex.EncodeToString(leaf[:])
	cp, _ := note.Sign(&note.Note{Text: string(flog.Checkpoint{Origin: "yidu.test/wwc", Size: 1, Hash: leaf[:]}.Marshal())}, signer)
	proofs, _ := json.Marshal(evidence.ProofsFile{CorpID: "wwc", MsgID: "msg1", UserID: "zhangsan", UID: 1, LedgerConnected: true, Checkpoint: string(cp),
		Entries: []evidence.Entry{{Seq: 1, Day: "2026-11-02", Index: 0, Kind: "send", LeafHash: root, Body: body,
			Proof: &evidence.ProofDoc{Index: 0, TreeSize: 1, Root: root, Path: []string{}, Checkpoint: string(cp)}}}})
	rec, _ := json.Marshal(evidence.Record{CorpID: "wwc", MsgID: "msg1", Person: evidence.Person{UID: 1, UserID: "zhangsan"}, LedgerConnected: true,
		Deliveries: []evidence.Delivery{{Kind: "send", At: time.Date(2026, 11, 2, 1, 0, 0, 0, time.UTC)}}, Stamp: stampOf(stamp, string(cp))})
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	manifest := "userid,name,state,read_time,pdf,pdf_sha256,proofs,proofs_sha256,record,record_sha256\n" +
		fmt.Sprintf("zhangsan,张三,read,,zhangsan/告知确认书.pdf,%s,zhangsan/proofs.json,%s,zhangsan/record.json,%s\n", sum(want), sum(string(proofs)), sum(string(rec)))
	// The manifest's signed note (docs/evidence-records.md).
	sig, _ := note.Sign(&note.Note{Text: "yidu evidence manifest v1\nwwc\nmsg1\n" + sum(manifest) + "\n"}, signer)
	path := filepath.Join(t.TempDir(), "e.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, file := range [][2]string{{"zhangsan/告知确认书.pdf", pdf}, {"zhangsan/proofs.json", string(proofs)}, {"zhangsan/record.json", string(rec)},
		{"manifest.csv", manifest}, {"manifest.sig", string(sig)}, {"checkpoint.txt", string(cp)}, {"key.txt", vkey}} {
		w, _ := zw.Create(file[0])
		_, _ = w.Write([]byte(file[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path, vkey
}

func TestEvidenceCheck(t *testing.T) {
	good, vkey := writeEvidenceZIP(t, "%PDF-1.4 告知确认书", "%PDF-1.4 告知确认书")
	out, _, err := runCmd(t, nil, "", "evidence", "check", good, "--key", vkey)
	if err != nil || !strings.Contains(out, "entries proved: 1") || !strings.Contains(out, "checkpoint: yidu.test/wwc, 1 entries, root ") ||
		!strings.Contains(out, "manifest signed: true") || !strings.HasSuffix(out, "OK\n") {
		t.Errorf("evidence check(good) = %v\n%s", err, out)
	}
	out, _, err = runCmd(t, nil, "", "evidence", "check", good)
	if err != nil || !strings.Contains(out, "the pack's own key.txt") {
		t.Errorf("evidence check(good) without --key = %v\n%s; want it to say whose key it trusted", err, out)
	}
	_, otherKey := writeEvidenceZIP(t, "x", "x")
	if out, _, err = runCmd(t, nil, "", "evidence", "check", "--key", otherKey, good); exitCode(err) != 1 || !strings.Contains(out, "not signed by the log's key") {
		t.Errorf("evidence check with another key = %v (exit %d)\n%s", err, exitCode(err), out)
	}
	edited, _ := writeEvidenceZIP(t, "%PDF-1.4 告知确认书", "%PDF-1.4 告知确认书 edited")
	out, _, err = runCmd(t, nil, "", "evidence", "check", edited)
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL zhangsan/告知确认书.pdf: sha256") {
		t.Errorf("evidence check(edited) = %v (exit %d)\n%s", err, exitCode(err), out)
	}
	if _, _, err := runCmd(t, nil, "", "evidence", "check"); exitCode(err) != 2 {
		t.Errorf("evidence check without FILE: exit %d; want 2", exitCode(err))
	}
	if _, _, err := runCmd(t, nil, "", "evidence", "check", filepath.Join(t.TempDir(), "none.zip")); exitCode(err) != 1 {
		t.Errorf("evidence check of a missing file: exit %d; want 1", exitCode(err))
	}
}

func stampOf(stamp func(string) *evidence.DayStamp, cp string) *evidence.DayStamp {
	if stamp == nil {
		return nil
	}
	return stamp(cp)
}

// TestEvidenceCheckTSA (issue 48): check verifies the RFC 3161 token of
// the record's day checkpoint, from a real TSA (openssl ts -reply): its
// CMS signature, its imprint (SHA-256 of the signed checkpoint), its
// time (printed), and with --tsa-ca its chain; a token edited, moved
// from another checkpoint, or a time the record restates is refused,
// naming the day checkpoint.
func TestEvidenceCheckTSA(t *testing.T) {
	tsa := tsatest.Start(t)
	stamper, err := ledger.NewTSA(tsa.URL, nil)
	testenv.Check(t, "tsa", err)
	ctx := context.Background()
	skey, vkey, err := note.GenerateKey(rand.Reader, "yidu.test")
	testenv.Check(t, "key", err)
	token := func(msg string) ([]byte, time.Time) {
		t.Helper()
		sum := sha256.Sum256([]byte(msg))
		tok, err := stamper.Stamp(ctx, sum[:])
		testenv.Check(t, "stamp", err)
		ts, err := ledger.ParseTimestamp(tok)
		testenv.Check(t, "parse", err)
		return tok, ts.Time
	}
	var goodToken []byte
	var goodTime time.Time
	pack := func(edit func(st *evidence.DayStamp)) string {
		t.Helper()
		path, _ := writeEvidenceZIPWith(t, "%PDF", "%PDF", skey, vkey, func(cp string) *evidence.DayStamp {
			if goodToken == nil {
				goodToken, goodTime = token(cp)
				// An independent verifier agrees the token stamps the
				// checkpoint the pack carries.
				if err := tsa.Verify([]byte(cp), goodToken); err != nil {
					t.Fatalf("openssl ts -verify: %v", err)
				}
			}
			c, _ := parseSigned(t, cp, vkey)
			st := &evidence.DayStamp{Day: "2026-11-02", Size: int64(c.Size), Root: hex.EncodeToString(c.Hash), Time: goodTime, Token: bytes.Clone(goodToken), Note: cp,
				Consistency: &evidence.ConsistencyDoc{TreeSize: int64(c.Size), Path: []string{}}}
			if edit != nil {
				edit(st)
			}
			return st
		})
		return path
	}
	good := pack(nil)
	out, _, err := runCmd(t, nil, "", "evidence", "check", good, "--key", vkey)
	if err != nil || !strings.Contains(out, "tsa time: "+goodTime.Format(time.RFC3339)) || !strings.Contains(out, "stamped by CN=yidu test TSA") ||
		!strings.Contains(out, "TSA certificate not checked against a trusted root") || !strings.HasSuffix(out, "OK\n") {
		t.Fatalf("evidence check(stamped) = %v\n%s; want the TSA time, its root not checked, OK", err, out)
	}
	out, _, err = runCmd(t, nil, "", "evidence", "check", good, "--key", vkey, "--tsa-ca", tsa.Cert)
	if err != nil || !strings.Contains(out, "tsa time: ") || strings.Contains(out, "not checked against a trusted root") || !strings.HasSuffix(out, "OK\n") {
		t.Errorf("evidence check --tsa-ca (the TSA's) = %v\n%s; want OK, the root checked", err, out)
	}
	other := tsatest.Start(t)
	out, _, err = runCmd(t, nil, "", "evidence", "check", good, "--key", vkey, "--tsa-ca", other.Cert)
	if exitCode(err) != 1 || !strings.Contains(out, "FAIL zhangsan/record.json: the day checkpoint of 2026-11-02 (1 entries): its TSA token is refused") ||
		!strings.Contains(out, "trusted root") {
		t.Errorf("evidence check --tsa-ca (another TSA's) = %v (exit %d)\n%s; want the token refused", err, exitCode(err), out)
	}
	refused := func(what, want string, edit func(st *evidence.DayStamp)) {
		t.Helper()
		out, _, err := runCmd(t, nil, "", "evidence", "check", pack(edit), "--key", vkey)
		if exitCode(err) != 1 || !strings.Contains(out, "FAIL zhangsan/record.json: the day checkpoint of 2026-11-02") || !strings.Contains(out, want) {
			t.Errorf("evidence check with %s = %v (exit %d)\n%s; want it refused: %q", what, err, exitCode(err), out, want)
		}
	}
	refused("the token's time edited", "its TSA token is refused", func(st *evidence.DayStamp) {
		gen := []byte(goodTime.Format("20060102150405"))
		i := bytes.Index(st.Token, gen)
		if i < 0 {
			t.Fatalf("genTime %s not in the token", gen)
		}
		st.Token[i+3]--
		st.Time = st.Time.AddDate(-1, 0, 0)
	})
	refused("a token of another checkpoint", "a token of another message", func(st *evidence.DayStamp) {
		st.Token, st.Time = token(strings.Replace(st.Note, "\n1\n", "\n2\n", 1))
	})
	refused("the record's TSA time edited", "the record states TSA time", func(st *evidence.DayStamp) { st.Time = st.Time.Add(-time.Hour) })
	refused("no checkpoint for the token", "carries no signed checkpoint", func(st *evidence.DayStamp) { st.Note = "" })
	refused("the record's day root edited", "its signed checkpoint is", func(st *evidence.DayStamp) { st.Root = strings.Repeat("00", 32) })
	// An operator holding the key signs and stamps a checkpoint of a
	// forked tree (another leaf) as the day's: signature and token
	// verify, the consistency proof to the pack's checkpoint does not.
	refused("a day checkpoint of a forked tree", "is not consistent with the checkpoint the entries are proved against", func(st *evidence.DayStamp) {
		signer, err := note.NewSigner(skey)
		testenv.Check(t, "signer", err)
		forked := sha256.Sum256([]byte("forged leaf"))
		signed, err := note.Sign(&note.Note{Text: string(flog.Checkpoint{Origin: "yidu.test/wwc", Size: 1, Hash: forked[:]}.Marshal())}, signer)
		testenv.Check(t, "sign", err)
		st.Note, st.Root = string(signed), hex.EncodeToString(forked[:])
		st.Token, st.Time = token(st.Note)
	})
	refused("no consistency proof", "carries no consistency proof", func(st *evidence.DayStamp) { st.Consistency = nil })
}

// parseSigned opens a signed checkpoint with vkey.
func parseSigned(t *testing.T, cp, vkey string) (flog.Checkpoint, error) {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	testenv.Check(t, "verifier", err)
	n, err := note.Open([]byte(cp), note.VerifierList(v))
	testenv.Check(t, "open", err)
	var c flog.Checkpoint
	_, err = c.Unmarshal([]byte(n.Text))
	testenv.Check(t, "checkpoint", err)
	return c, nil
}
