package ledger

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/yidu-io/yidu/internal/sqlrows"
	"golang.org/x/mod/sumdb/note"
)

// ErrSignature: a checkpoint's signature does not verify with the log's
// key, or the note does not say what its row says.
var ErrSignature = errors.New("ledger: checkpoint signature does not verify")

// Checkpoint is a statement of a corp's log: its size and root at a
// moment, signed with the log's key (C2SP tlog-checkpoint: a signed note
// whose text is the origin, the size and the root in base64, one a
// line). A checkpoint of a size commits to every entry before it: a
// later checkpoint's consistency proof shows the log only grew.
type Checkpoint struct {
	Corp   string `json:"corp"`
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Root   Hash   `json:"root"`
	// Day is the Asia/Shanghai day the checkpoint closes (the last entry
	// of that day is its last), "" for one taken while entries arrive.
	Day string    `json:"day,omitempty"`
	At  time.Time `json:"at"`
	// Note is the signed note (the checkpoint's text and the signature
	// lines); without a signing key its text alone.
	Note string `json:"note"`
	// Timestamp is the RFC 3161 token of a day's checkpoint (DER), nil
	// when none was obtained.
	Timestamp []byte `json:"timestamp,omitempty"`
}

// Stamper obtains an RFC 3161 timestamp token over a digest (a TSA).
type Stamper interface {
	Stamp(ctx context.Context, sha256 []byte) ([]byte, error)
}

// signingKey is a Signer that knows its Verifier.
type signingKey struct {
	note.Signer
	v note.Verifier
}

func (k signingKey) Verifier() note.Verifier { return k.v }

// ParseSigningKey parses a note signing key (PRIVATE+KEY+name+hash+…,
// as GenerateKey makes: Ed25519) and returns its signer and its public
// verifier key (name+hash+…), which is what an auditor needs.
func ParseSigningKey(skey string) (note.Signer, string, error) {
	skey = strings.TrimSpace(skey)
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, "", fmt.Errorf("ledger: signing key: %w", err)
	}
	// PRIVATE+KEY+name+hash+base64: the base64 may hold '+' itself.
	parts := strings.SplitN(strings.TrimPrefix(skey, "PRIVATE+KEY+"), "+", 3)
	if len(parts) != 3 {
		return nil, "", errors.New("ledger: signing key: not a note signing key")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, "", errors.New("ledger: signing key: not an Ed25519 note key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return nil, "", fmt.Errorf("ledger: verifier key: %w", err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, "", fmt.Errorf("ledger: verifier key: %w", err)
	}
	return signingKey{Signer: s, v: v}, vkey, nil
}

// Origin is the checkpoint origin of corp's log under a key named name:
// "name/corp" ("yidu/corp" without a key).
func Origin(name, corp string) string {
	if name == "" {
		name = "yidu"
	}
	return name + "/" + corp
}

func (l *Ledger) origin(corp string) string {
	if l.signer == nil {
		return Origin("", corp)
	}
	return Origin(l.signer.Name(), corp)
}

// OpenCheckpoint checks a signed checkpoint with v (note.Open: the
// signature of v's key must be there and verify) and parses it. origin ""
// accepts any origin.
func OpenCheckpoint(signed []byte, origin string, v note.Verifier) (log.Checkpoint, error) {
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return log.Checkpoint{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	var c log.Checkpoint
	if _, err := c.Unmarshal([]byte(n.Text)); err != nil {
		return log.Checkpoint{}, fmt.Errorf("%w: %w", ErrSignature, err)
	}
	if origin != "" && c.Origin != origin {
		return log.Checkpoint{}, fmt.Errorf("%w: origin %q, not %q", ErrSignature, c.Origin, origin)
	}
	return c, nil
}

const checkpointColumns = "corp_id, size, root, COALESCE(CAST(day AS CHAR), ''), note, created_at, tsa_token"

func scanCheckpoint(sc interface{ Scan(...any) error }) (Checkpoint, error) {
	var c Checkpoint
	var root []byte
	err := sc.Scan(&c.Corp, &c.Size, &root, &c.Day, &c.Note, &c.At, &c.Timestamp)
	if err != nil {
		return c, err
	}
	copy(c.Root[:], root)
	c.At = c.At.UTC()
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(c.Note)); err == nil {
		c.Origin = cp.Origin
	}
	return c, nil
}

