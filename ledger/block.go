package ledger

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"
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
	bodies     []byte // canonical bodies joined by '\n', or packed (packedSignals)
	leaves     []byte // 32 bytes per entry
}

// packedSignals is the first byte of the bodies of a block of signal
// entries stored packed (a canonical body starts with '{'): after it, per
// entry, its read time (unix seconds, 4 bytes big-endian) and its source
// (1 byte). Such an entry's body holds nothing else the block's row does
// not (corp, seq, day, index, msgid, uid), so it is rebuilt byte for byte
// (Signal.appendBody) instead of stored: 5 bytes an entry instead of ~200
// for MySQL to write, the price of flushd's batches (docs/benchmarks.md).
// Five zero bytes are a forgotten body (Forget): a signal's source is
// never 0.
const (
	packedSignals = 0x01
	packedSize    = 5
)

// packable reports whether the facts of g (one group) can be stored
// packed: plain signals (no page event's members) of whole seconds
// within 4 bytes of unix time.
func packable(g []Fact) bool {
	for _, f := range g {
		s := &f.signal
		if !f.isSignal || f.Kind != KindSignal || s.Signal != "" || s.Version != 0 || s.ClientIP != "" || s.UserAgent != "" ||
			s.Source == 0 || s.ReadTime.Nanosecond() != 0 || s.ReadTime.Unix() <= 0 || s.ReadTime.Unix() > math.MaxUint32 {
			return false
		}
	}
	return true
}

// packedPrefix holds the parts of a packed block's bodies that its
// entries share, escaped once: Signal.appendBody's bytes for a plain
// signal, without escaping corp and msgid for every entry (flushd's
// batches of 5000).
type packedPrefix struct {
	head []byte // {"corp":"…","day":"…","index":
	mid  []byte // ,"kind":"signal","msgid":"…","read_time":"
}

func (p *packedPrefix) init(corp, day, msgID string) error {
	var err error
	p.head = append(p.head[:0], `{"corp":`...)
	if p.head, err = appendString(p.head, corp); err != nil {
		return err
	}
	p.head = append(p.head, `,"day":"`...)
	p.head = append(p.head, day...)
	p.head = append(p.head, `","index":`...)
	p.mid = append(p.mid[:0], `,"kind":"signal","msgid":`...)
	if p.mid, err = appendString(p.mid, msgID); err != nil {
		return err
	}
	p.mid = append(p.mid, `,"read_time":"`...)
	return nil
}

// appendBody appends the body of plain signal s at seq and index.
func (p *packedPrefix) appendBody(dst []byte, seq, index uint64, s *Signal) []byte {
	dst = append(dst, p.head...)
	dst = strconv.AppendUint(dst, index, 10)
	dst = append(dst, p.mid...)
	dst = appendTime(dst, s.ReadTime)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	dst = append(dst, `,"source":`...)
	dst = strconv.AppendUint(dst, uint64(s.Source), 10)
	dst = append(dst, `,"uid":`...)
	dst = strconv.AppendUint(dst, uint64(s.UID), 10)
	return append(dst, '}')
}

// packed reports whether b's bodies are packed.
func (b block) packed() bool {
	return b.kind == KindSignal && len(b.bodies) > 0 && b.bodies[0] == packedSignals
}

// unpack rebuilds the bodies of a packed block, nil for a forgotten one.
func (b block) unpack() ([][]byte, error) {
	p := b.bodies[1:]
	if len(p) != packedSize*b.count {
		return nil, fmt.Errorf("block of seq %d: %d bytes of packed bodies for %d entries", b.firstSeq, len(p), b.count)
	}
	if len(b.uids) != 4*b.count {
		return nil, fmt.Errorf("block of seq %d: %d bytes of uids for %d %s entries", b.firstSeq, len(b.uids), b.count, b.kind)
	}
	out := make([][]byte, b.count)
	for i := range out {
		at, source := binary.BigEndian.Uint32(p[packedSize*i:]), p[packedSize*i+4]
		if at == 0 && source == 0 {
			continue
		}
		s := Signal{MsgID: b.msgID, UID: binary.BigEndian.Uint32(b.uids[4*i:]), Source: source, ReadTime: time.Unix(int64(at), 0)}
		body, err := s.appendBody(nil, KindSignal, b.corp, b.firstSeq+uint64(i), b.day, b.firstIndex+uint64(i))
		if err != nil {
			return nil, fmt.Errorf("block of seq %d: %w", b.firstSeq, err)
		}
		out[i] = body
	}
	return out, nil
}

// personal reports whether entries of kind k are about one recipient.
func personal(k Kind) bool {
	return k == KindSignal || k == KindPage || k == KindSend || k == KindReminder || k == KindSeen || k == KindEnrol || k == KindAsked
}

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
	var bad error
	switch {
	case b.packed():
		var err error
		if bodies, err = b.unpack(); err != nil {
			bad = err
		}
	case b.count > 0:
		bodies = bytes.Split(b.bodies, []byte{'\n'})
	}
	switch {
	case bad != nil:
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
