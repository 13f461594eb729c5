package main

import (
	"fmt"
	"io"
	"os"

	"github.com/yidu-io/yidu/evidence"
)

// evidenceCheck runs evidence.Check on the ZIP at path and prints what it
// found: the counts, then each problem on its own line.
func evidenceCheck(path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("evidence check: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("evidence check: %w", err)
	}
	rep, err := evidence.Check(f, st.Size())
	fmt.Fprintf(out, "people: %d\nfiles matching manifest.csv: %d\ninclusion proofs verified: %d\n", rep.People, rep.Files, rep.Proofs)
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