// LatestCheckpoint is corp's newest checkpoint; false when it has none.
func (l *Ledger) LatestCheckpoint(ctx context.Context, corp string) (Checkpoint, bool, error) {
	c, err := scanCheckpoint(l.db.QueryRowContext(ctx, "SELECT "+checkpointColumns+
		" FROM ledger_checkpoints WHERE corp_id = ? ORDER BY size DESC LIMIT 1", corp))
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("ledger: checkpoint of %s: %w", corp, err)
	}
	return c, true, nil
}

// CheckpointOf is corp's checkpoint of size; ErrNotFound when there is
// none.
func (l *Ledger) CheckpointOf(ctx context.Context, corp string, size uint64) (Checkpoint, error) {
	c, err := scanCheckpoint(l.db.QueryRowContext(ctx, "SELECT "+checkpointColumns+
		" FROM ledger_checkpoints WHERE corp_id = ? AND size = ?", corp, size))
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint %d of %s: %w", size, corp, ErrNotFound)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint %d of %s: %w", size, corp, err)
	}
	return c, nil
}

// StampedCheckpoint is the smallest of corp's day checkpoints with a TSA
// token that covers the first size entries (the day's checkpoint of the
// entry of seq size, or a later day's); ok is false when none does yet.
func (l *Ledger) StampedCheckpoint(ctx context.Context, corp string, size uint64) (Checkpoint, bool, error) {
	c, err := scanCheckpoint(l.db.QueryRowContext(ctx, "SELECT "+checkpointColumns+
		" FROM ledger_checkpoints WHERE corp_id = ? AND size >= ? AND day IS NOT NULL AND tsa_token IS NOT NULL ORDER BY size LIMIT 1", corp, size))
	if errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	if err != nil {
		return Checkpoint{}, false, fmt.Errorf("ledger: stamped checkpoint of %s: %w", corp, err)
	}
	return c, true, nil
}

// Checkpoints are corp's checkpoints, smallest first.
func (l *Ledger) Checkpoints(ctx context.Context, corp string) ([]Checkpoint, error) {
	out, err := sqlrows.List(ctx, l.db, func(rows *sql.Rows, c *Checkpoint) (err error) {
		*c, err = scanCheckpoint(rows)
		return err
	}, "SELECT "+checkpointColumns+" FROM ledger_checkpoints WHERE corp_id = ? ORDER BY size", corp)
	if err != nil {
		return nil, fmt.Errorf("ledger: checkpoints of %s: %w", corp, err)
	}
	return out, nil
}

// Checkpoint takes a checkpoint of corp's log as it stands, when it grew
// since the newest one, and returns the newest. ErrNotFound: corp has no
// entries.
func (l *Ledger) Checkpoint(ctx context.Context, corp string) (Checkpoint, error) {
	var next uint64
	err := l.db.QueryRowContext(ctx, "SELECT next_seq FROM ledger_heads WHERE corp_id = ?", corp).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && next <= 1) {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint of %s: no entries: %w", corp, ErrNotFound)
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: head of %s: %w", corp, err)
	}
	return l.checkpointAt(ctx, corp, next-1, "")
}

