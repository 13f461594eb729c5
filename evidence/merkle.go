package evidence

import (
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// LeafHash is RFC 6962's hash of a leaf: SHA-256(0x00 || body), by
// transparency-dev/merkle (the ledger hashes with the same library).
func LeafHash(body []byte) [32]byte {
	return [32]byte(rfc6962.DefaultHasher.HashLeaf(body))
}

// ErrProof: an inclusion proof does not lead to its root.
var ErrProof = errors.New("evidence: inclusion proof does not verify")

// VerifyInclusion checks that leaf is the index-th of size leaves of the
// tree whose root is root, by the audit path (transparency-dev/merkle's
// verifier, RFC 9162 §2.1.3.2). It needs nothing but the five values:
// an auditor runs it offline.
func VerifyInclusion(leaf [32]byte, index, size int64, path [][32]byte, root [32]byte) error {
	if index < 0 || size <= 0 || index >= size {
		return fmt.Errorf("%w: index %d of %d", ErrProof, index, size)
	}
	p := make([][]byte, len(path))
	for i := range path {
		p[i] = path[i][:]
	}
	if err := proof.VerifyInclusion(rfc6962.DefaultHasher, uint64(index), uint64(size), leaf[:], p, root[:]); err != nil {
		return fmt.Errorf("%w: %w", ErrProof, err)
	}
	return nil
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
	d := ProofDoc{Index: p.Index, TreeSize: p.TreeSize, Root: hexOf(p.Root), Path: make([]string, len(p.Path)), Checkpoint: p.Checkpoint}
	for i, h := range p.Path {
		d.Path[i] = hexOf(h)
	}
	return d
}
