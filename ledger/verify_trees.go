package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/yidu-io/yidu/internal/rfc3161"
)

// verifyTrees walks corp's entries (of day, or all) in seq order: no
// gap in seq or day_index, each body against its leaf hash and row, each
// sealed day's root; for the whole log also the head, the checkpoints
// and the sealed days that lost every entry.
func (l *Ledger) verifyTrees(ctx context.Context, corp, day string, rep *Report) error {
	where, args := "", []any{}
	if day != "" {
		where, args = "AND day = ?", []any{day}
	}
	blocks, err := readBlocks(ctx, l.db, corp, where+" ORDER BY first_seq", args...)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: %w", corp, err)
	}
	var (
		prev     Entry
		have     bool
		all      []Hash // the log's leaves in seq order (day "": every one)
		leaves   []Hash // the current day's
		curDay   string
		firstSeq uint64
	)
	for _, b := range blocks {
		es, bad := b.entries()
		if bad != nil {
			rep.Problems = append(rep.Problems, Problem{Seq: b.firstSeq, What: "altered", Detail: bad.Error()})
		}
		for _, e := range es {
			rep.Entries++
			switch {
			case !have && day == "" && e.Seq != 1:
				rep.Problems = append(rep.Problems, Problem{Seq: 1, What: "deleted",
					Detail: fmt.Sprintf("the ledger starts at seq %d", e.Seq)})
			case have && e.Seq != prev.Seq+1:
				rep.Problems = append(rep.Problems, Problem{Seq: prev.Seq + 1, What: "deleted",
					Detail: fmt.Sprintf("seq %d..%d missing (day %s)", prev.Seq+1, e.Seq-1, e.Day)})
			}
			if e.Day != curDay {
				if err := l.closeDay(ctx, corp, curDay, firstSeq, leaves, rep); err != nil {
					return err
				}
				curDay, leaves, firstSeq = e.Day, leaves[:0], e.Seq
			}
			if e.Index != uint64(len(leaves)) {
				rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "altered",
					Detail: fmt.Sprintf("day %s index %d where %d was due", e.Day, e.Index, len(leaves))})
			}
			leaves = append(leaves, e.LeafHash)
			all = append(all, e.LeafHash)
			if e.Body != nil {
				if p, bad := checkBody(corp, e); bad {
					rep.Problems = append(rep.Problems, p)
				}
			}
			prev, have = e, true
		}
	}
	if err := l.closeDay(ctx, corp, curDay, firstSeq, leaves, rep); err != nil {
		return err
	}
	if day != "" {
		return nil
	}
	if err := l.checkHead(ctx, corp, prev.Seq, rep); err != nil {
		return err
	}
	if err := l.verifyCheckpoints(ctx, corp, NewTree(all), rep); err != nil {
		return err
	}
	return l.checkSealedDays(ctx, corp, rep)
}

// closeDay compares a day sealed before the log was one tree
// (ledger_roots) with its own day tree: leaves, from firstSeq.
func (l *Ledger) closeDay(ctx context.Context, corp, day string, firstSeq uint64, leaves []Hash, rep *Report) error {
	if day == "" {
		return nil
	}
	s, err := l.sealed(ctx, corp, day)
	if err != nil || s == nil {
		return err
	}
	r := DayRoot{Corp: corp, Day: day, Size: uint64(len(leaves)), Root: Root(leaves), FirstSeq: firstSeq, Sealed: true, SealedAt: s.SealedAt}
	if s.Size != r.Size || s.Root != r.Root || s.FirstSeq != r.FirstSeq {
		rep.Problems = append(rep.Problems, Problem{Seq: max(firstSeq, 1), What: "altered",
			Detail: fmt.Sprintf("day %s: its %d entries from seq %d hash to %s, sealed was %d entries from seq %d with root %s",
				day, r.Size, firstSeq, r.Root, s.Size, s.FirstSeq, s.Root)})
	}
	rep.Roots = append(rep.Roots, r)
	return nil
}

// checkHead compares the head's count with the last entry stored: a
// tail cut off leaves no gap, but the head still counts it, and so does
// every checkpoint signed since.
func (l *Ledger) checkHead(ctx context.Context, corp string, last uint64, rep *Report) error {
	var next uint64
	err := l.db.QueryRowContext(ctx, "SELECT next_seq FROM ledger_heads WHERE corp_id = ?", corp).Scan(&next)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("ledger: verify %s: head: %w", corp, err)
	}
	if err == nil && next != last+1 {
		rep.Problems = append(rep.Problems, Problem{Seq: last + 1, What: "deleted",
			Detail: fmt.Sprintf("the head says the ledger has %d entries, its last is seq %d", next-1, last)})
	}
	return nil
}

