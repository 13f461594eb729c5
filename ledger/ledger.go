// Package ledger is yidu's evidence ledger (issue 40 item 2): an
// append-only log per corp of every fact that makes evidence, written by
// the process that makes the fact durable in the same transaction as the
// fact, and hashed into one RFC 6962 Merkle tree per corp per Asia/Shanghai
// calendar day. docs/evidence.md gives the byte layout and the checks, so
// an auditor can verify a proof without yidu.
package ledger

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
)

// Errors the ledger returns.
var (
	// ErrInvalid: a fact the ledger cannot write (unknown kind, a body
	// member without canonical form).
	ErrInvalid = errors.New("ledger: invalid fact")
	// ErrNotFound: no such entry, person or day.
	ErrNotFound = errors.New("ledger: not found")
	// ErrTampered: the stored entries no longer hash to what was sealed.
	ErrTampered = errors.New("ledger: entries do not match the sealed root")
	// ErrNotEnded: a day cannot be sealed before it ends.
	ErrNotEnded = errors.New("ledger: the day has not ended")
)

// Zone is the ledger's calendar: China Standard Time, UTC+8 all year (no
// daylight saving since 1991), so no time zone database is needed.
var Zone = time.FixedZone("Asia/Shanghai", 8*3600)

// Day is t's calendar day in Zone, YYYY-MM-DD.
func Day(t time.Time) string { return t.In(Zone).Format(time.DateOnly) }

// Tx is the transaction an entry is appended in: the one that makes its
// fact durable (*sql.Tx).
type Tx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Entry is one ledger entry.
type Entry struct {
	Corp string `json:"corp"`
	// Seq is the entry's number in its corp's ledger: 1, 2, … without gaps.
	Seq uint64 `json:"seq"`
	// Day and Index are the entry's tree and leaf position in it.
	Day   string `json:"day"`
	Index uint64 `json:"index"`
	Kind  Kind   `json:"kind"`
	MsgID string `json:"msgid"`
	// UID is the recipient's uid; Person is false for an entry of the
	// whole message (a version, a recall).
	UID    uint32 `json:"uid"`
	Person bool   `json:"person"`
	// UserID is set by EntriesFor (the person asked for).
	UserID string `json:"userid,omitempty"`
	// Body is the canonical JSON the leaf hash covers; nil once
	// anonymised.
	Body     []byte `json:"-"`
	LeafHash Hash   `json:"leaf_hash"`
}

// DayRoot is a day's tree head.
type DayRoot struct {
	Corp     string `json:"corp"`
	Day      string `json:"day"`
	Size     uint64 `json:"size"`
	Root     Hash   `json:"root"`
	FirstSeq uint64 `json:"first_seq"`
	// Sealed: the day ended and Root was recorded (ledger_roots and the
	// audit log) at SealedAt; otherwise Root is today's tree as it stands.
	Sealed   bool      `json:"sealed"`
	SealedAt time.Time `json:"sealed_at,omitzero"`
}

// Options configure a Ledger.
type Options struct {
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Audit records each sealed root (nil: not recorded).
	Audit audit.Recorder
	// Logger (nil: discarded).
	Logger *slog.Logger
}

// Ledger reads, seals and appends to the ledgers in db.
type Ledger struct {
	db    *sql.DB
	now   func() time.Time
	audit audit.Recorder
	log   *slog.Logger
}

