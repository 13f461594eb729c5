package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
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

// Domain-separation prefixes of RFC 6962 section 2.1: a leaf can never be
// read as an inner node or the other way round.
const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

// LeafHash is RFC 6962's leaf hash of an entry's canonical body:
// SHA-256(0x00 || body).
func LeafHash(body []byte) Hash {
	h := sha256.New()
	h.Write([]byte{leafPrefix})
	h.Write(body)
	var out Hash
	h.Sum(out[:0])
	return out
}

// NodeHash is RFC 6962's inner node: SHA-256(0x01 || left || right).
func NodeHash(left, right Hash) Hash {
	var b [1 + 2*sha256.Size]byte
	b[0] = nodePrefix
	copy(b[1:], left[:])
	copy(b[1+sha256.Size:], right[:])
	return sha256.Sum256(b[:])
}

// EmptyRoot is the head of a tree without leaves: SHA-256 of nothing.
var EmptyRoot = Hash(sha256.Sum256(nil))

// split is RFC 6962's k for n > 1 leaves: the largest power of two
// smaller than n.
func split(n uint64) uint64 {
	return 1 << (bits.Len64(n-1) - 1)
}

// Root is the Merkle Tree Hash (MTH, RFC 6962 section 2.1) of leaves, which
// are leaf hashes in tree order.
func Root(leaves []Hash) Hash {
	if len(leaves) == 0 {
		return EmptyRoot
	}
	return mth(leaves)
}

func mth(leaves []Hash) Hash {
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := split(uint64(len(leaves)))
	return NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

// InclusionPath is the audit path of leaf index in the tree of leaves
// (PATH(m, D[n]) of RFC 6962 section 2.1.1): the sibling hashes from the
// leaf up to the root, the lowest first.
func InclusionPath(leaves []Hash, index uint64) ([]Hash, error) {
	if index >= uint64(len(leaves)) {
		return nil, fmt.Errorf("ledger: leaf %d of a tree of %d: %w", index, len(leaves), ErrNotFound)
	}
	return path(leaves, index, nil), nil
}

func path(leaves []Hash, m uint64, out []Hash) []Hash {
	if len(leaves) <= 1 {
		return out
	}
	k := split(uint64(len(leaves)))
	if m < k {
		out = path(leaves[:k], m, out)
		return append(out, mth(leaves[k:]))
	}
	out = path(leaves[k:], m-k, out)
	return append(out, mth(leaves[:k]))
}

// Proof is where an entry stands in its day's tree and how to climb from
// its leaf hash to that tree's head.
type Proof struct {
	// Day is the Asia/Shanghai calendar day of the tree, YYYY-MM-DD.
	Day string `json:"day"`
	// Index is the leaf's position in the day's tree, from 0.
	Index uint64 `json:"index"`
	// TreeSize is the number of leaves of the tree Root heads.
	TreeSize uint64 `json:"tree_size"`
	// Root is the tree head: the sealed root of a day that ended, or the
	// head of today's tree as it was when the proof was made.
	Root Hash `json:"root"`
	// Path is the audit path, lowest sibling first.
	Path []Hash `json:"path"`
}

// ErrProof is the error VerifyInclusion wraps when a proof does not hold.
var ErrProof = errors.New("ledger: inclusion proof does not hold")

// VerifyInclusion checks that leaf is the leaf at p.Index of the tree of
// p.TreeSize leaves whose head is p.Root, by RFC 9162 section 2.1.3.2
// (the same trees and paths as RFC 6962). It needs nothing but its
// arguments.
func VerifyInclusion(leaf Hash, p Proof) error {
	if p.Index >= p.TreeSize {
		return fmt.Errorf("%w: index %d is not in a tree of %d", ErrProof, p.Index, p.TreeSize)
	}
	fn, sn := p.Index, p.TreeSize-1
	r := leaf
	for _, sib := range p.Path {
		if sn == 0 {
			return fmt.Errorf("%w: path has %d hashes, more than the tree is deep", ErrProof, len(p.Path))
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(sib, r)
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = NodeHash(r, sib)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return fmt.Errorf("%w: path has %d hashes, fewer than the tree is deep", ErrProof, len(p.Path))
	}
	if r != p.Root {
		return fmt.Errorf("%w: the path leads to %s, not to the root %s", ErrProof, r, p.Root)
	}
	return nil
}
