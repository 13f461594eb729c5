package idmap_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// tagCorp: 1 > 2 > 3, 1 > 4; a (1), b (2), c (3), e (3), d (4); b leads 2,
// c and e lead 3; tag 7 is d and department 2 (so b, c, e by the
// subtree), tag 8 is a alone, tag 9 is empty. App 1000002 sees all; app
// 1000003 only 4's subtree.
func tagCorp(corp string) fakewecom.Corp {
	return fakewecom.Corp{
		CorpID: corp,
		Apps: []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"},
			{AgentID: 1000003, Secret: "narrow", VisibleDepartments: []int{4}}},
		Departments: []fakewecom.Department{
			{ID: 1, Name: "公司"}, {ID: 2, ParentID: 1, Name: "研发", Leaders: []string{"b"}},
			{ID: 3, ParentID: 2, Name: "后端", Leaders: []string{"c", "e"}}, {ID: 4, ParentID: 1, Name: "销售"},
		},
		Users: []fakewecom.User{
			{UserID: "a", Name: "张三", Departments: []int{1}}, {UserID: "b", Name: "李四", Departments: []int{2}},
			{UserID: "c", Name: "王五", Departments: []int{3}}, {UserID: "e", Name: "Emma", Departments: []int{3}},
			{UserID: "d", Name: "赵六", Departments: []int{4}},
		},
		Tags: []fakewecom.Tag{{ID: 7, Name: "安全员", UserIDs: []string{"d"}, Departments: []int{2}},
			{ID: 8, Name: "管理层", UserIDs: []string{"a"}}, {ID: 9, Name: "空"}},
	}
}

