package idmap_test

import (
	"context"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestDirectoryReads(t *testing.T) {
	db := testenv.MySQL(t)
	m, _ := newMapper(t, db)
	ctx := context.Background()
	const corp = "corp"
	// 1 ─┬─ 2 ── 4
	//    └─ 3
	// 5 (another root); 6 ↔ 7 a cycle (bad data must not loop).
	_, err := db.Exec(`INSERT INTO departments (corp_id, dept_id, parent_id, name, sort_order) VALUES
		('corp',1,0,'root',0), ('corp',2,1,'eng',10), ('corp',3,1,'ops',20), ('corp',4,2,'backend',0),
		('corp',5,0,'other',0), ('corp',6,7,'c6',0), ('corp',7,6,'c7',0),
		('elsewhere',2,0,'not ours',0)`)
	testenv.Check(t, "seed departments", err)
	members := []struct {
		id    string
		depts []int64
	}{
		{"u0", []int64{1}}, {"u1", []int64{2}}, {"u2", []int64{4}}, {"u3", []int64{3, 4}},
		{"u4", []int64{5}}, {"u5", []int64{6}}, {"u6", []int64{4}},
	}
	for _, mb := range members {
		testenv.Check(t, "create", m.ContactChanged(ctx, corp, idmap.ChangeCreateUser, mb.id, "", mb.depts))
	}
	testenv.Check(t, "delete", m.ContactChanged(ctx, corp, idmap.ChangeDeleteUser, "u6", "", nil))

	tests := []struct {
		name      string
		depts     []int64
		recursive bool
		want      []uint32
	}{
		{"direct", []int64{2}, false, []uint32{1}},
		{"recursive", []int64{2}, true, []uint32{1, 2, 3}},
		{"root recursive", []int64{1}, true, []uint32{0, 1, 2, 3}},
		{"two roots", []int64{3, 5}, false, []uint32{3, 4}},
		{"cycle", []int64{7}, true, []uint32{5}},
		{"unknown", []int64{99}, true, nil},
		{"none", nil, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.DepartmentMembers(ctx, corp, tt.depts, tt.recursive)
			testenv.Check(t, "DepartmentMembers", err)
			if !slices.Equal(got.ToArray(), tt.want) && !(len(tt.want) == 0 && got.IsEmpty()) {
				t.Errorf("DepartmentMembers(%v, %v) = %v; want %v", tt.depts, tt.recursive, got.ToArray(), tt.want)
			}
		})
	}

	all, err := m.AllMembers(ctx, corp)
	testenv.Check(t, "AllMembers", err)
	if want := []uint32{0, 1, 2, 3, 4, 5}; !slices.Equal(all.ToArray(), want) {
		t.Errorf("AllMembers = %v; want %v (u6 left)", all.ToArray(), want)
	}

	depts, err := m.Departments(ctx, corp)
	testenv.Check(t, "Departments", err)
	var ids []int64
	for _, d := range depts {
		ids = append(ids, d.ID)
	}
	// By parent, then Order descending: 3 (order 20) before 2 (order 10).
	if want := []int64{1, 5, 3, 2, 4, 7, 6}; !slices.Equal(ids, want) {
		t.Errorf("Departments order = %v; want %v", ids, want)
	}
	if depts[2] != (idmap.Department{ID: 3, ParentID: 1, Name: "ops", Order: 20}) {
		t.Errorf("Departments[2] = %+v", depts[2])
	}

	sets, err := m.DepartmentMemberSets(ctx, corp)
	testenv.Check(t, "DepartmentMemberSets", err)
	want := map[int64][]uint32{1: {0}, 2: {1}, 3: {3}, 4: {2, 3}, 5: {4}, 6: {5}}
	if len(sets) != len(want) {
		t.Errorf("DepartmentMemberSets has %d departments; want %d", len(sets), len(want))
	}
	for d, w := range want {
		if got := sets[d]; got == nil || !got.Equals(roaring.BitmapOf(w...)) {
			t.Errorf("DepartmentMemberSets[%d] = %v; want %v", d, got, w)
		}
	}

	names, err := m.UserIDs(ctx, corp, []uint32{0, 3, 6, 99})
	testenv.Check(t, "UserIDs", err)
	if len(names) != 3 || names[0] != "u0" || names[3] != "u3" || names[6] != "u6" {
		t.Errorf("UserIDs = %v; want 0:u0 3:u3 6:u6", names)
	}
}
