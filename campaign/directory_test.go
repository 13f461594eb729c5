package campaign

import (
	"context"
	"reflect"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// fakePicking is a directory of a few departments, each with its direct
// members' uids, and an expansion that reaches whom it is told.
type fakePicking struct {
	depts   []yidu.DepartmentNode
	members map[int64][]uint32
	reach   *roaring.Bitmap
	unknown []string
	left    []string
}

func (f *fakePicking) DirectoryIndex(context.Context, string) (DirectoryIndex, error) { return f, nil }
func (f *fakePicking) Expand(context.Context, string, yidu.Audience) (yidu.Expansion, error) {
	return yidu.Expansion{Recipients: f.reach, Unknown: f.unknown, Left: f.left}, nil
}
func (f *fakePicking) Departments() []yidu.DepartmentNode { return f.depts }
func (f *fakePicking) Org() *yidu.Org {
	var ds []yidu.Department
	for _, d := range f.depts {
		ds = append(ds, d.Department)
	}
	return yidu.NewOrg(ds)
}
func (f *fakePicking) SubtreeMembers(ids ...int64) *roaring.Bitmap {
	sets := f.Org().SubtreeSets(func() map[int64]*roaring.Bitmap {
		m := map[int64]*roaring.Bitmap{}
		for id, uids := range f.members {
			m[id] = roaring.BitmapOf(uids...)
		}
		return m
	}())
	out := roaring.New()
	for _, id := range ids {
		if s := sets[id]; s != nil {
			out.Or(s)
		}
	}
	return out
}
func (f *fakePicking) Tags() []yidu.TagCount            { return nil }
func (f *fakePicking) Search(string, int) []yidu.Person { return nil }

func dept(id, parent int64, name string) yidu.DepartmentNode {
	return yidu.DepartmentNode{Department: yidu.Department{ID: id, ParentID: parent, Name: name}}
}

// TestTopDepartments: under a single root (总部) the first level is its
// children, largest first; departments reaching nobody are left out;
// several roots are the first level themselves.
func TestTopDepartments(t *testing.T) {
	tests := []struct {
		name  string
		depts []yidu.DepartmentNode
		want  []DepartmentCount
	}{
		{"one root", []yidu.DepartmentNode{dept(1, 0, "总部"), dept(2, 1, "销售"), dept(3, 1, "研发"), dept(4, 3, "后端"), dept(5, 1, "行政")},
			[]DepartmentCount{{ID: 3, Name: "研发", Recipients: 2}, {ID: 2, Name: "销售", Recipients: 1}}},
		{"two roots", []yidu.DepartmentNode{dept(2, 0, "销售"), dept(3, 0, "研发"), dept(4, 3, "后端"), dept(5, 0, "行政")},
			[]DepartmentCount{{ID: 3, Name: "研发", Recipients: 2}, {ID: 2, Name: "销售", Recipients: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakePicking{depts: tt.depts, members: map[int64][]uint32{2: {1}, 3: {2}, 4: {3}, 5: {9}}, reach: roaring.BitmapOf(1, 2, 3)}
			s := newService(t, nil, Options{Picking: f})
			got := s.TopDepartments(t.Context(), yidu.Notice{App: yidu.App{CorpID: "acme"}})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("TopDepartments = %+v; want %+v", got, tt.want)
			}
		})
	}
	if got := newService(t, nil, Options{}).TopDepartments(t.Context(), yidu.Notice{}); got == nil || len(got) != 0 {
		t.Errorf("TopDepartments without a directory = %#v; want an empty list", got)
	}
}

// TestPreviewAndSortList: the preview's departments are the picked ones
// under no other picked one; a pasted list splits into known, in order,
// and the rest, sorted.
func TestPreviewAndSortList(t *testing.T) {
	f := &fakePicking{depts: []yidu.DepartmentNode{dept(1, 0, "总部"), dept(2, 1, "销售"), dept(3, 1, "研发"), dept(4, 3, "后端")},
		members: map[int64][]uint32{2: {1}, 3: {2}, 4: {3}}, reach: roaring.BitmapOf(2, 3), unknown: []string{"zz"}, left: []string{"aa"}}
	s := newService(t, nil, Options{Picking: f, Audiences: allowAll{}})
	admin := access.NewPrincipal("root", access.KindUser, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "acme"}}})
	pv, err := s.Preview(t.Context(), admin, yidu.App{CorpID: "acme", Name: "hr"}, yidu.Audience{Departments: []int64{3, 4}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []DepartmentCount{{ID: 3, Name: "研发", Recipients: 2}}; pv.Recipients != 2 || pv.Left != 1 || !reflect.DeepEqual(pv.Departments, want) {
		t.Errorf("Preview = %+v; want 2 recipients, 1 left, departments %+v", pv, want)
	}
	known, missing, err := s.SortList(t.Context(), yidu.App{CorpID: "acme"}, []string{"zz", "b", "aa", "a"})
	if err != nil || !reflect.DeepEqual(known, []string{"b", "a"}) || !reflect.DeepEqual(missing, []string{"aa", "zz"}) {
		t.Errorf("SortList = %v, %v, %v; want [b a] [aa zz]", known, missing, err)
	}
	if _, err := newService(t, nil, Options{}).Preview(t.Context(), admin, yidu.App{}, yidu.Audience{}); err != ErrNoDirectory {
		t.Errorf("Preview without a directory = %v; want ErrNoDirectory", err)
	}
}

// allowAll lets every audience through.
type allowAll struct{}

func (allowAll) CheckAudience(context.Context, *access.Principal, string, string, yidu.Audience) error {
	return nil
}
func (allowAll) Limit(context.Context, *access.Principal, string, string) (access.Limit, error) {
	return access.Limit{}, nil
}
