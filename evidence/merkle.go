package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
)

// LeafHash is RFC 6962's hash of a leaf: SHA-256(0x00 || body).
func LeafHash(body []byte) [32]byte {
	h := sha256.New()
	h.Write([]byte{0})
	h.Write(body)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// nodeHash is RFC 6962's hash of an inner node: SHA-256(0x01 || l || r).
func nodeHash(l, r [32]byte) [32]byte {
	var b [65]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// ErrProof: an inclusion proof does not lead to its root.
var ErrProof = errors.New("evidence: inclusion proof does not verify")

// VerifyInclusion checks that leaf is the index-th of size leaves of the
// tree whose root is root, by the audit path (RFC 9162 §2.1.3.2, the
// verifier of RFC 6962 §2.1.1's proofs). It needs nothing but the four
// values: an auditor runs it offline.
func VerifyInclusion(leaf [32]byte, index, size int64, path [][32]byte, root [32]byte) error {
	if index < 0 || size <= 0 || index >= size {
		return fmt.Errorf("%w: index %d of %d", ErrProof, index, size)
	}
	fn, sn := index, size-1
	r := leaf
	for _, p := range path {
		if sn == 0 {
			return fmt.Errorf("%w: path longer than the tree", ErrProof)
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(p, r)
			if fn&1 == 0 {
				for fn&1 == 0 && fn != 0 {
					fn >>= 1
					sn >>= 1
				}
			}
		} else {
			r = nodeHash(r, p)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return fmt.Errorf("%w: path shorter than the tree", ErrProof)
	}
	if !bytes.Equal(r[:], root[:]) {
		return fmt.Errorf("%w: computed root %x, given %x", ErrProof, r, root)
	}
	return nil
}

// rootOf computes the RFC 6962 Merkle tree hash of leaves (already leaf
// hashes); tests and the benchmark's fake ledger build trees with it.
func rootOf(leaves [][32]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return leaves[0]
	}
	k := 1
	for k<<1 < len(leaves) {
		k <<= 1
	}
	return nodeHash(rootOf(leaves[:k]), rootOf(leaves[k:]))
}

// pathOf is the audit path of leaf m among leaves (RFC 6962 §2.1.1 PATH).
func pathOf(m int, leaves [][32]byte) [][32]byte {
	if len(leaves) <= 1 {
		return nil
	}
	k := 1
	for k<<1 < len(leaves) {
		k <<= 1
	}
	if m < k {
		return append(pathOf(m, leaves[:k]), rootOf(leaves[k:]))
	}
	return append(pathOf(m-k, leaves[k:]), rootOf(leaves[:k]))
}

func hexOf(h [32]byte) string { return hex.EncodeToString(h[:]) }

func parseHash(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return h, fmt.Errorf("evidence: %q is not a SHA-256 in hex", s)
	}
	copy(h[:], b)
	return h, nil
}

func proofDoc(p Proof) ProofDoc {
	d := ProofDoc{Day: p.Day, Index: p.Index, TreeSize: p.TreeSize, Root: hexOf(p.Root), Path: make([]string, len(p.Path))}
	for i, h := range p.Path {
		d.Path[i] = hexOf(h)
	}
	return d
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
