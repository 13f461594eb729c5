package ledger

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// The Certificate Transparency reference leaves and their tree heads for
// sizes 0..8, and two audit paths, as published with RFC 6962
// implementations (transparency-dev/merkle's test data; data only).
var ctLeaves = []string{"", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"}

var ctRoots = []string{
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	"6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
	"fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
	"aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
	"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
	"4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
	"76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
	"ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
	"5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}

func ctLeafHashes(t *testing.T) []Hash {
	t.Helper()
	var out []Hash
	for _, l := range ctLeaves {
		b, err := hex.DecodeString(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, LeafHash(b))
	}
	return out
}

func mustHash(t *testing.T, s string) Hash {
	t.Helper()
	h, err := ParseHash(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRootRFC6962Vectors(t *testing.T) {
	leaves := ctLeafHashes(t)
	for n := 0; n <= len(leaves); n++ {
		if got := Root(leaves[:n]).String(); got != ctRoots[n] {
			t.Errorf("Root(first %d CT leaves) = %s; want %s", n, got, ctRoots[n])
		}
	}
}

func TestInclusionPathRFC6962Vectors(t *testing.T) {
	leaves := ctLeafHashes(t)
	tests := []struct {
		index uint64
		path  []string
	}{
		{0, []string{"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
			"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
			"6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"}},
		{5, []string{"bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
			"ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
			"d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"}},
	}
	for _, tc := range tests {
		path, err := inclusionPath(leaves, tc.index)
		if err != nil {
			t.Fatal(err)
		}
		if len(path) != len(tc.path) {
			t.Fatalf("inclusionPath(8 leaves, %d) has %d hashes; want %d", tc.index, len(path), len(tc.path))
		}
		for i := range path {
			if path[i].String() != tc.path[i] {
				t.Errorf("inclusionPath(8 leaves, %d)[%d] = %s; want %s", tc.index, i, path[i], tc.path[i])
			}
		}
		p := Proof{Index: tc.index, TreeSize: 8, Root: mustHash(t, ctRoots[8]), Path: path}
		if err := VerifyInclusion(leaves[tc.index], p); err != nil {
			t.Errorf("VerifyInclusion(leaf %d) = %v; want nil", tc.index, err)
		}
	}
}

// Every leaf of every tree up to 40 leaves proves, and every mutation of
// a proof (index, leaf, root, a path hash, a path one short or one long)
// fails. (Another size can still verify when the path has the same shape: RFC 6962 binds the size to the root only in the
// signed tree head, which is why the day's root is recorded with its
// size and a checker compares both; docs/evidence.md.)
func TestVerifyInclusionAllShapes(t *testing.T) {
	var all []Hash
	for i := range 40 {
		all = append(all, LeafHash([]byte{byte(i), byte(i * 7)}))
	}
	for n := 1; n <= len(all); n++ {
		leaves := all[:n]
		root := Root(leaves)
		for i := range n {
			path, err := inclusionPath(leaves, uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			p := Proof{Index: uint64(i), TreeSize: uint64(n), Root: root, Path: path}
			if err := VerifyInclusion(leaves[i], p); err != nil {
				t.Fatalf("size %d index %d: %v", n, i, err)
			}
			bad := map[string]func() (Hash, Proof){
				"index+1": func() (Hash, Proof) { q := p; q.Index++; return leaves[i], q },
				"leaf":    func() (Hash, Proof) { return LeafHash([]byte("x")), p },
				"root":    func() (Hash, Proof) { q := p; q.Root[0] ^= 1; return leaves[i], q },
				"longer":  func() (Hash, Proof) { q := p; q.Path = append(append([]Hash{}, p.Path...), root); return leaves[i], q },
			}
			if len(path) > 0 {
				bad["shorter"] = func() (Hash, Proof) { q := p; q.Path = p.Path[:len(p.Path)-1]; return leaves[i], q }
				bad["path[0]"] = func() (Hash, Proof) {
					q := p
					q.Path = append([]Hash{}, p.Path...)
					q.Path[0][31] ^= 1
					return leaves[i], q
				}
			}
			for name, mk := range bad {
				leaf, q := mk()
				if err := VerifyInclusion(leaf, q); !errors.Is(err, ErrProof) {
					t.Errorf("size %d index %d %s: VerifyInclusion = %v; want ErrProof", n, i, name, err)
				}
			}
		}
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		in   Body
		want string
	}{
		{"sorted, no space", Body{"b": int64(2), "a": "x", "c": true}, `{"a":"x","b":2,"c":true}`},
		{"escapes", Body{"s": "q\"b\\\n\t\x01</>\u2028中文"}, `{"s":"q\"b\\\n\t\u0001</>` + "\u2028中文" + `"}`},
		{"array", Body{"l": []string{"u1", "u2"}, "z": uint32(0)}, `{"l":["u1","u2"],"z":0}`},
		{"empty", Body{}, `{}`},
	}
	for _, tc := range tests {
		got, err := Canonical(tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: Canonical = %s; want %s", tc.name, got, tc.want)
		}
	}
	for _, bad := range []Body{{"f": 1.5}, {"s": "\xff"}, {"名": "x"}} {
		if _, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%v) = nil error; want one", bad)
		}
	}
}

// The signal fast path writes exactly Canonical's bytes of its members.
func TestSignalBodyFastPath(t *testing.T) {
	for _, s := range []Signal{
		{MsgID: "m1", UID: 7, Source: 1, ReadTime: time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)},
		{MsgID: "m\"2", UID: 0, Source: 3, ReadTime: time.Date(2026, 1, 2, 23, 59, 59, 120e6, Zone), Signal: "acknowledged",
			Version: 2, ClientIP: "10.0.0.1", UserAgent: "Mozilla/5.0 \"wxwork\"\n中文"},
	} {
		f := s.Fact()
		got, err := appendBody(nil, "wwc", 9, "2026-12-03", 4, f)
		if err != nil {
			t.Fatal(err)
		}
		b := s.Members()
		b["corp"], b["seq"], b["day"], b["index"], b["kind"] = "wwc", uint64(9), "2026-12-03", uint64(4), "signal"
		want, err := Canonical(b)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("fast body = %s\nCanonical  = %s", got, want)
		}
	}
}

// A packed block's bodies, written from its shared prefix and rebuilt
// from its packed bytes, are Canonical's bytes.
func TestPackedBodies(t *testing.T) {
	at := time.Date(2026, 12, 3, 1, 2, 3, 0, time.UTC)
	s := Signal{MsgID: "m\"1", UID: 7, Source: 2, ReadTime: at}
	var p packedPrefix
	if err := p.init("ww\\c", "2026-12-03", s.MsgID); err != nil {
		t.Fatal(err)
	}
	got := p.appendBody(nil, 9, 4, &s)
	b := s.Members()
	b["corp"], b["seq"], b["day"], b["index"], b["kind"] = "ww\\c", uint64(9), "2026-12-03", uint64(4), "signal"
	want, err := Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("packed body = %s\nCanonical   = %s", got, want)
	}
	blk := block{corp: "ww\\c", firstSeq: 9, count: 1, day: "2026-12-03", firstIndex: 4, kind: KindSignal, msgID: s.MsgID,
		uids: []byte{0, 0, 0, 7}, bodies: []byte{packedSignals, 0, 0, 0, 0, 2}, leaves: make([]byte, 32)}
	binary.BigEndian.PutUint32(blk.bodies[1:], uint32(at.Unix()))
	es, bad := blk.entries()
	if bad != nil || len(es) != 1 || string(es[0].Body) != string(want) {
		t.Errorf("unpacked = %+v, %v; want the body %s", es, bad, want)
	}
}

