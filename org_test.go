package yidu_test

import (
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// testTree: 1 > 2 > 3, 1 > 4; 9 under an unknown parent 8 (a root);
// 6 ↔ 7 a cycle with no root; 5 its own parent.
func testTree() *yidu.Org {
	return yidu.NewOrg([]yidu.Department{
		{ID: 1}, {ID: 2, ParentID: 1}, {ID: 3, ParentID: 2}, {ID: 4, ParentID: 1},
		{ID: 9, ParentID: 8}, {ID: 6, ParentID: 7}, {ID: 7, ParentID: 6}, {ID: 5, ParentID: 5},
	})
}

func TestOrgWalk(t *testing.T) {
	type visit struct{ id, depth int64 }
	var got []visit
	testTree().Walk(func(d yidu.Department, depth int) { got = append(got, visit{d.ID, int64(depth)}) })
	want := []visit{{1, 0}, {2, 1}, {3, 2}, {4, 1}, {9, 0}, {5, 0}, {6, 0}, {7, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("Walk = %v; want %v", got, want)
	}
}

func TestOrgQueries(t *testing.T) {
	o := testTree()
	sorted := func(s []int64) []int64 { slices.Sort(s); return s }
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"Subtree(1)", sorted(o.Subtree(1)), []int64{1, 2, 3, 4}},
		{"Subtree(6) on a cycle", sorted(o.Subtree(6)), []int64{6, 7}},
		{"Subtree(42) unknown", o.Subtree(42), []int64{42}},
		{"Parent(3)", o.Parent(3), int64(2)},
		{"Parent(42)", o.Parent(42), int64(0)},
		{"Children(0)", o.Children(0), []int64{1}},
		{"Within(3, [2])", o.Within(3, []int64{2}), true},
		{"Within(4, [2])", o.Within(4, []int64{2}), false},
		{"Within(6, [1]) on a cycle", o.Within(6, []int64{1}), false},
		{"Within(5, [1]) own parent", o.Within(5, []int64{1}), false},
		{"Above(3, 1)", o.Above(3, func(d int64) bool { return d == 1 }), true},
		{"Above(1, 1) not itself", o.Above(1, func(d int64) bool { return d == 1 }), false},
		{"Above(6, 6) on a cycle", o.Above(6, func(d int64) bool { return d == 6 }), false},
	}
	for _, tt := range tests {
		switch w := tt.want.(type) {
		case []int64:
			if !slices.Equal(tt.got.([]int64), w) {
				t.Errorf("%s = %v; want %v", tt.name, tt.got, w)
			}
		default:
			if tt.got != tt.want {
				t.Errorf("%s = %v; want %v", tt.name, tt.got, tt.want)
			}
		}
	}
}

// TestOrgSubtreeSets: a person in two sub-departments counts once in the
// parent; a cycle ends.
func TestOrgSubtreeSets(t *testing.T) {
	sets := testTree().SubtreeSets(map[int64]*roaring.Bitmap{
		2: roaring.BitmapOf(10), 3: roaring.BitmapOf(10, 11), 4: roaring.BitmapOf(12), 6: roaring.BitmapOf(13), 7: roaring.BitmapOf(14),
	})
	want := map[int64][]uint32{1: {10, 11, 12}, 2: {10, 11}, 3: {10, 11}, 4: {12}, 9: nil, 5: nil}
	for d, w := range want {
		if got := sets[d].ToArray(); !slices.Equal(got, w) && !(len(got) == 0 && len(w) == 0) {
			t.Errorf("SubtreeSets[%d] = %v; want %v", d, got, w)
		}
	}
	if n := sets[6].GetCardinality() + sets[7].GetCardinality(); n < 3 {
		t.Errorf("cycle 6 ↔ 7: %v, %v; want one of them to hold both", sets[6].ToArray(), sets[7].ToArray())
	}
}
