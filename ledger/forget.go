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
		changed := false
		for i, e := range es {
			parts[i] = e.Body
			if e.Body != nil && (only == nil || only[e.UID]) {
				parts[i], changed = nil, true
				n++
			}
		}
		if !changed {
			continue
		}
		if _, err := tx.ExecContext(ctx, "UPDATE ledger_blocks SET bodies = ? WHERE corp_id = ? AND first_seq = ?",
			nonNil(bytes.Join(parts, []byte{'\n'})), corp, b.firstSeq); err != nil {
			return 0, fmt.Errorf("ledger: forget %s/%s: %w", corp, msgID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ledger: forget %s/%s: %w", corp, msgID, err)
	}
	return n, nil
}
