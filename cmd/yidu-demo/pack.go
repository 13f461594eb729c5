package main

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"

	"github.com/yidu-io/yidu/evidence"
)

// checkPack downloads the hosted notice's evidence ZIP, checks it as
// `yidu evidence check --key` would (with the log's verifier key), then
// makes a forged copy: the first member's record and proofs moved into
// the second member's folder and the manifest rehashed, as a holder of
// the pack could; the check refuses it. Both ZIPs are saved in
// EvidenceDir.
func (m *Main) checkPack(ctx context.Context) error {
	r := &m.Round
	z, err := m.fetch(ctx, "http://"+m.App.DashboardAddr+"/api/v1/messages/"+url.PathEscape(r.MsgID)+"/evidence.zip")
	if err != nil {
		return fmt.Errorf("evidence zip: %w", err)
	}
	if r.PackZIP, err = r.save(r.MsgID+"-evidence.zip", z); err != nil {
		return fmt.Errorf("evidence zip: %w", err)
	}
	rep, err := m.checkZIP(z)
	if err != nil {
		return fmt.Errorf("evidence check of the pack: %v %q", err, rep.Problems)
	}
	r.PackChecked, r.PackCheckpoint = true, fmt.Sprintf("%s, %d entries, root %s", rep.Origin, rep.Size, rep.Root)
	r.PackFacts = rep.Facts
	forged, err := forgePack(z, r.Members[0], r.Members[1])
	if err != nil {
		return fmt.Errorf("forged pack: %w", err)
	}
	if r.ForgedZIP, err = r.save(r.MsgID+"-evidence-forged.zip", forged); err != nil {
		return fmt.Errorf("forged pack: %w", err)
	}
	frep, err := m.checkZIP(forged)
	if err == nil || len(frep.Problems) == 0 {
		return fmt.Errorf("evidence check passed a forged pack: %+v", frep)
	}
	r.ForgedProblems = frep.Problems
	return nil
}

// checkZIP checks evidence ZIP z as `yidu evidence check --key` would,
// with the log's verifier key.
func (m *Main) checkZIP(z []byte) (evidence.CheckReport, error) {
	return evidence.Check(bytes.NewReader(z), int64(len(z)), evidence.CheckOptions{Key: m.LedgerKey})
}

// forgePack copies from's record.json and proofs.json over to's and
// rehashes manifest.csv: what a holder who wants to move an
// acknowledgement onto another member does.
func forgePack(z []byte, from, to string) ([]byte, error) {
	zr, err := zip.NewReader(bytes.NewReader(z), int64(len(z)))
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	var names []string
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		files[f.Name] = b
		names = append(names, f.Name)
	}
	for _, base := range []string{"record.json", "proofs.json"} {
		b, ok := files[from+"/"+base]
		if !ok {
			return nil, fmt.Errorf("%s/%s not in the pack", from, base)
		}
		files[to+"/"+base] = bytes.ReplaceAll(b, []byte(`"userid":"`+from+`"`), []byte(`"userid":"`+to+`"`))
	}
	rows, err := csv.NewReader(bytes.NewReader(files["manifest.csv"])).ReadAll()
	if err != nil {
		return nil, err
	}
	sum := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	for _, row := range rows[1:] {
		if len(row) == 10 {
			row[5], row[7], row[9] = sum(files[row[4]]), sum(files[row[6]]), sum(files[row[8]])
		}
	}
	var mb bytes.Buffer
	w := csv.NewWriter(&mb)
	if err := w.WriteAll(rows); err != nil {
		return nil, err
	}
	files["manifest.csv"] = mb.Bytes()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, n := range names {
		fw, err := zw.Create(n)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