// checkpointAt records the checkpoint of corp's first size entries, as
// the one closing day when day is not "". It hashes only the entries
// after the newest checkpoint below size, from that one's compact range
// (its perfect subtrees' hashes, ledger_checkpoints.subtrees), so a
// checkpoint a minute costs the minute's leaves, not the log's.
func (l *Ledger) checkpointAt(ctx context.Context, corp string, size uint64, day string) (Checkpoint, error) {
	var (
		baseSize uint64
		baseDay  string
		subtrees []byte
	)
	err := l.db.QueryRowContext(ctx, "SELECT size, COALESCE(CAST(day AS CHAR), ''), subtrees FROM ledger_checkpoints"+
		" WHERE corp_id = ? AND size <= ? ORDER BY size DESC LIMIT 1", corp, size).Scan(&baseSize, &baseDay, &subtrees)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint of %s: %w", corp, err)
	}
	if err == nil && baseSize == size {
		if day != "" && baseDay == "" {
			if err := l.markDay(ctx, corp, size, day); err != nil {
				return Checkpoint{}, err
			}
		}
		return l.CheckpointOf(ctx, corp, size)
	}
	hashes := make([][]byte, 0, len(subtrees)/len(Hash{}))
	for i := 0; i+len(Hash{}) <= len(subtrees); i += len(Hash{}) {
		hashes = append(hashes, subtrees[i:i+len(Hash{})])
	}
	r, err := ranges.NewRange(0, baseSize, hashes)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint %d of %s: its subtrees: %w", baseSize, corp, ErrTampered)
	}
	leaves, err := logLeaves(ctx, l.db, corp, baseSize, size)
	if err != nil {
		return Checkpoint{}, err
	}
	for i := range leaves {
		if err := r.Append(leaves[i][:], nil); err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: checkpoint of %s: %w", corp, err)
		}
	}
	root, err := r.GetRootHash(nil)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint of %s: %w", corp, err)
	}
	c := Checkpoint{Corp: corp, Origin: l.origin(corp), Size: size, Root: Hash(root), Day: day, At: l.now().UTC().Truncate(time.Millisecond)}
	text := log.Checkpoint{Origin: c.Origin, Size: size, Hash: c.Root[:]}.Marshal()
	c.Note = string(text)
	if l.signer != nil {
		signed, err := note.Sign(&note.Note{Text: string(text)}, l.signer)
		if err != nil {
			return Checkpoint{}, fmt.Errorf("ledger: sign checkpoint of %s: %w", corp, err)
		}
		c.Note = string(signed)
	}
	var st []byte
	for _, h := range r.Hashes() {
		st = append(st, h...)
	}
	var dayArg, dueArg any
	if day != "" {
		// A day's checkpoint owes its TSA token from now on.
		dayArg, dueArg = day, c.At
	}
	// Replicas taking the same checkpoint write the same row (Ed25519
	// signatures are deterministic): the first one stays.
	if _, err := l.db.ExecContext(ctx, "INSERT IGNORE INTO ledger_checkpoints (corp_id, size, root, day, note, created_at, subtrees, tsa_due)"+
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?)", corp, size, c.Root[:], dayArg, c.Note, c.At, nonNil(st), dueArg); err != nil {
		return Checkpoint{}, fmt.Errorf("ledger: checkpoint of %s: %w", corp, err)
	}
	if day != "" {
		if err := l.markDay(ctx, corp, size, day); err != nil {
			return Checkpoint{}, err
		}
	}
	l.log.Debug("ledger checkpoint", "corp", corp, "size", size, "day", day)
	return l.CheckpointOf(ctx, corp, size)
}

// markDay makes corp's checkpoint of size (a minute's, taken as the day's
// last entry arrived) the one closing day, which owes its TSA token from
// now on (tsa_due).
func (l *Ledger) markDay(ctx context.Context, corp string, size uint64, day string) error {
	if _, err := l.db.ExecContext(ctx, "UPDATE ledger_checkpoints SET day = ?, tsa_due = ? WHERE corp_id = ? AND size = ? AND day IS NULL",
		day, l.now().UTC().Truncate(time.Millisecond), corp, size); err != nil {
		return fmt.Errorf("ledger: checkpoint of %s %s: %w", corp, day, err)
	}
	return nil
}

