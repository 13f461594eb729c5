package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// Hash is a SHA-256 value: a leaf hash, an inner node or a tree head. Its
// text form (JSON, logs) is 64 lower-case hex digits.
type Hash [sha256.Size]byte

// String returns h in lower-case hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// MarshalText encodes h as lower-case hex.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// ParseHash decodes 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("ledger: hash %q: want %d hex digits", s, 2*len(h))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, fmt.Errorf("ledger: hash %q: %w", s, err)
	}
	return h, nil
}

// hasher is RFC 6962's (Certificate Transparency's) SHA-256 tree hasher:
// leaf SHA-256(0x00 || body), inner node SHA-256(0x01 || left || right).
// The log's hashing and proofs are transparency-dev/merkle's, so an
// auditor's copy of that library (or any RFC 6962 implementation) checks
// them as they are.
var hasher = rfc6962.DefaultHasher

var ranges = compact.RangeFactory{Hash: hasher.HashChildren}

// LeafHash is RFC 6962's leaf hash of an entry's canonical body:
// SHA-256(0x00 || body).
func LeafHash(body []byte) Hash {
	var out Hash
	copy(out[:], hasher.HashLeaf(body))
	return out
}

// EmptyRoot is the head of a tree without leaves: SHA-256 of nothing.
var EmptyRoot = Hash(sha256.Sum256(nil))

// Tree is the first leaves of a corp's log with every perfect subtree's
// hash, so the root of any prefix and any inclusion or consistency proof
// within it need no hashing beyond the nodes they name. Build one with
// NewTree (or Ledger.Tree) to prove many entries for one read of the
// leaves (an evidence ZIP).
type Tree struct {
	// levels[l][i] is the hash of the perfect subtree of 2^l leaves from
	// leaf i<<l; levels[0] are the leaves.
	levels [][]Hash
}

// NewTree hashes leaves (leaf hashes in log order) into a Tree.
func NewTree(leaves []Hash) *Tree {
	t := &Tree{levels: [][]Hash{leaves}}
	r := ranges.NewEmptyRange(0)
	visit := func(id compact.NodeID, h []byte) {
		if id.Level == 0 {
			return
		}
		for uint(len(t.levels)) <= id.Level {
			t.levels = append(t.levels, nil)
		}
		l := &t.levels[id.Level]
		if uint64(len(*l)) == id.Index {
			*l = append(*l, Hash(h))
		}
	}
	for i := range leaves {
		// Append fails only for a hash of the wrong size.
		_ = r.Append(leaves[i][:], visit)
	}
	return t
}

// Size is the number of leaves.
func (t *Tree) Size() uint64 { return uint64(len(t.levels[0])) }

// Leaf is the leaf hash at index.
func (t *Tree) Leaf(index uint64) Hash { return t.levels[0][index] }

func (t *Tree) node(id compact.NodeID) ([]byte, error) {
	if id.Level >= uint(len(t.levels)) || id.Index >= uint64(len(t.levels[id.Level])) {
		return nil, fmt.Errorf("ledger: node %d/%d of a tree of %d: %w", id.Level, id.Index, t.Size(), ErrNotFound)
	}
	h := t.levels[id.Level][id.Index]
	return h[:], nil
}

