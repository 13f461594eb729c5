package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/cmd/internal/process"
	"github.com/yidu-io/yidu/ledger"
)

const evidenceUsage = "usage: yidu evidence verify --corp ID [--day YYYY-MM-DD] | seal | key [generate NAME] | consistency --corp ID --from N [--to M] | check FILE.zip [--key KEY] [--checkpoint CONSISTENCY.json] [--tsa-ca CA.pem]"

// evidenceArgs are the flags of `yidu evidence`.
type evidenceArgs struct {
	corp, day        string
	from, to         uint64
	key, consistency string
	tsaCA            string
}

// checkEvidenceArgs checks `yidu evidence`'s arguments for the steps
// that read the configuration.
func checkEvidenceArgs(positional []string, a evidenceArgs) error {
	if len(positional) == 0 {
		return usagef(evidenceUsage)
	}
	switch positional[0] {
	case "verify", "consistency":
		if len(positional) != 1 {
			return usagef(evidenceUsage)
		}
		if !yidu.CorpID(a.corp).Valid() {
			return usagef("evidence %s: --corp %q is not a corp id", positional[0], yidu.Truncate(a.corp, 70))
		}
		if a.day != "" {
			if _, err := time.Parse(time.DateOnly, a.day); err != nil {
				return usagef("evidence verify: --day %q: want YYYY-MM-DD", a.day)
			}
		}
		if positional[0] == "consistency" && (a.from == 0 || (a.to != 0 && a.to < a.from)) {
			return usagef("evidence consistency: --from N (a checkpoint's size) is required, and --to M, if given, is not smaller")
		}
	case "seal", "key":
		if len(positional) != 1 {
			return usagef(evidenceUsage)
		}
	default:
		return usagef(evidenceUsage)
	}
	return nil
}

// generateKey prints a new signing key of the log and its verifier key
// (`yidu evidence key generate NAME`, no configuration needed).
func generateKey(name string, out io.Writer) error {
	skey, vkey, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return usagef("evidence key generate: %v", err)
	}
	fmt.Fprintf(out, "signing key (ledger.signing_key; keep it secret, out of yidu's database):\n%s\nverifier key (publish it; auditors check with it):\n%s\n", skey, vkey)
	return nil
}

// errTampered is verify's failure: the report says what.
type errTampered struct{ n int }

func (e errTampered) Error() string {
	return fmt.Sprintf("evidence verify: %d problem(s): the ledger and the records disagree", e.n)
}

// maxPrinted bounds the problems verify prints after the first.
const maxPrinted = 50

// runEvidence runs `yidu evidence verify|seal|key|consistency`.
func runEvidence(ctx context.Context, cfg config.Config, step string, a evidenceArgs, logger *slog.Logger, out io.Writer) error {
	if step == "key" {
		_, vkey, err := process.LedgerKey(cfg.Ledger)
		if err != nil {
			return err
		}
		if vkey == "" {
			return fmt.Errorf("evidence key: no ledger.signing_key configured (yidu evidence key generate NAME makes one)")
		}
		fmt.Fprintln(out, vkey)
		return nil
	}
	db, err := process.OpenDB(cfg.MySQL.DSN)
	if err != nil {
		return err
	}
	defer db.Close()
	opts, err := process.LedgerOptions(cfg.Ledger, logger)
	if err != nil {
		return err
	}
	opts.Audit = audit.NewMySQL(db)
	if a.tsaCA != "" {
		if opts.TSARoots, err = readTSARoots(a.tsaCA); err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
	}
	l, err := ledger.New(db, opts)
	if err != nil {
		return err
	}
	switch step {
	case "seal":
		cps, err := l.SealDue(ctx)
		for _, c := range cps {
			fmt.Fprintf(out, "closed %s %s: checkpoint of %d entries, root %s\n", c.Corp, c.Day, c.Size, c.Root)
		}
		if err == nil && len(cps) == 0 {
			fmt.Fprintln(out, "nothing to seal")
		}
		if err != nil {
			return err
		}
		stamped, err := l.StampDue(ctx)
		for _, c := range stamped {
			fmt.Fprintf(out, "timestamped %s %s: checkpoint of %d entries\n", c.Corp, c.Day, c.Size)
		}
		return err
	case "consistency":
		c, err := l.Consistency(ctx, a.corp, a.from, a.to)
		if err != nil {
			return fmt.Errorf("evidence consistency: %w", err)
		}
		b, _ := json.MarshalIndent(c.Doc(), "", "  ")
		fmt.Fprintf(out, "%s\n", b)
		return nil
	}
	rep, err := l.Verify(ctx, a.corp, a.day)
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
		fmt.Fprintf(out, "%s %s: %d entries from seq %d, root %s (sealed %s, before the log was one tree)\n", a.corp, r.Day, r.Size, r.FirstSeq, r.Root, r.SealedAt.UTC().Format(time.RFC3339))
	}
	for _, c := range rep.Checkpoints {
		day := ""
		if c.Day != "" {
			day = ", closes " + c.Day
		}
		fmt.Fprintf(out, "checkpoint %s: %d entries, root %s (%s%s)\n", c.Origin, c.Size, c.Root, c.At.Format(time.RFC3339), day)
	}
	fmt.Fprintf(out, "ok: %d entries agree with %d records\n", rep.Entries, rep.Facts)
	return nil
}
