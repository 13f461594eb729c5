package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/ledger"
)

// checkEvidenceArgs checks `yidu evidence verify|seal`'s arguments.
func checkEvidenceArgs(positional []string, corp, day string) error {
	if len(positional) != 1 {
		return usagef("usage: yidu evidence verify --corp ID [--day YYYY-MM-DD] | evidence seal")
	}
	switch positional[0] {
	case "verify":
		if !yidu.CorpID(corp).Valid() {
			return usagef("evidence verify: --corp %q is not a corp id", yidu.Truncate(corp, 70))
		}
		if day != "" {
			if _, err := time.Parse(time.DateOnly, day); err != nil {
				return usagef("evidence verify: --day %q: want YYYY-MM-DD", day)
			}
		}
	case "seal":
	default:
		return usagef("usage: yidu evidence verify --corp ID [--day YYYY-MM-DD] | evidence seal")
	}
	return nil
}

// errTampered is verify's failure: the report says what.
type errTampered struct{ n int }

func (e errTampered) Error() string {
	return fmt.Sprintf("evidence verify: %d problem(s): the ledger and the records disagree", e.n)
}

// maxPrinted bounds the problems verify prints after the first.
const maxPrinted = 50

// runEvidence runs `yidu evidence verify` or `yidu evidence seal`.
func runEvidence(ctx context.Context, cfg config.Config, step, corp, day string, logger *slog.Logger, out io.Writer) error {
	db, err := process.OpenDB(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	l, err := ledger.New(db, ledger.Options{Audit: audit.NewMySQL(db), Logger: logger})
	if err != nil {
		return err
	}
	if step == "seal" {
		roots, err := l.SealDue(ctx)
		for _, r := range roots {
			fmt.Fprintf(out, "sealed %s %s: %d entries from seq %d, root %s\n", r.Corp, r.Day, r.Size, r.FirstSeq, r.Root)
		}
		if err == nil && len(roots) == 0 {
			fmt.Fprintln(out, "nothing to seal")
		}
		return err
	}
	rep, err := l.Verify(ctx, corp, day)
	if err != nil {
		return err
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintf(out, "FIRST %s\n", rep.Problems[0])
		for i, p := range rep.Problems[1:] {
			if i == maxPrinted {
				fmt.Fprintf(out, "… and %d more\n", len(rep.Problems)-1-maxPrinted)
				break
			}
			fmt.Fprintf(out, "also %s\n", p)
		}
		return errTampered{len(rep.Problems)}
	}
	for _, r := range rep.Roots {
		state := "today, not sealed"
		if r.Sealed {
			state = "sealed " + r.SealedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(out, "%s %s: %d entries from seq %d, root %s (%s)\n", corp, r.Day, r.Size, r.FirstSeq, r.Root, state)
	}
	fmt.Fprintf(out, "ok: %d entries agree with %d records\n", rep.Entries, rep.Facts)
	return nil
}
