package ledger

import (
	"encoding/json"
	"testing"
)

// FuzzVerifyInclusion: proofs come from outside (an evidence ZIP). A
// proof of any shape never panics, and one that verifies against the true
// root and the true size proves the leaf at its true index. (Without the
// size the index is not bound: leaf 12 of 13 also verifies as leaf 6 of
// 7 with the same path. The root is published with its size for that.)
func FuzzVerifyInclusion(f *testing.F) {
	var leaves []Hash
	for i := range 13 {
		leaves = append(leaves, LeafHash([]byte{byte(i)}))
	}
	root := Root(leaves)
	for i := range 13 {
		path, _ := inclusionPath(leaves, uint64(i))
		b, _ := json.Marshal(Proof{Index: uint64(i), TreeSize: 13, Root: root, Path: path})
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte(`{"index":0,"tree_size":0,"root":"","path":[]}`))
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		var p Proof
		if json.Unmarshal(raw, &p) != nil {
			return
		}
		i := uint64(which) % 13
		if VerifyInclusion(leaves[i], p) == nil && p.Root == root && p.TreeSize == 13 && p.Index != i {
			t.Fatalf("leaf %d verified at index %d of %d", i, p.Index, p.TreeSize)
		}
	})
}