// New returns the ledger over db.
func New(db *sql.DB, opts Options) (*Ledger, error) {
	if db == nil {
		return nil, errors.New("ledger: db is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Ledger{db: db, now: opts.Now, audit: opts.Audit, log: opts.Logger.With("component", "ledger")}, nil
}

// Append writes facts of corp as the next entries of its ledger, in tx:
// the transaction that makes the facts durable, so they and their entries
// commit or vanish together. It locks the corp's ledger_heads row until tx
// ends, so it should be the last thing tx does before COMMIT (every
// writer takes that lock last, which keeps lock orders acyclic and the
// time concurrent writers wait short). It returns the first entry's seq
// (0 when facts is empty).
func (l *Ledger) Append(ctx context.Context, tx Tx, corp string, facts []Fact) (uint64, error) {
	return Append(ctx, tx, l.now(), corp, facts)
}

// Append is Ledger.Append with the time now given.
func Append(ctx context.Context, tx Tx, now time.Time, corp string, facts []Fact) (uint64, error) {
	if len(facts) == 0 {
		return 0, nil
	}
	if !yidu.CorpID(corp).Valid() {
		return 0, fmt.Errorf("ledger: corp %q: %w", yidu.Truncate(corp, 70), ErrInvalid)
	}
	for _, f := range facts {
		if err := f.check(); err != nil {
			return 0, err
		}
	}
	today := Day(now)
	// The no-op update takes the row's exclusive lock when it exists and
	// creates it when it does not; the locking read then sees the newest
	// committed head.
	if _, err := tx.ExecContext(ctx, "INSERT INTO ledger_heads (corp_id, next_seq, day, day_size, started_at) VALUES (?, 1, ?, 0, ?)"+
		" ON DUPLICATE KEY UPDATE next_seq = next_seq", corp, today, now.UTC()); err != nil {
		return 0, fmt.Errorf("ledger: lock head of %s: %w", corp, err)
	}
	var next, size uint64
	var day string
	if err := tx.QueryRowContext(ctx, "SELECT next_seq, CAST(day AS CHAR), day_size FROM ledger_heads WHERE corp_id = ? FOR UPDATE",
		corp).Scan(&next, &day, &size); err != nil {
		return 0, fmt.Errorf("ledger: read head of %s: %w", corp, err)
	}
	if today > day {
		day, size = today, 0
	}
	first := next
	for _, g := range groups(facts) {
		b := block{corp: corp, firstSeq: next, day: day, firstIndex: size, kind: g[0].Kind, msgID: g[0].MsgID, count: len(g)}
		b.leaves = make([]byte, 0, len(g)*len(Hash{}))
		packed := packable(g)
		if packed {
			b.bodies = make([]byte, 1, 1+packedSize*len(g))
			b.bodies[0] = packedSignals
		} else {
			b.bodies = make([]byte, 0, len(g)*(190+len(corp)+len(b.msgID)))
		}
		if g[0].Person {
			b.uids = make([]byte, 0, 4*len(g))
		}
		var scratch []byte
		var pp packedPrefix
		if packed {
			if err := pp.init(corp, day, g[0].MsgID); err != nil {
				return 0, err
			}
		}
		for i, f := range g {
			var body []byte
			var err error
			if packed {
				// The body is hashed, not stored: entries rebuilds it
				// from the packed read time and source.
				scratch = pp.appendBody(scratch[:0], next, size, &f.signal)
				body = scratch
				b.bodies = binary.BigEndian.AppendUint32(b.bodies, uint32(f.signal.ReadTime.Unix()))
				b.bodies = append(b.bodies, f.signal.Source)
			} else {
				if i > 0 {
					b.bodies = append(b.bodies, '\n')
				}
				start := len(b.bodies)
				b.bodies, err = appendBody(b.bodies, corp, next, day, size, f)
				body = b.bodies[start:]
			}
			if err != nil {
				return 0, err
			}
			leaf := LeafHash(body)
			b.leaves = append(b.leaves, leaf[:]...)
			if f.Person {
				b.uids = binary.BigEndian.AppendUint32(b.uids, f.UID)
			}
			next++
			size++
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO ledger_blocks (corp_id, first_seq, count, day, first_index, kind, msgid, uids, bodies, leaves)"+
			" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", corp, b.firstSeq, b.count, day, b.firstIndex, string(b.kind), b.msgID,
			nonNil(b.uids), b.bodies, b.leaves); err != nil {
			return 0, fmt.Errorf("ledger: append %d entries of %s: %w", b.count, corp, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE ledger_heads SET next_seq = ?, day = ?, day_size = ? WHERE corp_id = ?",
		next, day, size, corp); err != nil {
		return 0, fmt.Errorf("ledger: advance head of %s: %w", corp, err)
	}
	return first, nil
}

// appendBody appends f's canonical body at its place to dst.
func appendBody(dst []byte, corp string, seq uint64, day string, index uint64, f Fact) ([]byte, error) {
	if f.isSignal {
		return f.signal.appendBody(dst, f.Kind, corp, seq, day, index)
	}
	b, err := entryBody(corp, seq, day, index, f)
	return append(dst, b...), err
}

// entryBody is f's canonical body at its place.
func entryBody(corp string, seq uint64, day string, index uint64, f Fact) ([]byte, error) {
	b := make(Body, len(f.Body)+len(reserved))
	for k, v := range f.Body {
		b[k] = v
	}
	b["corp"], b["seq"], b["day"], b["index"], b["kind"] = corp, seq, day, index, string(f.Kind)
	body, err := Canonical(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s entry: %w", ErrInvalid, f.Kind, err)
	}
	return body, nil
}

// EntriesFor returns, in seq order, the entries of notice msgID about the
// person userID (sends, reminders, signals) and those of the whole notice
// (versions, recall). ErrNotFound: corp has no such UserID.
func (l *Ledger) EntriesFor(ctx context.Context, corp, msgID, userID string) ([]Entry, error) {
	var uid uint32
	err := l.db.QueryRowContext(ctx, "SELECT uid FROM users WHERE corp_id = ? AND userid = ?", corp, userID).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ledger: %s of %s: %w", userID, corp, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: uid of %s: %w", userID, err)
	}
	blocks, err := readBlocks(ctx, l.db, corp, "AND msgid = ? ORDER BY first_seq", msgID)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, b := range blocks {
		es, _ := b.entries()
		for _, e := range es {
			if !e.Person || e.UID == uid {
				if e.Person {
					e.UserID = userID
				}
				out = append(out, e)
			}
		}
	}
	return out, nil
}

// EntriesOf returns every entry of notice msgID in seq order, in one read:
// for building many people's evidence at once (a ZIP), where EntriesFor
// per person would read the notice's blocks once each. Entries about a
// person have UID set and UserID empty.
func (l *Ledger) EntriesOf(ctx context.Context, corp, msgID string) ([]Entry, error) {
	blocks, err := readBlocks(ctx, l.db, corp, "AND msgid = ? ORDER BY first_seq", msgID)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, b := range blocks {
		es, _ := b.entries()
		out = append(out, es...)
	}
	return out, nil
}

// Entry returns entry seq of corp.
func (l *Ledger) Entry(ctx context.Context, corp string, seq uint64) (Entry, error) {
	blocks, err := readBlocks(ctx, l.db, corp, "AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1", seq)
	if err != nil {
		return Entry{}, err
	}
	if len(blocks) == 1 {
		es, _ := blocks[0].entries()
		if i := seq - blocks[0].firstSeq; i < uint64(len(es)) {
			return es[i], nil
		}
	}
	return Entry{}, fmt.Errorf("ledger: entry %d of %s: %w", seq, corp, ErrNotFound)
}

// Tree is one day's tree of a corp: its leaves as stored and, once
// sealed, the recorded head. Make one with DayTree to prove many entries
// of a day (an evidence ZIP) for one read of its leaves.
type Tree struct {
	Corp, Day string
	// Leaves are the leaf hashes in day_index order; FirstSeq the seq of
	// the first.
	Leaves   []Hash
	FirstSeq uint64
	// Sealed is the recorded head, nil for a day not sealed.
	Sealed *DayRoot
}

// Head returns the tree's head: the sealed one, or the head of the
// leaves as they stand.
func (t *Tree) Head() DayRoot {
	if t.Sealed != nil {
		return *t.Sealed
	}
	return DayRoot{Corp: t.Corp, Day: t.Day, Size: uint64(len(t.Leaves)), Root: Root(t.Leaves), FirstSeq: t.FirstSeq}
}

// Prove returns the inclusion proof of the leaf at index against Head.
// ErrTampered: the day was sealed and its stored leaves no longer hash to
// the sealed root (verify names the entry).
func (t *Tree) Prove(index uint64) (Proof, error) {
	h := t.Head()
	if index >= h.Size || h.Size > uint64(len(t.Leaves)) {
		return Proof{}, fmt.Errorf("ledger: leaf %d of %s %s (%d leaves, head of %d): %w", index, t.Corp, t.Day, len(t.Leaves), h.Size, ErrNotFound)
	}
	leaves := t.Leaves[:h.Size]
	if t.Sealed != nil && Root(leaves) != t.Sealed.Root {
		return Proof{}, fmt.Errorf("ledger: %s %s: %w", t.Corp, t.Day, ErrTampered)
	}
	path, err := InclusionPath(leaves, index)
	if err != nil {
		return Proof{}, err
	}
	return Proof{Day: t.Day, Index: index, TreeSize: h.Size, Root: h.Root, Path: path}, nil
}

// DayTree reads the tree of corp's day (YYYY-MM-DD).
func (l *Ledger) DayTree(ctx context.Context, corp, day string) (*Tree, error) {
	t := &Tree{Corp: corp, Day: day}
	var err error
	if t.Leaves, t.FirstSeq, err = dayLeaves(ctx, l.db, corp, day); err != nil {
		return nil, err
	}
	sealed, err := l.sealed(ctx, corp, day)
	if err != nil {
		return nil, err
	}
	t.Sealed = sealed
	return t, nil
}

func (l *Ledger) sealed(ctx context.Context, corp, day string) (*DayRoot, error) {
	r := DayRoot{Corp: corp, Day: day, Sealed: true}
	var root []byte
	err := l.db.QueryRowContext(ctx, "SELECT size, root, first_seq, sealed_at FROM ledger_roots WHERE corp_id = ? AND day = ?",
		corp, day).Scan(&r.Size, &root, &r.FirstSeq, &r.SealedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: sealed root of %s %s: %w", corp, day, err)
	}
	copy(r.Root[:], root)
	return &r, nil
}

// Prove returns the inclusion proof of entry seq of corp in its day's
// tree: against the sealed root once the day is sealed, against today's
// head as it stands otherwise.
func (l *Ledger) Prove(ctx context.Context, corp string, seq uint64) (Proof, error) {
	e, err := l.Entry(ctx, corp, seq)
	if err != nil {
		return Proof{}, err
	}
	day, index := e.Day, e.Index
	t, err := l.DayTree(ctx, corp, day)
	if err != nil {
		return Proof{}, err
	}
	return t.Prove(index)
}

// Root returns corp's head of day: the sealed root, or, for a day not
// sealed (today), the head of its entries as they stand.
func (l *Ledger) Root(ctx context.Context, corp, day string) (DayRoot, error) {
	if _, err := time.Parse(time.DateOnly, day); err != nil {
		return DayRoot{}, fmt.Errorf("ledger: day %q: %w", day, ErrInvalid)
	}
	s, err := l.sealed(ctx, corp, day)
	if err != nil || s != nil {
		return derefRoot(s), err
	}
	t, err := l.DayTree(ctx, corp, day)
	if err != nil {
		return DayRoot{}, err
	}
	return t.Head(), nil
}

func derefRoot(r *DayRoot) DayRoot {
	if r == nil {
		return DayRoot{}
	}
	return *r
}