// inclusionPath is the audit path of leaf index in the tree of leaves.
func inclusionPath(leaves []Hash, index uint64) ([]Hash, error) {
	return NewTree(leaves).Inclusion(index, uint64(len(leaves)))
}

// TestConsistencyAllShapes: every pair of sizes up to 40 leaves has a
// consistency proof that transparency-dev/merkle's own verifier
// (proof.VerifyConsistency) accepts for the two roots, and refuses for a
// root of another tree or a path with one hash changed.
func TestConsistencyAllShapes(t *testing.T) {
	var all []Hash
	for i := range 40 {
		all = append(all, LeafHash([]byte{byte(i), 'c'}))
	}
	tree := NewTree(all)
	for n2 := uint64(1); n2 <= 40; n2++ {
		root2 := Root(all[:n2])
		if r, _ := tree.Root(n2); r != root2 {
			t.Fatalf("Tree.Root(%d) = %s; Root of the first %d leaves = %s", n2, r, n2, root2)
		}
		for n1 := uint64(1); n1 <= n2; n1++ {
			root1 := Root(all[:n1])
			path, err := tree.Consistency(n1, n2)
			if err != nil {
				t.Fatal(err)
			}
			if err := proof.VerifyConsistency(rfc6962.DefaultHasher, n1, n2, bytesOf(path), root1[:], root2[:]); err != nil {
				t.Fatalf("consistency %d→%d: %v", n1, n2, err)
			}
			other := root1
			other[0] ^= 1
			if err := VerifyConsistency(n1, n2, path, other, root2); !errors.Is(err, ErrProof) && n1 != n2 {
				t.Errorf("consistency %d→%d with another first root = %v; want ErrProof", n1, n2, err)
			}
			if len(path) > 0 {
				bad := append([]Hash{}, path...)
				bad[len(bad)-1][5] ^= 1
				if err := VerifyConsistency(n1, n2, bad, root1, root2); !errors.Is(err, ErrProof) {
					t.Errorf("consistency %d→%d with a hash changed = %v; want ErrProof", n1, n2, err)
				}
			}
		}
	}
}
