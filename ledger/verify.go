package ledger

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Problem is one way the ledger and the facts disagree.
type Problem struct {
	// Seq is the entry concerned (0: a fact with no entry).
	Seq uint64 `json:"seq"`
	// What is "altered", "deleted" or "inserted".
	What string `json:"what"`
	// Detail names the entry or row and what differs.
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	if p.Seq == 0 {
		return p.What + ": " + p.Detail
	}
	return fmt.Sprintf("%s: entry %d: %s", p.What, p.Seq, p.Detail)
}

// Report is what Verify found.
type Report struct {
	Corp string
	// Roots are the heads of the days checked, recomputed from the
	// entries (Sealed: the day's recorded root, which they match unless
	// a Problem says otherwise).
	Roots []DayRoot
	// Entries counts the entries checked; Facts the read rows, send rows
	// and versions compared with them.
	Entries, Facts int
	// Problems, the first (lowest seq; facts without an entry last)
	// first.
	Problems []Problem
}

// Verify recomputes corp's trees from the stored entries (every day, or
// only day when it is not "") and cross-checks the entries with the facts
// they record: each entry's leaf hash against its body and its body
// against its row; seq and day_index without gaps; each sealed day's
// root; each read row of message_read_record against its one signal
// entry, each page_signals row against its one page entry, and each send
// or reminder entry against its message_sends batch.
// A read older than corp's ledger (ledger_heads.started_at) needs no
// entry, and the entries of a notice purged whole need no read row. An error is returned only when the check could not run.
func (l *Ledger) Verify(ctx context.Context, corp, day string) (Report, error) {
	rep := Report{Corp: corp}
	if day != "" {
		if _, err := time.Parse(time.DateOnly, day); err != nil {
			return rep, fmt.Errorf("ledger: day %q: %w", day, ErrInvalid)
		}
	}
	if err := l.verifyTrees(ctx, corp, day, &rep); err != nil {
		return rep, err
	}
	if err := l.verifySignals(ctx, corp, day, &rep); err != nil {
		return rep, err
	}
	if err := l.verifyPages(ctx, corp, day, &rep); err != nil {
		return rep, err
	}
	if err := l.verifySends(ctx, corp, day, &rep); err != nil {
		return rep, err
	}
	if err := l.verifyVersions(ctx, corp, day, &rep); err != nil {
		return rep, err
	}
	slices.SortStableFunc(rep.Problems, func(a, b Problem) int {
		if (a.Seq == 0) != (b.Seq == 0) {
			if a.Seq == 0 {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return rep, nil
}

// bodyHead is the part of every body Verify compares with the row.
type bodyHead struct {
	Corp  string `json:"corp"`
	Seq   uint64 `json:"seq"`
	Day   string `json:"day"`
	Index uint64 `json:"index"`
	Kind  Kind   `json:"kind"`
	MsgID string `json:"msgid"`
	UID   *int64 `json:"uid"`
}

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
		prev      Entry
		have      bool
		leaves    []Hash
		curDay    string
		firstSeq  uint64
		closeTree = func() error {
			if curDay == "" {
				return nil
			}
			r := DayRoot{Corp: corp, Day: curDay, Size: uint64(len(leaves)), Root: Root(leaves), FirstSeq: firstSeq}
			s, err := l.sealed(ctx, corp, curDay)
			if err != nil {
				return err
			}
			if s != nil {
				r.Sealed, r.SealedAt = true, s.SealedAt
				if s.Size != r.Size || s.Root != r.Root || s.FirstSeq != r.FirstSeq {
					rep.Problems = append(rep.Problems, Problem{Seq: max(firstSeq, 1), What: "altered",
						Detail: fmt.Sprintf("day %s: its %d entries from seq %d hash to %s, sealed was %d entries from seq %d with root %s",
							curDay, r.Size, firstSeq, r.Root, s.Size, s.FirstSeq, s.Root)})
				}
			}
			rep.Roots = append(rep.Roots, r)
			return nil
		}
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
				if err := closeTree(); err != nil {
					return err
				}
				curDay, leaves, firstSeq = e.Day, leaves[:0], e.Seq
			}
			if e.Index != uint64(len(leaves)) {
				rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "altered",
					Detail: fmt.Sprintf("day %s index %d where %d was due", e.Day, e.Index, len(leaves))})
			}
			leaves = append(leaves, e.LeafHash)
			if e.Body != nil {
				if p, bad := checkBody(corp, e); bad {
					rep.Problems = append(rep.Problems, p)
				}
			}
			prev, have = e, true
		}
	}
	if day == "" {
		// A tail cut off leaves no gap: the head still counts it.
		var next uint64
		err := l.db.QueryRowContext(ctx, "SELECT next_seq FROM ledger_heads WHERE corp_id = ?", corp).Scan(&next)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("ledger: verify %s: head: %w", corp, err)
		}
		if last := prev.Seq; err == nil && next != last+1 {
			rep.Problems = append(rep.Problems, Problem{Seq: last + 1, What: "deleted",
				Detail: fmt.Sprintf("the head says the ledger has %d entries, its last is seq %d", next-1, last)})
		}
	}
	if err := closeTree(); err != nil {
		return err
	}
	// A sealed day whose entries are all gone has no tree to close.
	seen := map[string]bool{}
	for _, r := range rep.Roots {
		seen[r.Day] = true
	}
	rows, err := l.db.QueryContext(ctx, "SELECT CAST(day AS CHAR), size, first_seq FROM ledger_roots WHERE corp_id = ? AND (? = '' OR day = ?) ORDER BY day", corp, day, day)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: roots: %w", corp, err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		var size, first uint64
		if err := rows.Scan(&d, &size, &first); err != nil {
			return fmt.Errorf("ledger: verify %s: roots: %w", corp, err)
		}
		if !seen[d] && size > 0 {
			rep.Problems = append(rep.Problems, Problem{Seq: first, What: "deleted",
				Detail: fmt.Sprintf("day %s was sealed with %d entries from seq %d and has none", d, size, first)})
		}
	}
	return rows.Err()
}

