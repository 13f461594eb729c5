package evidence

import (
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/internal/rfc3161"
)

// checkStamp checks the day checkpoint a record relies on for its TSA
// time (record.json's day_checkpoint): the checkpoint is signed by the
// log's key, of the pack's log, states the size and root the record
// says, covers the person's entries (those of proofs.json) and is proved
// a prefix of the checkpoint the newest of them is proved against (its
// consistency proof); its RFC 3161 token's CMS signature verifies (with tsaRoots, to
// one of them), its imprint is the checkpoint's hash and its time is the
// one the record states.
func checkStamp(rep *CheckReport, dir string, rec Record, entries []Entry, v note.Verifier, tsaRoots *x509.CertPool, problem func(string, ...any)) {
	st := rec.Stamp
	name := fmt.Sprintf("%s/record.json: the day checkpoint of %s (%d entries)", dir, st.Day, st.Size)
	if v == nil {
		return // no key: already a problem of the pack
	}
	if st.Note == "" {
		problem("%s: carries no signed checkpoint, so its TSA token stamps nothing the pack shows", name)
		return
	}
	cp, err := openCheckpoint([]byte(st.Note), v)
	if err != nil {
		problem("%s: %v", name, err)
		return
	}
	if int64(cp.Size) != st.Size || hex.EncodeToString(cp.Hash) != st.Root || (rep.Origin != "" && cp.Origin != rep.Origin) {
		problem("%s: its signed checkpoint is %s of %d entries, root %x; the record says %d entries, root %s", name, cp.Origin, cp.Size, cp.Hash, st.Size, st.Root)
		return
	}
	for _, e := range entries {
		if e.Seq > st.Size {
			problem("%s: does not cover entry %d", name, e.Seq)
			return
		}
	}
	if err := checkConsistent(cp, st.Consistency, entries, v); err != nil {
		problem("%s: %v", name, err)
		return
	}
	tok, err := rfc3161.Verify(st.Token, []byte(st.Note), tsaRoots)
	if err != nil {
		problem("%s: its TSA token is refused: %v", name, err)
		return
	}
	if !tok.Time.Equal(st.Time) {
		problem("%s: the record states TSA time %s; its token says %s", name, st.Time.UTC().Format(time.RFC3339), tok.Time.Format(time.RFC3339))
		return
	}
	if !slices.ContainsFunc(rep.Stamps, func(s StampChecked) bool { return s.Size == st.Size }) {
		rep.Stamps = append(rep.Stamps, StampChecked{Day: st.Day, Size: st.Size, Time: tok.Time, TSA: tok.TSA, RootChecked: tok.RootChecked})
	}
}

// checkConsistent checks that day's tree is a prefix of the tree of the
// checkpoint the person's newest entry is proved against (signed by v,
// of day's log; record.json's checkpoint): c proves it (RFC 6962
// PROOF(m, D[n]), proof.VerifyConsistency). Without it a checkpoint of a
// forked tree, signed with the log's key, could lend the entries its
// TSA time.
func checkConsistent(day log.Checkpoint, c *ConsistencyDoc, entries []Entry, v note.Verifier) error {
	if c == nil {
		return fmt.Errorf("carries no consistency proof to the checkpoint of the entries, so nothing shows its tree is the one they are proved in")
	}
	var newest *Entry
	for i := range entries {
		if newest == nil || entries[i].Seq > newest.Seq {
			newest = &entries[i]
		}
	}
	if newest == nil || newest.Proof == nil {
		return fmt.Errorf("no proved entry to be consistent with")
	}
	target, err := openCheckpoint([]byte(newest.Proof.Checkpoint), v)
	if err != nil {
		return fmt.Errorf("the checkpoint entry %d is proved against, which its consistency proof leads to: %w", newest.Seq, err)
	}
	if target.Origin != day.Origin || c.TreeSize != int64(target.Size) {
		return fmt.Errorf("its consistency proof leads to %d entries; entry %d is proved against %s of %d entries", c.TreeSize, newest.Seq, target.Origin, target.Size)
	}
	path := make([][]byte, 0, len(c.Path))
	for _, h := range c.Path {
		b, err := parseHash(h)
		if err != nil {
			return fmt.Errorf("its consistency proof: %w", err)
		}
		path = append(path, b[:])
	}
	if err := proof.VerifyConsistency(rfc6962.DefaultHasher, day.Size, target.Size, path, day.Hash, target.Hash); err != nil {
		return fmt.Errorf("is not consistent with the checkpoint the entries are proved against (%d entries, root %x), a checkpoint of another tree: %w",
			target.Size, target.Hash, err)
	}
	return nil
}
