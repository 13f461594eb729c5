package main

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/internal/rfc3161"
	"github.com/yidu-io/yidu/ledger"
)

// maxConsistencyFile bounds --checkpoint's file (a few kB).
const maxConsistencyFile = 1 << 20

// evidenceCheck runs evidence.Check on the ZIP at path, with the log's
// key (key) and a newer checkpoint with its consistency proof (the JSON
// of `yidu evidence consistency`, at consistency), and prints what it
// found: the key and the checkpoint it relied on, the counts, then each
// problem on its own line.
func evidenceCheck(path, key, consistency, tsaCA string, out io.Writer) error {
	var opts evidence.CheckOptions
	opts.Key = key
	if tsaCA != "" {
		roots, err := readTSARoots(tsaCA)
		if err != nil {
			return fmt.Errorf("evidence check: %w", err)
		}
		opts.TSARoots = roots
	}
	if consistency != "" {
		b, err := os.ReadFile(consistency)
		if err != nil {
			return fmt.Errorf("evidence check: --checkpoint: %w", err)
		}
		if len(b) > maxConsistencyFile {
			return fmt.Errorf("evidence check: --checkpoint: larger than %d bytes", maxConsistencyFile)
		}
		var c ledger.ConsistencyDoc
		if err := json.Unmarshal(b, &c); err != nil || c.New == "" {
			return fmt.Errorf("evidence check: --checkpoint %s: not what yidu evidence consistency prints (%v)", consistency, err)
		}
		opts.Newer, opts.Consistency = c.New, c.Path
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("evidence check: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("evidence check: %w", err)
	}
	rep, err := evidence.Check(f, st.Size(), opts)
	switch {
	case rep.Key == "":
		fmt.Fprintln(out, "key: none (give the log's key with --key)")
	case rep.KeyFromPack:
		fmt.Fprintf(out, "key: %s, the pack's own key.txt: compare it with the key yidu's operator publishes, or give it with --key\n", rep.Key)
	default:
		fmt.Fprintf(out, "key: %s\n", rep.Key)
	}
	if rep.Origin != "" {
		fmt.Fprintf(out, "checkpoint: %s, %d entries, root %s\n", rep.Origin, rep.Size, rep.Root)
	}
	for _, st := range rep.Stamps {
		fmt.Fprintf(out, "tsa time: %s (%s), the day checkpoint of %s (%d entries), stamped by %s\n",
			st.Time.Format(time.RFC3339), st.Time.In(shanghai).Format("2006-01-02 15:04:05 MST"), st.Day, st.Size, st.TSA)
		if !st.RootChecked {
			fmt.Fprintln(out, "tsa: TSA certificate not checked against a trusted root (give the TSA's CA with --tsa-ca)")
		}
	}
	fmt.Fprintf(out, "manifest signed: %v\npeople: %d\nfiles matching manifest.csv: %d\nentries proved: %d\nfacts of the records proved: %d\n",
		rep.ManifestSigned, rep.People, rep.Files, rep.Proofs, rep.Facts)
	if !rep.LedgerConnected {
		fmt.Fprintln(out, "ledger: not connected when the ZIP was made (未接入账本): no proofs to verify")
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(out, "FAIL", p)
	}
	if err != nil {
		return fmt.Errorf("evidence check %s: %w", path, err)
	}
	fmt.Fprintln(out, "OK")
	return nil
}

// shanghai is UTC+8, the time the 告知确认书 prints.
var shanghai = time.FixedZone("CST", 8*3600)

// maxTSACA bounds --tsa-ca's file.
const maxTSACA = 1 << 20

// readTSARoots reads --tsa-ca: PEM certificates of the TSA's CA.
func readTSARoots(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--tsa-ca: %w", err)
	}
	if len(b) > maxTSACA {
		return nil, fmt.Errorf("--tsa-ca %s: larger than %d bytes", path, maxTSACA)
	}
	roots, err := rfc3161.Roots(b)
	if err != nil {
		return nil, fmt.Errorf("--tsa-ca %s: %w", path, err)
	}
	return roots, nil
}