// checkBody compares an entry's body with its leaf hash and its row.
func checkBody(corp string, e Entry) (Problem, bool) {
	if LeafHash(e.Body) != e.LeafHash {
		return Problem{Seq: e.Seq, What: "altered", Detail: fmt.Sprintf("its body no longer hashes to its leaf hash %s (%s %s)", e.LeafHash, e.Kind, e.MsgID)}, true
	}
	var h bodyHead
	if err := json.Unmarshal(e.Body, &h); err != nil {
		return Problem{Seq: e.Seq, What: "altered", Detail: "its body is not JSON: " + err.Error()}, true
	}
	uidOK := (h.UID == nil && !e.Person) || (h.UID != nil && e.Person && *h.UID == int64(e.UID))
	if h.Corp != corp || h.Seq != e.Seq || h.Day != e.Day || h.Index != e.Index || h.Kind != e.Kind || h.MsgID != e.MsgID || !uidOK {
		return Problem{Seq: e.Seq, What: "altered", Detail: fmt.Sprintf("its row (seq %d, day %s, index %d, %s, msgid %s, uid %d) is not what its body says: %s",
			e.Seq, e.Day, e.Index, e.Kind, e.MsgID, e.UID, e.Body)}, true
	}
	return Problem{}, false
}

// genesis is when corp's ledger began (ledger_heads.started_at).
func (l *Ledger) genesis(ctx context.Context, corp string) (time.Time, bool, error) {
	var t time.Time
	err := l.db.QueryRowContext(ctx, "SELECT started_at FROM ledger_heads WHERE corp_id = ?", corp).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: verify %s: %w", corp, err)
	}
	return t, true, nil
}

