package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yidu-io/yidu/evidence"
)

// writeEvidenceZIP writes a one-person evidence ZIP whose ledger is a
// one-leaf tree; pdf is the person's PDF as stored (the manifest lists
// the hash of want).
func writeEvidenceZIP(t *testing.T, want, pdf string) string {
	t.Helper()
	leaf := evidence.LeafHash([]byte("send msg1 zhangsan"))
	root := hex.EncodeToString(leaf[:])
	proofs, _ := json.Marshal(evidence.ProofsFile{UserID: "zhangsan", LedgerConnected: true, Roots: map[string]string{"2026-11-02": root},
		Entries: []evidence.Entry{{Seq: 1, Day: "2026-11-02", Index: 0, Kind: "send", LeafHash: root,
			Proof: &evidence.ProofDoc{Day: "2026-11-02", Index: 0, TreeSize: 1, Root: root, Path: []string{}}}}})
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	manifest := "userid,name,state,read_time,pdf,pdf_sha256,proofs,proofs_sha256,record,record_sha256\n" +
		fmt.Sprintf("zhangsan,张三,read,,zhangsan/告知确认书.pdf,%s,zhangsan/proofs.json,%s,zhangsan/record.json,%s\n", sum(want), sum(string(proofs)), sum("{}"))
	path := filepath.Join(t.TempDir(), "e.zip")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, file := range [][2]string{{"zhangsan/告知确认书.pdf", pdf}, {"zhangsan/proofs.json", string(proofs)}, {"zhangsan/record.json", "{}"},
		{"manifest.csv", manifest}, {"roots.json", `{"2026-11-02": "` + root + `"}`}} {
		w, _ := zw.Create(file[0])
		_, _ = w.Write([]byte(file[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path
}

func TestEvidenceCheck(t *testing.T) {
	good := writeEvidenceZIP(t, "%PDF-1.4 告知确认书", "%PDF-1.4 告知确认书")
	out, _, err := runCmd(t, nil, "", "evidence", "check", good)
	if err != nil || !strings.Contains(out, "inclusion proofs verified: 1") || !strings.Contains(out, "OK") {
		t.Errorf("evidence check(good) = %v\n%s", err, out)
	}
	edited := writeEvidenceZIP(t, "%PDF-1.4 告知确认书", "%PDF-1.4 告知确认书 edited")
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
