package flushd

import (
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu/delta"
)

// msgKey names one message.
type msgKey struct{ corpID, msgID string }

// batch is one message's dirty uids from one partition.
type batch struct {
	uids *roaring.Bitmap
	// first is each uid's earliest counted read and earliest time of each
	// signal (Read.merge).
	first map[uint32]Read
	// byUser is the reads that name their member by UserID (delta.Delta
	// UserID), keyed by it, UID 0 until flushd maps them before writing.
	byUser map[string]Read
	// since is when the batch's first read arrived: the interval counts
	// from there.
	since time.Time
	// offset is the batch's earliest record: the partition cannot be
	// committed past it until the batch is written.
	offset kgo.EpochOffset
}

// size is the batch's reads, by uid and by UserID.
func (b *batch) size() int { return int(b.uids.GetCardinality()) + len(b.byUser) }

// reads returns the batch's reads sorted by uid, as Writer.Write wants them.
func (b *batch) reads() []Read {
	out := make([]Read, 0, b.uids.GetCardinality())
	b.uids.Iterate(func(uid uint32) bool {
		out = append(out, b.first[uid])
		return true
	})
	return out
}

// partition is what the Flusher holds of one assigned partition.
type partition struct {
	// next is one past the last record consumed (written, pending or
	// skipped as malformed).
	next kgo.EpochOffset
	// committed is the offset last committed by this Flusher, -1 none.
	committed int64
	batches   map[msgKey]*batch
}

// pending is every read consumed and not yet written. It is not safe for
// concurrent use: the Flusher guards it with its mutex.
type pending struct {
	parts map[int32]*partition
	uids  int
}

func newPending() *pending { return &pending{parts: map[int32]*partition{}} }

func (p *pending) part(n int32) *partition {
	ps := p.parts[n]
	if ps == nil {
		ps = &partition{committed: -1, batches: map[msgKey]*batch{}}
		p.parts[n] = ps
	}
	return ps
}

// add records delta d read from record (part, off) at now.
func (p *pending) add(part int32, off kgo.EpochOffset, d delta.Delta, now time.Time) {
	ps := p.part(part)
	ps.next = kgo.EpochOffset{Epoch: off.Epoch, Offset: off.Offset + 1}
	k := msgKey{d.CorpID, d.MsgID}
	b := ps.batches[k]
	if b == nil {
		b = &batch{uids: roaring.New(), first: map[uint32]Read{}, since: now, offset: off}
		ps.batches[k] = b
	}
	if d.UserID != "" {
		if b.byUser == nil {
			b.byUser = map[string]Read{}
		}
		r, ok := b.byUser[d.UserID]
		if !ok {
			p.uids++
		}
		r.merge(readOf(d))
		b.byUser[d.UserID] = r
		return
	}
	if b.uids.CheckedAdd(d.UID) {
		p.uids++
	}
	r, ok := b.first[d.UID]
	if !ok {
		r.UID = d.UID
	}
	r.merge(readOf(d))
	b.first[d.UID] = r
}

// skip records that (part, off) needs no write (a malformed record).
func (p *pending) skip(part int32, off kgo.EpochOffset) {
	p.part(part).next = kgo.EpochOffset{Epoch: off.Epoch, Offset: off.Offset + 1}
}

// dueBatch names a batch to flush.
type dueBatch struct {
	part int32
	key  msgKey
	b    *batch
}

// due returns the batches to flush at now: those of batchSize uids or more,
// those interval old, or every batch when all is set.
func (p *pending) due(now time.Time, interval time.Duration, batchSize int, all bool) []dueBatch {
	var out []dueBatch
	for n, ps := range p.parts {
		for k, b := range ps.batches {
			if all || b.size() >= batchSize || now.Sub(b.since) >= interval {
				out = append(out, dueBatch{n, k, b})
			}
		}
	}
	return out
}

// of returns every batch of the given partitions.
func (p *pending) of(parts []int32) []dueBatch {
	var out []dueBatch
	for _, n := range parts {
		if ps := p.parts[n]; ps != nil {
			for k, b := range ps.batches {
				out = append(out, dueBatch{n, k, b})
			}
		}
	}
	return out
}

// nextDue returns when the oldest batch reaches interval; ok=false when
// nothing is pending.
func (p *pending) nextDue(interval time.Duration) (t time.Time, ok bool) {
	for _, ps := range p.parts {
		for _, b := range ps.batches {
			if d := b.since.Add(interval); !ok || d.Before(t) {
				t, ok = d, true
			}
		}
	}
	return t, ok
}

// written drops a batch once its rows are committed.
func (p *pending) written(part int32, k msgKey) {
	ps := p.parts[part]
	if ps == nil {
		return
	}
	if b := ps.batches[k]; b != nil {
		p.uids -= b.size()
		delete(ps.batches, k)
	}
}

// drop forgets partitions, pending reads included (revoked or lost).
func (p *pending) drop(parts []int32) {
	for _, n := range parts {
		if ps := p.parts[n]; ps != nil {
			for _, b := range ps.batches {
				p.uids -= b.size()
			}
			delete(p.parts, n)
		}
	}
}

// commitPoints returns, per partition (all when parts is nil), the offset
// to commit: the earliest record not yet written, or one past the last
// record consumed when everything is written. Partitions already committed
// there are left out. It never passes an unwritten delta.
func (p *pending) commitPoints(parts []int32) map[int32]kgo.EpochOffset {
	out := map[int32]kgo.EpochOffset{}
	consider := func(n int32, ps *partition) {
		at := ps.next
		for _, b := range ps.batches {
			if b.offset.Offset < at.Offset {
				at = b.offset
			}
		}
		if at.Offset > ps.committed {
			out[n] = at
		}
	}
	if parts == nil {
		for n, ps := range p.parts {
			consider(n, ps)
		}
		return out
	}
	for _, n := range parts {
		if ps := p.parts[n]; ps != nil {
			consider(n, ps)
		}
	}
	return out
}

// committed records a successful commit of points.
func (p *pending) committed(points map[int32]kgo.EpochOffset) {
	for n, at := range points {
		if ps := p.parts[n]; ps != nil && at.Offset > ps.committed {
			ps.committed = at.Offset
		}
	}
}