type signalBody struct {
	ReadTime string `json:"read_time"`
	Source   int64  `json:"source"`
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
func (l *Ledger) verifySignals(ctx context.Context, corp, day string, rep *Report) error {
	gen, ok, err := l.genesis(ctx, corp)
	if err != nil || !ok {
		return err
	}
	type sig struct {
		key  readKey
		seq  uint64
		day  string
		body []byte
	}
	var sigs []sig
	blocks, err := readBlocks(ctx, l.db, corp, "AND kind = ?", string(KindSignal))
	if err != nil {
		return fmt.Errorf("ledger: verify %s: signal entries: %w", corp, err)
	}
	for _, b := range blocks {
		es, _ := b.entries()
		for _, e := range es {
			sigs = append(sigs, sig{key: readKey{e.MsgID, e.UID}, seq: e.Seq, day: e.Day, body: e.Body})
		}
	}
	slices.SortFunc(sigs, func(a, b sig) int {
		if c := a.key.less(b.key); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	// A material version under read_rule acknowledged makes every read
	// row unread again (tracker.Registry.ResetAcknowledged): a signal
	// entry followed by such a version's entry, before the next signal
	// entry of the same row, records a read that was reset, and needs no
	// read row.
	resets, err := l.reacknowledgements(ctx, corp)
	if err != nil {
		return err
	}
	superseded := make([]bool, len(sigs))
	for i, s := range sigs {
		next := ^uint64(0)
		if i+1 < len(sigs) && sigs[i+1].key == s.key {
			next = sigs[i+1].seq
		}
		superseded[i] = slices.ContainsFunc(resets[s.key.msgid], func(r uint64) bool { return r > s.seq && r < next })
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
	blocks, err := readBlocks(ctx, l.db, corp, "AND kind = ? ORDER BY first_seq", string(KindVersion))
	if err != nil {
		return nil, fmt.Errorf("ledger: verify %s: version entries: %w", corp, err)
	}
	out := map[string][]uint64{}
	for _, b := range blocks {
		es, _ := b.entries()
		for _, e := range es {
			var v struct {
				Reacknowledge bool `json:"reacknowledge"`
			}
			if e.Body != nil && json.Unmarshal(e.Body, &v) == nil && v.Reacknowledge {
				out[e.MsgID] = append(out[e.MsgID], e.Seq)
			}
		}
	}
	return out, nil
}

// messages returns the msgids of corp's notices that MySQL still has.
func (l *Ledger) messages(ctx context.Context, corp string) (map[string]bool, error) {
	rows, err := l.db.QueryContext(ctx, "SELECT msgid FROM messages WHERE corp_id = ?", corp)
	if err != nil {
		return nil, fmt.Errorf("ledger: verify %s: messages: %w", corp, err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var m string
		if err := rows.Scan(&m); err != nil {
			return nil, fmt.Errorf("ledger: verify %s: messages: %w", corp, err)
		}
		out[m] = true
	}
	return out, rows.Err()
}

// pageBody is what verifyPages compares of a page entry's body.
type pageBody struct {
	ReadTime  string `json:"read_time"`
	Source    int64  `json:"source"`
	Version   int64  `json:"version"`
	ClientIP  string `json:"ip"`
	UserAgent string `json:"ua"`
}

// verifyPages checks each page_signals row (a reading page's event)
// against its one page entry and each page entry against its row: seen
// at, IP and User-Agent. A row older than the ledger needs no entry; the
// entries of a notice purged whole, and forgotten ones, need no row.
func (l *Ledger) verifyPages(ctx context.Context, corp, day string, rep *Report) error {
	gen, ok, err := l.genesis(ctx, corp)
	if err != nil || !ok {
		return err
	}
	type key struct {
		msgid           string
		uid             uint32
		source, version int64
	}
	type ent struct {
		seq  uint64
		day  string
		body pageBody
	}
	entries := map[key]ent{}
	blocks, err := readBlocks(ctx, l.db, corp, "AND kind = ? ORDER BY first_seq", string(KindPage))
	if err != nil {
		return fmt.Errorf("ledger: verify %s: page entries: %w", corp, err)
	}
	for _, b := range blocks {
		es, _ := b.entries()
		for _, e := range es {
			var pb pageBody
			if e.Body == nil || json.Unmarshal(e.Body, &pb) != nil {
				continue // forgotten, or checkBody reports it
			}
			k := key{e.MsgID, e.UID, pb.Source, pb.Version}
			if first, dup := entries[k]; dup {
				if day == "" || e.Day == day {
					rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "inserted",
						Detail: fmt.Sprintf("a second page entry for %s uid %d source %d version %d (the first is entry %d)", k.msgid, k.uid, k.source, k.version, first.seq)})
				}
				continue
			}
			entries[k] = ent{e.Seq, e.Day, pb}
		}
	}
	rows, err := l.db.QueryContext(ctx, `SELECT msgid, uid, source, version, DATE_FORMAT(seen_at, '%Y-%m-%dT%H:%i:%sZ'), ip, user_agent, seen_at < ?
FROM page_signals WHERE corp_id = ?`, gen.UTC().Truncate(time.Second), corp)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: page rows: %w", corp, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k key
		var at, ip, ua string
		var older bool
		if err := rows.Scan(&k.msgid, &k.uid, &k.source, &k.version, &at, &ip, &ua, &older); err != nil {
			return fmt.Errorf("ledger: verify %s: page rows: %w", corp, err)
		}
		rep.Facts++
		e, ok := entries[k]
		delete(entries, k)
		switch {
		case !ok && day == "" && !older:
			rep.Problems = append(rep.Problems, Problem{What: "inserted",
				Detail: fmt.Sprintf("page_signals %s uid %d source %d version %d (seen %s) has no ledger entry", k.msgid, k.uid, k.source, k.version, at)})
		case ok && (day == "" || e.day == day) && (e.body.ReadTime != at || e.body.ClientIP != ip || e.body.UserAgent != ua):
			rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "altered",
				Detail: fmt.Sprintf("page_signals %s uid %d source %d version %d says seen %s from %q with %q; the entry says %s from %q with %q",
					k.msgid, k.uid, k.source, k.version, at, ip, ua, e.body.ReadTime, e.body.ClientIP, e.body.UserAgent)})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: verify %s: page rows: %w", corp, err)
	}
	live, err := l.messages(ctx, corp)
	if err != nil {
		return err
	}
	for k, e := range entries {
		if live[k.msgid] && (day == "" || e.day == day) {
			rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "deleted",
				Detail: fmt.Sprintf("it records a page event of %s by uid %d (source %d, version %d) that page_signals no longer has", k.msgid, k.uid, k.source, k.version)})
		}
	}
	return nil
}

