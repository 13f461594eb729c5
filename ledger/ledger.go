// Package ledger is yidu's evidence ledger (issue 40 item 2): an
// append-only log per corp of every fact that makes evidence, written by
// the process that makes the fact durable in the same transaction as the
// fact, and hashed into one RFC 6962 Merkle tree per corp per Asia/Shanghai
// calendar day. docs/evidence.md gives the byte layout and the checks, so
// an auditor can verify a proof without yidu.
package ledger

import (
	"context"
	"crypto/x509"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/opt"
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
var Zone = yidu.Shanghai

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

// DayRoot is the head of one day's tree of a corp, as the ledger hashed
// its days before it became one log per corp (issue 48): Verify still
// recomputes the days sealed then (ledger_roots) and compares them.
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
	// Signer signs the log's checkpoints (ParseSigningKey; nil: they
	// are kept unsigned, and no evidence pack checks against them).
	Signer note.Signer
	// Verifier checks checkpoints' signatures in Verify (nil: the
	// Signer's own key, if any).
	Verifier note.Verifier
	// Stamper timestamps each day's checkpoint (RFC 3161; nil: none).
	Stamper Stamper
	// TSARoots: Verify also requires each stored TSA token's certificate
	// to chain to one of these (nil: the token's signature is checked
	// with the certificate it carries, which is not checked further).
	TSARoots *x509.CertPool
}

// Ledger reads, seals and appends to the ledgers in db.
type Ledger struct {
	db       *sql.DB
	now      func() time.Time
	audit    audit.Recorder
	log      *slog.Logger
	signer   note.Signer
	verifier note.Verifier
	stamper  Stamper
	tsaRoots *x509.CertPool

	mu   sync.Mutex
	tree *cachedTree
}

