package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
)

// Forget empties the bodies of the entries of notice msgID about the
// recipients uids (all of them when uids is nil), for retention (issue 40
// item 3: personal data anonymised after the notice's retention). Their
// leaf hashes stay, so every day's root and every other entry's proof
// still verify, and Verify no longer compares those entries with facts.
// It returns how many bodies it emptied.
func (l *Ledger) Forget(ctx context.Context, corp, msgID string, uids []uint32) (int, error) {
	var only map[uint32]bool
	if uids != nil {
		only = make(map[uint32]bool, len(uids))
		for _, u := range uids {
			only[u] = true
		}
	}
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("ledger: forget %s/%s: %w", corp, msgID, err)
	}
	defer tx.Rollback()
	blocks, err := readBlocks(ctx, tx, corp, "AND msgid = ? ORDER BY first_seq FOR UPDATE", msgID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, b := range blocks {
		es, bad := b.entries()
		if bad != nil || !personal(b.kind) {
			continue
		}
		parts := make([][]byte, len(es))
		packed := b.packed()
		if packed {
			// A packed body is forgotten as five zero bytes.
			b.bodies = bytes.Clone(b.bodies)
		}
		changed := false
		for i, e := range es {
			parts[i] = e.Body
			if e.Body != nil && (only == nil || only[e.UID]) {
				parts[i], changed = nil, true
				if packed {
					clear(b.bodies[1+packedSize*i : 1+packedSize*(i+1)])
				}
				n++
			}
		}
		if !changed {
			continue
		}
		bodies := b.bodies
		if !packed {
			bodies = nonNil(bytes.Join(parts, []byte{'\n'}))
		}
		if _, err := tx.ExecContext(ctx, "UPDATE ledger_blocks SET bodies = ? WHERE corp_id = ? AND first_seq = ?",
			bodies, corp, b.firstSeq); err != nil {
			return 0, fmt.Errorf("ledger: forget %s/%s: %w", corp, msgID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ledger: forget %s/%s: %w", corp, msgID, err)
	}
	return n, nil
}