// CheckpointDue takes a checkpoint of every corp whose log grew since its
// newest one (run every minute while entries arrive) and returns them.
func (l *Ledger) CheckpointDue(ctx context.Context) ([]Checkpoint, error) {
	corps, err := sqlrows.List(ctx, l.db, func(rows *sql.Rows, c *string) error { return rows.Scan(c) },
		`SELECT h.corp_id FROM ledger_heads h
WHERE h.next_seq > 1 AND h.next_seq - 1 > COALESCE((SELECT MAX(c.size) FROM ledger_checkpoints c WHERE c.corp_id = h.corp_id), 0)`)
	if err != nil {
		return nil, fmt.Errorf("ledger: corps to checkpoint: %w", err)
	}
	var out []Checkpoint
	var errs []error
	for _, corp := range corps {
		c, err := l.Checkpoint(ctx, corp)
		if err != nil {
			// One corp's failure does not hold the others' back.
			errs = append(errs, err)
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// Consistency is a consistency proof between two checkpoints of a corp.
type Consistency struct {
	Old, New Checkpoint
	// Path proves Old's tree a prefix of New's (RFC 6962 PROOF(m, D[n])).
	Path []Hash `json:"path"`
}

// ConsistencyDoc is a Consistency as JSON: what `yidu evidence
// consistency` prints and the dashboard's consistency route answers, and
// what `yidu evidence check --checkpoint` reads (the two signed
// checkpoints and the proof, hex).
type ConsistencyDoc struct {
	Origin string   `json:"origin"`
	From   uint64   `json:"from"`
	To     uint64   `json:"to"`
	Old    string   `json:"old_checkpoint"`
	New    string   `json:"new_checkpoint"`
	Path   []string `json:"path"`
}

// Doc is c as its JSON document.
func (c Consistency) Doc() ConsistencyDoc {
	d := ConsistencyDoc{Origin: c.New.Origin, From: c.Old.Size, To: c.New.Size, Old: c.Old.Note, New: c.New.Note, Path: make([]string, 0, len(c.Path))}
	for _, h := range c.Path {
		d.Path = append(d.Path, h.String())
	}
	return d
}

// Consistency proves corp's checkpoint of size1 consistent with its
// checkpoint of size2 (size2 0: the newest). ErrNotFound: no checkpoint
// of that size; ErrTampered: the stored leaves no longer hash to them.
func (l *Ledger) Consistency(ctx context.Context, corp string, size1, size2 uint64) (Consistency, error) {
	var c Consistency
	var err error
	if size2 == 0 {
		var ok bool
		if c.New, ok, err = l.LatestCheckpoint(ctx, corp); err != nil {
			return c, err
		} else if !ok {
			return c, fmt.Errorf("ledger: no checkpoint of %s: %w", corp, ErrNotFound)
		}
	} else if c.New, err = l.CheckpointOf(ctx, corp, size2); err != nil {
		return c, err
	}
	if c.Old, err = l.CheckpointOf(ctx, corp, size1); err != nil {
		return c, err
	}
	if c.Old.Size > c.New.Size {
		return c, fmt.Errorf("ledger: consistency of %d with %d: the first is the larger: %w", c.Old.Size, c.New.Size, ErrInvalid)
	}
	t, err := l.Tree(ctx, corp, c.New.Size)
	if err != nil {
		return c, err
	}
	for _, cp := range []Checkpoint{c.Old, c.New} {
		if r, err := t.Root(cp.Size); err != nil || r != cp.Root {
			return c, fmt.Errorf("ledger: %s checkpoint %d: %w", corp, cp.Size, ErrTampered)
		}
	}
	if c.Path, err = t.Consistency(c.Old.Size, c.New.Size); err != nil {
		return c, err
	}
	if c.Path == nil {
		c.Path = []Hash{}
	}
	return c, nil
}