func (t *Tree) nodes(ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := t.node(id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// Root is the Merkle Tree Hash (RFC 6962 section 2.1) of the first size
// leaves.
func (t *Tree) Root(size uint64) (Hash, error) {
	if size > t.Size() {
		return Hash{}, fmt.Errorf("ledger: root of %d leaves of a tree of %d: %w", size, t.Size(), ErrNotFound)
	}
	if size == 0 {
		return EmptyRoot, nil
	}
	hashes, err := t.nodes(compact.RangeNodes(0, size, nil))
	if err != nil {
		return Hash{}, err
	}
	r, err := ranges.NewRange(0, size, hashes)
	if err != nil {
		return Hash{}, fmt.Errorf("ledger: root of %d: %w", size, err)
	}
	h, err := r.GetRootHash(nil)
	if err != nil {
		return Hash{}, fmt.Errorf("ledger: root of %d: %w", size, err)
	}
	return Hash(h), nil
}

// Inclusion is the audit path of the leaf at index in the tree of the
// first size leaves, the lowest sibling first (RFC 6962 PATH(m, D[n])).
func (t *Tree) Inclusion(index, size uint64) ([]Hash, error) {
	if size > t.Size() || index >= size {
		return nil, fmt.Errorf("ledger: leaf %d of %d leaves of a tree of %d: %w", index, size, t.Size(), ErrNotFound)
	}
	n, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("ledger: inclusion of %d in %d: %w", index, size, err)
	}
	return t.rehash(n)
}

// Consistency is the proof that the tree of the first size1 leaves is a
// prefix of the tree of the first size2 (RFC 6962 PROOF(m, D[n])).
func (t *Tree) Consistency(size1, size2 uint64) ([]Hash, error) {
	if size1 > size2 || size2 > t.Size() {
		return nil, fmt.Errorf("ledger: consistency of %d and %d in a tree of %d: %w", size1, size2, t.Size(), ErrNotFound)
	}
	n, err := proof.Consistency(size1, size2)
	if err != nil {
		return nil, fmt.Errorf("ledger: consistency of %d and %d: %w", size1, size2, err)
	}
	return t.rehash(n)
}

func (t *Tree) rehash(n proof.Nodes) ([]Hash, error) {
	hashes, err := t.nodes(n.IDs)
	if err != nil {
		return nil, err
	}
	p, err := n.Rehash(hashes, hasher.HashChildren)
	if err != nil {
		return nil, fmt.Errorf("ledger: proof: %w", err)
	}
	out := make([]Hash, len(p))
	for i := range p {
		out[i] = Hash(p[i])
	}
	return out, nil
}

// Root is the Merkle Tree Hash of leaves (leaf hashes in log order).
func Root(leaves []Hash) Hash {
	r, _ := NewTree(leaves).Root(uint64(len(leaves)))
	return r
}

// Proof is where an entry stands in its corp's log and how to climb from
// its leaf hash to a checkpoint's root.
type Proof struct {
	// Index is the leaf's position in the log, from 0: the entry's seq - 1.
	Index uint64 `json:"index"`
	// TreeSize is the number of leaves of the tree Root heads: a
	// checkpoint's size.
	TreeSize uint64 `json:"tree_size"`
	// Root is the checkpoint's root.
	Root Hash `json:"root"`
	// Path is the audit path, lowest sibling first.
	Path []Hash `json:"path"`
	// Checkpoint is the signed checkpoint of TreeSize and Root (C2SP
	// tlog-checkpoint, a signed note); "" when the tree was proved as it
	// stands, before any checkpoint covered the entry.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// ErrProof is the error VerifyInclusion and VerifyConsistency wrap when a
// proof does not hold.
var ErrProof = errors.New("ledger: proof does not hold")

func bytesOf(hs []Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// VerifyInclusion checks that leaf is the leaf at p.Index of the tree of
// p.TreeSize leaves whose head is p.Root (transparency-dev/merkle's
// verifier, RFC 9162 section 2.1.3.2). It needs nothing but its
// arguments.
func VerifyInclusion(leaf Hash, p Proof) error {
	if err := proof.VerifyInclusion(hasher, p.Index, p.TreeSize, leaf[:], bytesOf(p.Path), p.Root[:]); err != nil {
		return fmt.Errorf("%w: leaf %d of %d: %w", ErrProof, p.Index, p.TreeSize, err)
	}
	return nil
}

// VerifyConsistency checks that the tree of size1 leaves headed by root1
// is a prefix of the tree of size2 headed by root2 (RFC 9162 section
// 2.1.4.2).
func VerifyConsistency(size1, size2 uint64, path []Hash, root1, root2 Hash) error {
	if err := proof.VerifyConsistency(hasher, size1, size2, bytesOf(path), root1[:], root2[:]); err != nil {
		return fmt.Errorf("%w: consistency of %d and %d: %w", ErrProof, size1, size2, err)
	}
	return nil
}