// checkSealedDays reports a sealed day whose entries are all gone: it
// has no tree to close.
func (l *Ledger) checkSealedDays(ctx context.Context, corp string, rep *Report) error {
	seen := map[string]bool{}
	for _, r := range rep.Roots {
		seen[r.Day] = true
	}
	return l.scanRows(ctx, corp, "roots", "SELECT CAST(day AS CHAR), size, first_seq FROM ledger_roots WHERE corp_id = ? ORDER BY day", []any{corp}, func(rows *sql.Rows) error {
		var d string
		var size, first uint64
		if err := rows.Scan(&d, &size, &first); err != nil {
			return err
		}
		if !seen[d] && size > 0 {
			rep.Problems = append(rep.Problems, Problem{Seq: first, What: "deleted",
				Detail: fmt.Sprintf("day %s was sealed with %d entries from seq %d and has none", d, size, first)})
		}
		return nil
	})
}

// verifyCheckpoints checks each of corp's checkpoints against the log t
// recomputed from the stored leaves: its note is signed by the log's key
// (when Verify has one) and says what its row says, and the log's first
// size leaves hash to its root. A checkpoint larger than the log names
// the tail cut off; a root that no longer matches, the entries between
// the last checkpoint that still holds and it.
func (l *Ledger) verifyCheckpoints(ctx context.Context, corp string, t *Tree, rep *Report) error {
	cps, err := l.Checkpoints(ctx, corp)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: %w", corp, err)
	}
	var good uint64 // the largest size whose checkpoint still holds
	for _, c := range cps {
		rep.Checkpoints = append(rep.Checkpoints, c)
		if p, bad := l.checkNote(corp, c); bad {
			rep.Problems = append(rep.Problems, p)
			continue
		}
		if c.Size > t.Size() {
			rep.Problems = append(rep.Problems, Problem{Seq: t.Size() + 1, What: "deleted",
				Detail: fmt.Sprintf("checkpoint %s (signed %s) has %d entries; the log has %d", c.Root, c.At.Format(time.RFC3339), c.Size, t.Size())})
			continue
		}
		root, err := t.Root(c.Size)
		if err != nil {
			return fmt.Errorf("ledger: verify %s: %w", corp, err)
		}
		if root != c.Root {
			rep.Problems = append(rep.Problems, Problem{Seq: good + 1, What: "altered",
				Detail: fmt.Sprintf("entries %d..%d no longer hash to checkpoint %d's root %s (signed %s; they hash to %s)",
					good+1, c.Size, c.Size, c.Root, c.At.Format(time.RFC3339), root)})
			continue
		}
		good = max(good, c.Size)
	}
	return nil
}

// checkNote checks a checkpoint's signed note: the log key's signature
// (when the ledger has a verifier), and that it states the row's origin,
// size and root.
func (l *Ledger) checkNote(corp string, c Checkpoint) (Problem, bool) {
	bad := func(format string, a ...any) (Problem, bool) {
		return Problem{Seq: max(c.Size, 1), What: "altered", Detail: fmt.Sprintf("checkpoint %d: ", c.Size) + fmt.Sprintf(format, a...)}, true
	}
	var cp log.Checkpoint
	if l.verifier != nil {
		var err error
		if cp, err = OpenCheckpoint([]byte(c.Note), "", l.verifier); err != nil {
			return bad("%v", err)
		}
	} else if _, err := cp.Unmarshal([]byte(c.Note)); err != nil {
		return bad("not a checkpoint: %v", err)
	}
	if !strings.HasSuffix(cp.Origin, "/"+corp) || cp.Size != c.Size || !bytes.Equal(cp.Hash, c.Root[:]) {
		return bad("its note says %q size %d root %x; its row says size %d root %s", cp.Origin, cp.Size, cp.Hash, c.Size, c.Root)
	}
	// The TSA's token must stamp this note, and its CMS signature verify
	// with the TSA certificate it carries (rfc3161.Verify); whether that
	// certificate is one a court trusts is `yidu evidence check --tsa-ca`'s
	// and openssl ts -verify's to say (docs/evidence.md).
	if c.Timestamp != nil {
		if _, err := rfc3161.Verify(c.Timestamp, []byte(c.Note), l.tsaRoots); err != nil {
			return bad("its TSA token: %v", err)
		}
	}
	return Problem{}, false
}
