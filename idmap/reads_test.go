package idmap_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestUIDs: the uids of UserIDs spelt exactly, members unknown left out.
func TestUIDs(t *testing.T) {
	m, db := newTestMapper(t)
	want := mustAssign(t, m, "c", "alice", "Bob")
	got, err := idmap.UIDs(context.Background(), db, "c", []string{"alice", "Bob", "nobody", "bob"})
	testenv.Check(t, "UIDs", err)
	if !maps.Equal(got, map[string]uint32{"alice": want["alice"], "Bob": want["Bob"]}) {
		t.Errorf("UIDs = %v; want alice and Bob of %v", got, want)
	}
	if got, err := idmap.UIDs(context.Background(), db, "other", []string{"alice"}); err != nil || len(got) != 0 {
		t.Errorf("UIDs of another corp = %v, %v; want none", got, err)
	}
	if got, err := idmap.UIDs(context.Background(), db, "c", nil); err != nil || len(got) != 0 {
		t.Errorf("UIDs of none = %v, %v; want none", got, err)
	}
}

// TestDepartmentNames: a corp's department names by id, another corp's
// left out.
func TestDepartmentNames(t *testing.T) {
	db := testenv.MySQL(t)
	_, err := db.Exec(`INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ('c', 1, 0, '总部'), ('c', 2, 1, 'HR'), ('d', 3, 0, '别家')`)
	testenv.Check(t, "insert departments", err)
	got, err := idmap.DepartmentNames(context.Background(), db, "c")
	testenv.Check(t, "DepartmentNames", err)
	if want := map[int64]string{1: "总部", 2: "HR"}; !maps.Equal(got, want) {
		t.Errorf("DepartmentNames = %v; want %v", got, want)
	}
}

// TestTreeAndInDepartments: a corp's department tree (another corp's
// left out) and the direct members of departments, members who left
// included.
func TestTreeAndInDepartments(t *testing.T) {
	db := testenv.MySQL(t)
	for _, q := range []string{
		`INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ('c', 1, 0, '总部'), ('c', 2, 1, 'HR'), ('c', 3, 2, '招聘'), ('c', 4, 1, '财务'), ('d', 5, 2, '别家')`,
		`INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ('c', 2, 1), ('c', 3, 2), ('c', 4, 3), ('d', 2, 9)`,
	} {
		_, err := db.Exec(q)
		testenv.Check(t, q, err)
	}
	ctx := context.Background()
	org, err := idmap.Tree(ctx, db, "c")
	testenv.Check(t, "Tree", err)
	sub := org.Subtree(2)
	slices.Sort(sub)
	if !slices.Equal(sub, []int64{2, 3}) {
		t.Errorf("Subtree(2) = %v; want [2 3] (corp d's 5 left out)", sub)
	}
	bm, err := idmap.InDepartments(ctx, db, "c", sub)
	testenv.Check(t, "InDepartments", err)
	if got := bm.ToArray(); !slices.Equal(got, []uint32{1, 2}) {
		t.Errorf("InDepartments(2, 3) = %v; want [1 2]", got)
	}
	if bm, err := idmap.InDepartments(ctx, db, "c", nil); err != nil || !bm.IsEmpty() {
		t.Errorf("InDepartments(none) = %v, %v; want empty", bm, err)
	}
}