type sendBody struct {
	Batch      int64  `json:"batch"`
	At         string `json:"at"`
	ErrCode    int64  `json:"errcode"`
	WeComMsgID string `json:"wecom_msgid"`
	Invalid    bool   `json:"invalid"`
	Unlicensed bool   `json:"unlicensed"`
	UserID     string `json:"userid"`
}

// verifySends checks each send and reminder entry against its batch row
// in message_sends: the batch was recorded, with the entry's errcode and
// WeCom msgid, and the entry's invalid and unlicensed flags agree with
// the row's invaliduser and unlicenseduser lists.
func (l *Ledger) verifySends(ctx context.Context, corp, day string, rep *Report) error {
	where, args := "AND kind IN (?, ?)", []any{string(KindSend), string(KindReminder)}
	if day != "" {
		where += " AND day = ?"
		args = append(args, day)
	}
	blocks, err := readBlocks(ctx, l.db, corp, where+" ORDER BY first_seq", args...)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: send entries: %w", corp, err)
	}
	type batchKey struct {
		msgid, kind string
		batch       int64
		at          string
	}
	type batchRow struct {
		errcode    int64
		wmsg       string
		invalid    map[string]bool
		unlicensed map[string]bool
		found      bool
	}
	cache := map[batchKey]*batchRow{}
	type pending struct {
		seq  uint64
		key  batchKey
		body sendBody
	}
	var todo []pending
	for _, bl := range blocks {
		es, _ := bl.entries()
		for _, e := range es {
			if e.Body == nil {
				continue
			}
			var b sendBody
			if err := json.Unmarshal(e.Body, &b); err != nil {
				continue // checkBody reports it
			}
			k := batchKey{msgid: e.MsgID, kind: "send", batch: b.Batch, at: b.At}
			if e.Kind == KindReminder {
				k.kind = "remind"
			}
			todo = append(todo, pending{e.Seq, k, b})
		}
	}
	for _, p := range todo {
		r, ok := cache[p.key]
		if !ok {
			r = &batchRow{}
			at, err := time.Parse(time.RFC3339Nano, p.key.at)
			if err == nil {
				var inv, unl sql.NullString
				err = l.db.QueryRowContext(ctx, "SELECT errcode, COALESCE(wecom_msgid, ''), invalid, unlicensed FROM message_sends"+
					" WHERE corp_id = ? AND msgid = ? AND kind = ? AND batch = ? AND sent_at = ?",
					corp, p.key.msgid, p.key.kind, p.key.batch, at.UTC()).Scan(&r.errcode, &r.wmsg, &inv, &unl)
				switch {
				case errors.Is(err, sql.ErrNoRows):
				case err != nil:
					return fmt.Errorf("ledger: verify %s: send rows: %w", corp, err)
				default:
					r.found = true
					r.invalid = map[string]bool{}
					for _, u := range bytes.Split([]byte(inv.String), []byte("|")) {
						r.invalid[string(u)] = true
					}
					r.unlicensed = map[string]bool{}
					for _, u := range bytes.Split([]byte(unl.String), []byte("|")) {
						r.unlicensed[string(u)] = true
					}
				}
			}
			cache[p.key] = r
			rep.Facts++
		}
		switch {
		case !r.found:
			rep.Problems = append(rep.Problems, Problem{Seq: p.seq, What: "deleted",
				Detail: fmt.Sprintf("its batch %d of %s sent at %s is not in message_sends", p.key.batch, p.key.msgid, p.key.at)})
		case r.errcode != p.body.ErrCode || r.wmsg != p.body.WeComMsgID || r.invalid[p.body.UserID] != p.body.Invalid ||
			r.unlicensed[p.body.UserID] != p.body.Unlicensed:
			rep.Problems = append(rep.Problems, Problem{Seq: p.seq, What: "altered",
				Detail: fmt.Sprintf("message_sends batch %d of %s: errcode %d, msgid %q, %s invalid %v unlicensed %v; the entry says errcode %d, msgid %q, invalid %v, unlicensed %v",
					p.key.batch, p.key.msgid, r.errcode, r.wmsg, p.body.UserID, r.invalid[p.body.UserID], r.unlicensed[p.body.UserID],
					p.body.ErrCode, p.body.WeComMsgID, p.body.Invalid, p.body.Unlicensed)})
		}
	}
	return nil
}

