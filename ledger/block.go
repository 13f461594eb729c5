package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
)

// block is one ledger_blocks row: consecutive entries of one kind and one
// message, appended together.
type block struct {
	corp       string
	firstSeq   uint64
	count      int
	day        string
	firstIndex uint64
	kind       Kind
	msgID      string
	uids       []byte // 4 bytes big-endian per entry; empty for kinds of the whole message
	bodies     []byte // canonical bodies joined by '\n'
	leaves     []byte // 32 bytes per entry
}

// personal reports whether entries of kind k are about one recipient.
func personal(k Kind) bool { return k == KindSignal || k == KindSend || k == KindReminder }

// groups splits facts into runs of one kind and one message, in order:
// each run is one block.
func groups(facts []Fact) [][]Fact {
	var out [][]Fact
	start := 0
	for i := 1; i <= len(facts); i++ {
		if i == len(facts) || facts[i].Kind != facts[start].Kind || facts[i].MsgID != facts[start].MsgID || facts[i].Person != facts[start].Person {
			out = append(out, facts[start:i])
			start = i
		}
	}
	return out
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

const blockColumns = "first_seq, count, CAST(day AS CHAR), first_index, kind, msgid, uids, bodies, leaves"

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readBlocks returns the blocks of corp that where (a condition with
// args after corp's) selects, ordered by first_seq.
func readBlocks(ctx context.Context, q queryer, corp, where string, args ...any) ([]block, error) {
	rows, err := q.QueryContext(ctx, "SELECT "+blockColumns+" FROM ledger_blocks WHERE corp_id = ? "+where, append([]any{corp}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("ledger: blocks of %s: %w", corp, err)
	}
	defer rows.Close()
	var out []block
	for rows.Next() {
		b := block{corp: corp}
		if err := rows.Scan(&b.firstSeq, &b.count, &b.day, &b.firstIndex, &b.kind, &b.msgID, &b.uids, &b.bodies, &b.leaves); err != nil {
			return nil, fmt.Errorf("ledger: blocks of %s: %w", corp, err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: blocks of %s: %w", corp, err)
	}
	return out, nil
}

// entries splits b into its entries. A block whose parts do not add up
// to count (edited by hand) yields the entries its leaves allow and an
// error saying what is off.
func (b block) entries() ([]Entry, error) {
	var bodies [][]byte
	if b.count > 0 {
		bodies = bytes.Split(b.bodies, []byte{'\n'})
	}
	var bad error
	switch {
	case len(b.leaves) != b.count*len(Hash{}):
		bad = fmt.Errorf("block of seq %d: %d bytes of leaves for %d entries", b.firstSeq, len(b.leaves), b.count)
	case len(bodies) != b.count:
		bad = fmt.Errorf("block of seq %d: %d bodies for %d entries", b.firstSeq, len(bodies), b.count)
	case personal(b.kind) && len(b.uids) != 4*b.count, !personal(b.kind) && len(b.uids) != 0:
		bad = fmt.Errorf("block of seq %d: %d bytes of uids for %d %s entries", b.firstSeq, len(b.uids), b.count, b.kind)
	}
	n := min(b.count, len(b.leaves)/len(Hash{}))
	out := make([]Entry, 0, n)
	for i := range n {
		e := Entry{Corp: b.corp, Seq: b.firstSeq + uint64(i), Day: b.day, Index: b.firstIndex + uint64(i), Kind: b.kind, MsgID: b.msgID}
		copy(e.LeafHash[:], b.leaves[i*len(Hash{}):])
		if i < len(bodies) && len(bodies[i]) > 0 {
			e.Body = bodies[i]
		}
		if personal(b.kind) && 4*(i+1) <= len(b.uids) {
			e.UID, e.Person = binary.BigEndian.Uint32(b.uids[4*i:]), true
		}
		out = append(out, e)
	}
	return out, bad
}

// dayLeaves returns the leaf hashes of corp's day in index order and the
// seq of the first.
func dayLeaves(ctx context.Context, q queryer, corp, day string) ([]Hash, uint64, error) {
	rows, err := q.QueryContext(ctx, "SELECT first_seq, leaves FROM ledger_blocks WHERE corp_id = ? AND day = ? ORDER BY first_index", corp, day)
	if err != nil {
		return nil, 0, fmt.Errorf("ledger: leaves of %s %s: %w", corp, day, err)
	}
	defer rows.Close()
	var leaves []Hash
	var first uint64
	for rows.Next() {
		var seq uint64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, 0, fmt.Errorf("ledger: leaves of %s %s: %w", corp, day, err)
		}
		if len(leaves) == 0 {
			first = seq
		}
		for i := 0; i+len(Hash{}) <= len(b); i += len(Hash{}) {
			var h Hash
			copy(h[:], b[i:])
			leaves = append(leaves, h)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("ledger: leaves of %s %s: %w", corp, day, err)
	}
	return leaves, first, nil
}
