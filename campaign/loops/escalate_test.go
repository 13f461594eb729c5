package loops

import (
	"fmt"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// The tree of the tests:
//
//	1 总部 (leader 100)
//	├── 2 HR (leader 200)
//	│   └── 3 Payroll (no leader)
//	├── 4 Sales (no leader)
//	│   └── 5 Sales East (leaders 500, 501)
//	└── (none)
//	9 Orphan root (no leader anywhere up)
//
// orgOf builds a tree from parent links (department → parent) with its
// leaders and memberships.
func orgOf(parent map[int64]int64, leaders map[int64][]uint32, members map[uint32][]int64) *yidu.Org {
	var depts []yidu.Department
	for d, p := range parent {
		depts = append(depts, yidu.Department{ID: d, ParentID: p})
	}
	slices.SortFunc(depts, func(a, b yidu.Department) int { return int(a.ID - b.ID) })
	o := yidu.NewOrg(depts)
	o.Leaders, o.Memberships = leaders, members
	return o
}

func testOrg() *yidu.Org {
	return orgOf(map[int64]int64{1: 0, 2: 1, 3: 2, 4: 1, 5: 4, 9: 0},
		map[int64][]uint32{1: {100}, 2: {200}, 5: {500, 501}},
		map[uint32][]int64{
			100: {1}, 200: {2}, 500: {5}, 501: {5},
			1: {2}, 2: {3}, 3: {4}, 4: {5}, 5: {9}, 6: {3, 5},
		})
}

func TestEscalate(t *testing.T) {
	all := []uint32{100, 200, 500, 501, 1, 2, 3, 4, 5, 6}
	tests := []struct {
		name         string
		read         []uint32
		want         map[uint32][2][]uint32 // leader → people, unread
		wantFallback [2][]uint32
	}{
		{
			name: "nobody read",
			want: map[uint32][2][]uint32{
				// 200 is leader of 2: to 100. 3 (Sales) has no leader in 4: up to 100.
				100: {{3, 200}, {3, 200}},
				// 1 in HR, 2 in Payroll (no leader: up to HR), 6 in Payroll and Sales East.
				200: {{1, 2, 6}, {1, 2, 6}},
				// Co-leaders of Sales East: each other's leader, and 4's and 6's.
				500: {{4, 6, 501}, {4, 6, 501}},
				501: {{4, 6, 500}, {4, 6, 500}},
			},
			// 100 leads the top: nobody above them but the fallback.
			wantFallback: [2][]uint32{{5, 100}, {5, 100}},
		},
		{
			name: "leaders read, some members read",
			read: []uint32{100, 200, 500, 501, 1, 6},
			want: map[uint32][2][]uint32{
				200: {{1, 2, 6}, {2}},
				500: {{4, 6, 501}, {4}},
				501: {{4, 6, 500}, {4}},
				// 100's people: 3 unread, 200 read: kept.
				100: {{3, 200}, {3}},
			},
			wantFallback: [2][]uint32{{5, 100}, {5}},
		},
		{
			name: "everyone read: nobody is told",
			read: all,
			want: map[uint32][2][]uint32{},
		},
		{
			name: "only a leader unread goes up, not to themselves",
			read: []uint32{100, 500, 501, 1, 2, 3, 4, 5, 6},
			want: map[uint32][2][]uint32{100: {{3, 200}, {200}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Escalate(testOrg(), roaring.BitmapOf(all...), roaring.BitmapOf(tt.read...))
			if len(got.Leaders) != len(tt.want) {
				t.Errorf("leaders told: %v; want %v", keys(got.Leaders), tt.want)
			}
			for l, w := range tt.want {
				g := got.Leaders[l]
				if g == nil {
					t.Errorf("leader %d: no digest", l)
					continue
				}
				if !slices.Equal(g.People.ToArray(), w[0]) || !slices.Equal(g.Unread.ToArray(), w[1]) {
					t.Errorf("leader %d: people %v unread %v; want %v, %v", l, g.People.ToArray(), g.Unread.ToArray(), w[0], w[1])
				}
			}
			if tt.wantFallback[0] == nil {
				if got.Fallback != nil {
					t.Errorf("fallback %v; want none", got.Fallback.Unread.ToArray())
				}
				return
			}
			if got.Fallback == nil || !slices.Equal(got.Fallback.People.ToArray(), tt.wantFallback[0]) ||
				!slices.Equal(got.Fallback.Unread.ToArray(), tt.wantFallback[1]) {
				t.Errorf("fallback %+v; want %v", got.Fallback, tt.wantFallback)
			}
		})
	}
}

func keys(m map[uint32]*Group) []uint32 {
	var out []uint32
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestEscalateCycle(t *testing.T) {
	org := orgOf(map[int64]int64{1: 2, 2: 1}, nil, map[uint32][]int64{7: {1}})
	got := Escalate(org, roaring.BitmapOf(7), roaring.New())
	if got.Fallback == nil || got.Fallback.Unread.GetCardinality() != 1 {
		t.Fatalf("a cyclic tree: %+v; want 7 to the fallback", got)
	}
}

func TestDigestText(t *testing.T) {
	tests := []struct {
		people, unread int
		wantHead       string
		wantNames      int
		wantMore       bool
	}{
		{40, 12, "您负责的 40 人中有 12 人未读《新考勤制度》", 10, true},
		{3, 2, "您负责的 3 人中有 2 人未读《新考勤制度》", 2, false},
		{10, 10, "您负责的 10 人中有 10 人未读《新考勤制度》", 10, false},
	}
	for _, tt := range tests {
		g := &Group{People: roaring.New(), Unread: roaring.New()}
		g.People.AddRange(0, uint64(tt.people))
		g.Unread.AddRange(0, uint64(tt.unread))
		head, names := DigestText("新考勤制度", g, func(uid uint32) string { return fmt.Sprintf("u%d", uid) })
		if head != tt.wantHead {
			t.Errorf("headline %q; want %q", head, tt.wantHead)
		}
		n := 0
		for i := 0; i < tt.unread; i++ {
			if slices.Contains(splitNames(names), fmt.Sprintf("u%d", i)) {
				n++
			}
		}
		if n != tt.wantNames {
			t.Errorf("%q names %d people; want %d", names, n, tt.wantNames)
		}
		if more := fmt.Sprintf(" 等 %d 人", tt.unread); (len(names) > len(more) && names[len(names)-len(more):] == more) != tt.wantMore {
			t.Errorf("%q: the count of the rest shown = %v; want %v", names, !tt.wantMore, tt.wantMore)
		}
	}
}

func splitNames(s string) []string {
	var out []string
	cur := ""
	for _, r := range s {
		if r == '、' || r == ' ' {
			out = append(out, cur)
			cur = ""
			continue
		}
		cur += string(r)
	}
	return append(out, cur)
}