// verifyVersions checks each version entry against notice_versions (its
// sha256) and each version stored since the ledger began against its
// entry.
func (l *Ledger) verifyVersions(ctx context.Context, corp, day string, rep *Report) error {
	gen, ok, err := l.genesis(ctx, corp)
	if err != nil || !ok {
		return err
	}
	blocks, err := readBlocks(ctx, l.db, corp, "AND kind = ?", string(KindVersion))
	if err != nil {
		return fmt.Errorf("ledger: verify %s: version entries: %w", corp, err)
	}
	type key struct {
		msgid string
		n     int64
	}
	type ent struct {
		seq  uint64
		day  string
		hash string
	}
	entries := map[key]ent{}
	for _, b := range blocks {
		es, _ := b.entries()
		for _, e := range es {
			var v struct {
				Version int64  `json:"version"`
				SHA256  string `json:"sha256"`
			}
			if e.Body == nil || json.Unmarshal(e.Body, &v) != nil {
				continue
			}
			entries[key{e.MsgID, v.Version}] = ent{e.Seq, e.Day, v.SHA256}
		}
	}
	rows, err := l.db.QueryContext(ctx, "SELECT msgid, version, LOWER(HEX(sha256)), created_at >= ? FROM notice_versions WHERE corp_id = ?", gen.UTC(), corp)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: versions: %w", corp, err)
	}
	defer rows.Close()
	for rows.Next() {
		var k key
		var sum string
		var since bool
		if err := rows.Scan(&k.msgid, &k.n, &sum, &since); err != nil {
			return fmt.Errorf("ledger: verify %s: versions: %w", corp, err)
		}
		rep.Facts++
		e, ok := entries[k]
		delete(entries, k)
		switch {
		case !ok && since && day == "":
			rep.Problems = append(rep.Problems, Problem{What: "inserted",
				Detail: fmt.Sprintf("notice_versions %s v%d has no ledger entry", k.msgid, k.n)})
		case ok && e.hash != sum && (day == "" || e.day == day):
			rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "altered",
				Detail: fmt.Sprintf("notice_versions %s v%d has sha256 %s; the entry says %s", k.msgid, k.n, sum, e.hash)})
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: verify %s: versions: %w", corp, err)
	}
	live, err := l.messages(ctx, corp)
	if err != nil {
		return err
	}
	for k, e := range entries {
		if live[k.msgid] && (day == "" || e.day == day) {
			rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "deleted",
				Detail: fmt.Sprintf("it records version %d of %s, which notice_versions no longer has", k.n, k.msgid)})
		}
	}
	return nil
}
