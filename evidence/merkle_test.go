package evidence

import (
	"errors"
	"fmt"
	"testing"

	"github.com/yidu-io/yidu/ledger"
)

// TestVerifyInclusion checks every leaf of trees of 1..17 leaves, and that
// a flipped bit anywhere (leaf, path, root) or a wrong index fails.
func TestVerifyInclusion(t *testing.T) {
	for size := 1; size <= 17; size++ {
		leaves := make([][32]byte, size)
		for i := range leaves {
			leaves[i] = LeafHash([]byte(fmt.Sprintf("entry %d", i)))
		}
		root := rootOf(leaves)
		for m := range size {
			path := pathOf(m, leaves)
			if err := VerifyInclusion(leaves[m], int64(m), int64(size), path, root); err != nil {
				t.Fatalf("VerifyInclusion(leaf %d of %d) = %v; want nil", m, size, err)
			}
			bad := leaves[m]
			bad[0] ^= 1
			if err := VerifyInclusion(bad, int64(m), int64(size), path, root); !errors.Is(err, ErrProof) {
				t.Errorf("VerifyInclusion(edited leaf %d of %d) = %v; want ErrProof", m, size, err)
			}
			if len(path) > 0 {
				p2 := append([][32]byte(nil), path...)
				p2[len(p2)-1][31] ^= 1
				if err := VerifyInclusion(leaves[m], int64(m), int64(size), p2, root); !errors.Is(err, ErrProof) {
					t.Errorf("VerifyInclusion(edited path, leaf %d of %d) = %v; want ErrProof", m, size, err)
				}
				if err := VerifyInclusion(leaves[m], int64(m), int64(size), path[:len(path)-1], root); !errors.Is(err, ErrProof) {
					t.Errorf("VerifyInclusion(short path, leaf %d of %d) = %v; want ErrProof", m, size, err)
				}
			}
			if size > 1 {
				other := (m + 1) % size
				if err := VerifyInclusion(leaves[m], int64(other), int64(size), path, root); !errors.Is(err, ErrProof) {
					t.Errorf("VerifyInclusion(leaf %d claimed at %d of %d) = %v; want ErrProof", m, other, size, err)
				}
			}
		}
	}
}

// TestRFC6962Vector checks the empty tree's and a one-leaf tree's roots
// against RFC 6962's definitions.
func TestRFC6962Vector(t *testing.T) {
	// MTH({}) = SHA-256() (RFC 6962 §2.1).
	if got := hexOf(rootOf(nil)); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("rootOf(empty) = %s", got)
	}
	// MTH({""}) = SHA-256(0x00): the CT test vector for a one-leaf tree of the empty string.
	if got := hexOf(LeafHash(nil)); got != "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d" {
		t.Errorf("LeafHash(empty) = %s", got)
	}
}

// rootOf is the RFC 6962 root of leaves, by the ledger's tree.
func rootOf(leaves [][32]byte) [32]byte {
	hs := make([]ledger.Hash, len(leaves))
	for i := range leaves {
		hs[i] = leaves[i]
	}
	return ledger.Root(hs)
}

// pathOf is the audit path of leaf m among leaves, by the ledger's tree.
func pathOf(m int, leaves [][32]byte) [][32]byte {
	hs := make([]ledger.Hash, len(leaves))
	for i := range leaves {
		hs[i] = leaves[i]
	}
	p, err := ledger.NewTree(hs).Inclusion(uint64(m), uint64(len(hs)))
	if err != nil {
		panic(err)
	}
	out := make([][32]byte, len(p))
	for i := range p {
		out[i] = p[i]
	}
	return out
}
