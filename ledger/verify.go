package ledger

import (
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
	// Checkpoints are the corp's checkpoints checked (whole log only).
	Checkpoints []Checkpoint
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
	gen, started, err := l.genesis(ctx, corp)
	if err != nil {
		return rep, err
	}
	// The facts written since corp's ledger began (genesis) are checked
	// against their entries; none when it has not begun.
	sinceGenesis := func(check func(ctx context.Context, corp, day string, gen time.Time, rep *Report) error) func(ctx context.Context, corp, day string, rep *Report) error {
		return func(ctx context.Context, corp, day string, rep *Report) error {
			if !started {
				return nil
			}
			return check(ctx, corp, day, gen, rep)
		}
	}
	checks := []func(ctx context.Context, corp, day string, rep *Report) error{
		l.verifyTrees, sinceGenesis(l.verifySignals), sinceGenesis(l.verifyPages), l.verifySends, sinceGenesis(l.verifyVersions), sinceGenesis(l.verifySeen),
		func(ctx context.Context, corp, _ string, rep *Report) error { return l.verifyContent(ctx, corp, rep) },
		sinceGenesis(l.verifyActs),
	}
	for _, check := range checks {
		if err := check(ctx, corp, day, &rep); err != nil {
			return rep, err
		}
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

// messages returns the msgids of corp's notices that MySQL still has.
func (l *Ledger) messages(ctx context.Context, corp string) (map[string]bool, error) {
	return l.msgids(ctx, corp, "messages", "SELECT msgid FROM messages WHERE corp_id = ?")
}

// msgids returns the set of msgids query selects for corp; what names
// them in the error.
func (l *Ledger) msgids(ctx context.Context, corp, what, query string) (map[string]bool, error) {
	out := map[string]bool{}
	err := l.scanRows(ctx, corp, what, query, []any{corp}, func(rows *sql.Rows) error {
		var m string
		if err := rows.Scan(&m); err != nil {
			return err
		}
		out[m] = true
		return nil
	})
	return out, err
}

// entries reads corp's entries that where selects (see readBlocks), in
// block order; what names them in the error. A block whose parts do not
// add up yields what its leaves allow (verifyTrees reports it).
func (l *Ledger) entries(ctx context.Context, corp, what, where string, args ...any) ([]Entry, error) {
	blocks, err := readBlocks(ctx, l.db, corp, where, args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: verify %s: %s: %w", corp, what, err)
	}
	var out []Entry
	for _, b := range blocks {
		es, _ := b.entries()
		out = append(out, es...)
	}
	return out, nil
}

// scanRows runs query and hands each row to scan; what names the rows in
// the error.
func (l *Ledger) scanRows(ctx context.Context, corp, what, query string, args []any, scan func(*sql.Rows) error) error {
	rows, err := l.db.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("ledger: verify %s: %s: %w", corp, what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("ledger: verify %s: %s: %w", corp, what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("ledger: verify %s: %s: %w", corp, what, err)
	}
	return nil
}

// onDay says whether an entry of entryDay is within a check of day ("":
// the whole log).
func onDay(day, entryDay string) bool {
	return day == "" || entryDay == day
}

// noticeKey is the key of a fact a check matches with its entry: it
// names the notice it is about.
type noticeKey interface {
	comparable
	notice() string
}

// placed is where an entry a check keeps stands: its seq and day. The
// checks' entry types embed it.
type placed struct {
	seq uint64
	day string
}

func (p placed) place() placed { return p }

// located is an entry type that embeds placed.
type located interface{ place() placed }

// reportGone reports "deleted" each entry left over once every row was
// matched (left: its row is gone) whose notice MySQL still keeps and
// that is on day: the entries of a notice purged whole (yidu archive
// purge) stay, as hashes of a history. detail says what the entry
// records.
func reportGone[K noticeKey, E located](ctx context.Context, l *Ledger, corp, day string, rep *Report, left map[K]E, detail func(K, E) string) error {
	live, err := l.messages(ctx, corp)
	if err != nil {
		return err
	}
	for k, e := range left {
		if p := e.place(); live[k.notice()] && onDay(day, p.day) {
			rep.Problems = append(rep.Problems, Problem{Seq: p.seq, What: "deleted", Detail: detail(k, e)})
		}
	}
	return nil
}
