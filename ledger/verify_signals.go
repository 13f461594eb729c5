package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

type signalBody struct {
	ReadTime string `json:"read_time"`
	Source   int64  `json:"source"`
}

// sig is a signal entry as verifySignals keeps it.
type sig struct {
	key  readKey
	seq  uint64
	day  string
	body []byte
}

type readKey struct {
	msgid string
	uid   uint32
}

func (k readKey) less(o readKey) int {
	if c := cmp.Compare(k.msgid, o.msgid); c != 0 {
		return c
	}
	return cmp.Compare(k.uid, o.uid)
}

// verifySignals merges the signal entries and the read rows of the
// messages sent since genesis, both in (msgid, uid) order.
func (l *Ledger) verifySignals(ctx context.Context, corp, day string, gen time.Time, rep *Report) error {
	sigs, err := l.signalEntries(ctx, corp)
	if err != nil {
		return err
	}
	superseded, err := l.superseded(ctx, corp, sigs)
	if err != nil {
		return err
	}
	// A read older than the ledger may have been flushed before it
	// existed: its entry is not required (but compared when there).
	rows, err := l.db.QueryContext(ctx, `SELECT msgid, uid, DATE_FORMAT(read_time, '%Y-%m-%dT%H:%i:%sZ'), source, read_time < ?
FROM message_read_record WHERE corp_id = ? AND is_read = 1 ORDER BY msgid, uid`, gen.UTC().Truncate(time.Second), corp)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: read rows: %w", corp, err)
	}
	defer rows.Close()
	live, err := l.messages(ctx, corp)
	if err != nil {
		return err
	}
	i := 0
	inDay := func(s sig) bool { return day == "" || s.day == day }
	unmatched := func(i int) {
		// A notice purged as a whole (yidu archive purge) took its read
		// rows with it; its entries stay, as hashes of a history.
		// and a forgotten entry (Forget) needs no fact.
		s := sigs[i]
		if inDay(s) && live[s.key.msgid] && s.body != nil && !superseded[i] {
			rep.Problems = append(rep.Problems, Problem{Seq: s.seq, What: "deleted",
				Detail: fmt.Sprintf("it records a read of %s by uid %d that message_read_record no longer has", s.key.msgid, s.key.uid)})
		}
	}
	for rows.Next() {
		var k readKey
		var at sql.NullString
		var source int64
		var older bool
		if err := rows.Scan(&k.msgid, &k.uid, &at, &source, &older); err != nil {
			return fmt.Errorf("ledger: verify %s: read rows: %w", corp, err)
		}
		rep.Facts++
		for i < len(sigs) && sigs[i].key.less(k) < 0 {
			unmatched(i)
			i++
		}
		// The entries of a read that was reset since are history.
		for i+1 < len(sigs) && sigs[i].key == k && sigs[i+1].key == k && superseded[i] {
			i++
		}
		if i == len(sigs) || sigs[i].key != k || superseded[i] {
			if i < len(sigs) && sigs[i].key == k {
				i++
			}
			if day == "" && !older {
				rep.Problems = append(rep.Problems, Problem{What: "inserted",
					Detail: fmt.Sprintf("message_read_record %s uid %d (read %s, source %d) has no ledger entry", k.msgid, k.uid, at.String, source)})
			}
			continue
		}
		s := sigs[i]
		i++
		if inDay(s) && s.body != nil {
			var b signalBody
			if err := json.Unmarshal(s.body, &b); err != nil || b.ReadTime != at.String || b.Source != source {
				rep.Problems = append(rep.Problems, Problem{Seq: s.seq, What: "altered",
					Detail: fmt.Sprintf("message_read_record %s uid %d says read %s source %d; the entry says %s", k.msgid, k.uid, at.String, source, s.body)})
			}
		}
		for i < len(sigs) && sigs[i].key == k {
			if inDay(sigs[i]) {
				rep.Problems = append(rep.Problems, Problem{Seq: sigs[i].seq, What: "inserted",
					Detail: fmt.Sprintf("a second signal entry for %s uid %d (the first is entry %d)", k.msgid, k.uid, s.seq)})
			}
			i++
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: verify %s: read rows: %w", corp, err)
	}
	for ; i < len(sigs); i++ {
		unmatched(i)
	}
	return nil
}

// reacknowledgements returns, per notice, the seqs of the entries of its
// material versions (reacknowledge true), in seq order.
func (l *Ledger) reacknowledgements(ctx context.Context, corp string) (map[string][]uint64, error) {
	es, err := l.entries(ctx, corp, "version entries", "AND kind = ? ORDER BY first_seq", string(KindVersion))
	if err != nil {
		return nil, err
	}
	out := map[string][]uint64{}
	for _, e := range es {
		var v struct {
			Reacknowledge bool `json:"reacknowledge"`
		}
		if e.Body != nil && json.Unmarshal(e.Body, &v) == nil && v.Reacknowledge {
			out[e.MsgID] = append(out[e.MsgID], e.Seq)
		}
	}
	return out, nil
}

// signalEntries reads corp's signal entries in (msgid, uid, seq) order.
func (l *Ledger) signalEntries(ctx context.Context, corp string) ([]sig, error) {
	es, err := l.entries(ctx, corp, "signal entries", "AND kind = ?", string(KindSignal))
	if err != nil {
		return nil, err
	}
	var sigs []sig
	for _, e := range es {
		sigs = append(sigs, sig{key: readKey{e.MsgID, e.UID}, seq: e.Seq, day: e.Day, body: e.Body})
	}
	slices.SortFunc(sigs, func(a, b sig) int {
		if c := a.key.less(b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	return sigs, nil
}

// superseded says, of each of sigs, whether it records a read that was
// reset since. A material version under read_rule acknowledged makes
// every read row unread again (tracker.Registry.ResetAcknowledged): a
// signal entry followed by such a version's entry, before the next
// signal entry of the same row, records a read that was reset, and needs
// no read row.
func (l *Ledger) superseded(ctx context.Context, corp string, sigs []sig) ([]bool, error) {
	resets, err := l.reacknowledgements(ctx, corp)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(sigs))
	for i, s := range sigs {
		next := ^uint64(0)
		if i+1 < len(sigs) && sigs[i+1].key == s.key {
			next = sigs[i+1].seq
		}
		out[i] = slices.ContainsFunc(resets[s.key.msgid], func(r uint64) bool { return r > s.seq && r < next })
	}
	return out, nil
}