// userIDsOf returns the sorted UserIDs of bm's uids.
func userIDsOf(tb testing.TB, m *idmap.Mapper, corp string, uids []uint32) []string {
	tb.Helper()
	ids, err := m.UserIDs(context.Background(), corp, uids)
	testenv.Check(tb, "UserIDs", err)
	var out []string
	for _, id := range ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestSyncTagsLeaders: tags, tag members and leaders are synced with the
// directory, a tag expands to its users and its departments' subtrees,
// the left are excluded, and the index, Expand and TagMembers agree.
func TestSyncTagsLeaders(t *testing.T) {
	const corp = "wwtags"
	db := testenv.MySQL(t)
	c := tagCorp(corp)
	fake.SetCorp(c)
	m := newMapper(t, db)
	s := syncer(t, m, corp, "s3cret", "")
	ctx := context.Background()

	v0, err := m.Version(ctx, corp)
	testenv.Check(t, "Version", err)
	rep, err := s.Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	if rep.Tags != 3 || rep.TagUsers != 2 || rep.TagDepartments != 1 || rep.Leaders != 3 {
		t.Errorf("report tags %d users %d depts %d leaders %d; want 3 2 1 3", rep.Tags, rep.TagUsers, rep.TagDepartments, rep.Leaders)
	}
	v1, err := m.Version(ctx, corp)
	testenv.Check(t, "Version", err)
	if v1 <= v0 {
		t.Errorf("version %d after sync; want > %d", v1, v0)
	}

	check := func(name string, au yidu.Audience, want []string) {
		t.Helper()
		x, err := m.Expand(ctx, corp, au)
		testenv.Check(t, "Expand", err)
		if got := userIDsOf(t, m, corp, x.Recipients.ToArray()); !slices.Equal(got, want) {
			t.Errorf("%s: Expand = %v; want %v", name, got, want)
		}
		if len(au.Tags) > 0 {
			bm, err := m.TagMembers(ctx, corp, au.Tags)
			testenv.Check(t, "TagMembers", err)
			if !bm.Equals(x.Recipients) && au.UserIDs == nil && au.Departments == nil {
				t.Errorf("%s: TagMembers = %v; Expand %v", name, bm.ToArray(), x.Recipients.ToArray())
			}
		}
	}
	check("tag 7", yidu.Audience{Tags: []int64{7}}, []string{"b", "c", "d", "e"})
	check("tags 8, 9", yidu.Audience{Tags: []int64{8, 9}}, []string{"a"})
	check("tag 7 and department 4", yidu.Audience{Tags: []int64{7}, Departments: []int64{4}}, []string{"b", "c", "d", "e"})
	check("unknown tag", yidu.Audience{Tags: []int64{99}}, nil)

	leaders, err := m.Leaders(ctx, corp)
	testenv.Check(t, "Leaders", err)
	if got := fmt.Sprint(len(leaders[2]), len(leaders[3]), len(leaders[4])); got != "1 2 0" {
		t.Errorf("leaders per department 2, 3, 4 = %s; want 1 2 0", got)
	}
	if got := userIDsOf(t, m, corp, leaders[3]); !slices.Equal(got, []string{"c", "e"}) {
		t.Errorf("leaders of 3 = %v", got)
	}

	led := func(userID string) string {
		t.Helper()
		ds, err := m.LedDepartments(ctx, corp, userID)
		testenv.Check(t, "LedDepartments", err)
		return fmt.Sprint(ds)
	}
	if got := led("b") + led("c") + led("a") + led("nobody"); got != "[2][3][][]" {
		t.Errorf("LedDepartments of b, c, a, nobody = %s; want [2][3][][]", got)
	}
	if dv, err := m.DirectoryVersion(ctx, corp); err != nil || dv != int64(v1) {
		t.Errorf("DirectoryVersion = %d, %v; want %d", dv, err, v1)
	}

	idx, err := m.Index(ctx, corp)
	testenv.Check(t, "Index", err)
	tags := map[int64]int{}
	for _, tg := range idx.Tags() {
		tags[tg.ID] = tg.Members
	}
	if fmt.Sprint(tags) != "map[7:4 8:1 9:0]" {
		t.Errorf("index tags = %v", tags)
	}

	// c leaves: the tag loses them, leaders too; e changes leads.
	c.Users = slices.DeleteFunc(c.Users, func(u fakewecom.User) bool { return u.UserID == "c" })
	c.Departments[2].Leaders = []string{"c"}
	c.Tags[0].Departments = []int{3}
	fake.SetCorp(c)
	rep, err = s.Sync(ctx, corp)
	testenv.Check(t, "Sync again", err)
	if rep.Left != 1 {
		t.Errorf("left %d; want 1", rep.Left)
	}
	check("tag 7 after c left", yidu.Audience{Tags: []int64{7}}, []string{"d", "e"})
	x, err := m.Expand(ctx, corp, yidu.Audience{UserIDs: []string{"c", "nobody", "A"}})
	testenv.Check(t, "Expand", err)
	if fmt.Sprint(x.Left, x.Unknown, x.Recipients.GetCardinality()) != "[c] [nobody] 1" {
		t.Errorf("Expand of c, nobody, A: left %v unknown %v recipients %d", x.Left, x.Unknown, x.Recipients.GetCardinality())
	}
	leaders, err = m.Leaders(ctx, corp)
	testenv.Check(t, "Leaders", err)
	if len(leaders[3]) != 0 {
		t.Errorf("leaders of 3 after the only one left: %v", leaders[3])
	}
	if got := led("c"); got != "[]" {
		t.Errorf("LedDepartments of c after leaving = %s; want []", got)
	}
	idx2, err := m.Index(ctx, corp)
	testenv.Check(t, "Index", err)
	if idx2.Version <= idx.Version || idx2.Tags()[0].Members != 2 {
		t.Errorf("index after sync: version %d (was %d), tag 7 members %d; want 2", idx2.Version, idx.Version, idx2.Tags()[0].Members)
	}

	// A partial read (the narrow app sees 4 only): tag/get returns d
	// alone, the departments outside the range are dropped.
	s2 := syncer(t, m, corp, "narrow", "")
	_, err = s2.Sync(ctx, corp)
	testenv.Check(t, "partial sync", err)
	bm, err := m.TagMembers(ctx, corp, []int64{7})
	testenv.Check(t, "TagMembers", err)
	if got := userIDsOf(t, m, corp, bm.ToArray()); !slices.Equal(got, []string{"d"}) {
		t.Errorf("tag 7 after a partial read = %v; want [d]", got)
	}
}