// New returns the ledger over db.
func New(db *sql.DB, opts Options) (*Ledger, error) {
	if db == nil {
		return nil, errors.New("ledger: db is required")
	}
	opt.Clock(&opts.Now)
	opt.Logger(&opts.Logger)
	l := &Ledger{db: db, now: opts.Now, audit: opts.Audit, log: opts.Logger.With("component", "ledger"),
		signer: opts.Signer, verifier: opts.Verifier, stamper: opts.Stamper, tsaRoots: opts.TSARoots}
	if l.verifier == nil && l.signer != nil {
		if v, ok := l.signer.(interface{ Verifier() note.Verifier }); ok {
			l.verifier = v.Verifier()
		}
	}
	return l, nil
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
	es, err := l.EntriesOf(ctx, corp, msgID)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, e := range es {
		if !e.Person || e.UID == uid {
			if e.Person {
				e.UserID = userID
			}
			out = append(out, e)
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

// logLeaves returns the leaf hashes of corp's log from entry from+1 up to
// entry to (to 0: the last), in log order; an error when the stored
// blocks leave a gap or overlap (verify names the entry).
func logLeaves(ctx context.Context, q queryer, corp string, from, to uint64) ([]Hash, error) {
	where, args := "AND first_seq > ?", []any{corp, from}
	if to > 0 {
		where += " AND first_seq <= ?"
		args = append(args, to)
	}
	rows, err := q.QueryContext(ctx, "SELECT first_seq, leaves FROM ledger_blocks WHERE corp_id = ? "+where+" ORDER BY first_seq", args...)
	if err != nil {
		return nil, fmt.Errorf("ledger: leaves of %s: %w", corp, err)
	}
	defer rows.Close()
	var leaves []Hash
	next := from + 1
	for rows.Next() {
		var seq uint64
		var b []byte
		if err := rows.Scan(&seq, &b); err != nil {
			return nil, fmt.Errorf("ledger: leaves of %s: %w", corp, err)
		}
		if seq != next {
			return nil, fmt.Errorf("ledger: leaves of %s: entry %d follows %d: %w", corp, seq, next-1, ErrTampered)
		}
		for i := 0; i+len(Hash{}) <= len(b); i += len(Hash{}) {
			leaves = append(leaves, Hash(b[i:i+len(Hash{})]))
		}
		next = from + 1 + uint64(len(leaves))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ledger: leaves of %s: %w", corp, err)
	}
	if to > 0 {
		if uint64(len(leaves)) < to-from {
			return nil, fmt.Errorf("ledger: leaves of %s: %d entries after %d, %d wanted: %w", corp, len(leaves), from, to-from, ErrTampered)
		}
		leaves = leaves[:to-from]
	}
	return leaves, nil
}

// Tree returns corp's log as a Tree of its first size entries (0: all of
// them). The last tree read is kept: the leaves never change (Forget
// keeps them), so a ZIP's proofs read the log once.
func (l *Ledger) Tree(ctx context.Context, corp string, size uint64) (*Tree, error) {
	l.mu.Lock()
	c := l.tree
	l.mu.Unlock()
	if c != nil && c.corp == corp && size > 0 && c.t.Size() >= size {
		return c.t, nil
	}
	leaves, err := logLeaves(ctx, l.db, corp, 0, size)
	if err != nil {
		return nil, err
	}
	t := NewTree(leaves)
	l.mu.Lock()
	l.tree = &cachedTree{corp: corp, t: t}
	l.mu.Unlock()
	return t, nil
}

type cachedTree struct {
	corp string
	t    *Tree
}

// Prove returns the inclusion proof of entry seq of corp in its log:
// against the newest checkpoint once one covers it, against the log as
// it stands otherwise (Proof.Checkpoint empty).
func (l *Ledger) Prove(ctx context.Context, corp string, seq uint64) (Proof, error) {
	if seq == 0 {
		return Proof{}, fmt.Errorf("ledger: entry 0 of %s: %w", corp, ErrNotFound)
	}
	cp, ok, err := l.LatestCheckpoint(ctx, corp)
	if err != nil {
		return Proof{}, err
	}
	if ok && cp.Size >= seq {
		return l.ProveAt(ctx, cp, seq)
	}
	// The entry came after the newest checkpoint (a pack made while
	// facts arrive, before the minute's checkpoint): take one now, so
	// its proof still leads to a signed checkpoint.
	if cp, err = l.Checkpoint(ctx, corp); err == nil && cp.Size >= seq {
		return l.ProveAt(ctx, cp, seq)
	} else if err != nil && !errors.Is(err, ErrNotFound) {
		return Proof{}, err
	}
	var next uint64
	if err := l.db.QueryRowContext(ctx, "SELECT next_seq FROM ledger_heads WHERE corp_id = ?", corp).Scan(&next); err != nil {
		return Proof{}, fmt.Errorf("ledger: head of %s: %w", corp, err)
	}
	t, err := l.Tree(ctx, corp, next-1)
	if err != nil {
		return Proof{}, err
	}
	root, err := t.Root(next - 1)
	if err != nil {
		return Proof{}, err
	}
	path, err := t.Inclusion(seq-1, next-1)
	if err != nil {
		return Proof{}, err
	}
	return Proof{Index: seq - 1, TreeSize: next - 1, Root: root, Path: path}, nil
}

// ProveAt returns the inclusion proof of entry seq against checkpoint
// cp. ErrTampered: the stored leaves no longer hash to cp's root.
func (l *Ledger) ProveAt(ctx context.Context, cp Checkpoint, seq uint64) (Proof, error) {
	if seq == 0 || seq > cp.Size {
		return Proof{}, fmt.Errorf("ledger: entry %d of %s in a checkpoint of %d: %w", seq, cp.Corp, cp.Size, ErrNotFound)
	}
	t, err := l.Tree(ctx, cp.Corp, cp.Size)
	if err != nil {
		return Proof{}, err
	}
	root, err := t.Root(cp.Size)
	if err != nil {
		return Proof{}, err
	}
	if root != cp.Root {
		return Proof{}, fmt.Errorf("ledger: %s at %d: %w", cp.Corp, cp.Size, ErrTampered)
	}
	path, err := t.Inclusion(seq-1, cp.Size)
	if err != nil {
		return Proof{}, err
	}
	return Proof{Index: seq - 1, TreeSize: cp.Size, Root: cp.Root, Path: path, Checkpoint: cp.Note}, nil
}

// sealed is the legacy root of a day sealed before the log was one tree
// per corp (ledger_roots), nil for any other day.
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
