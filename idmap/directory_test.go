package idmap_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

func TestDirectoryReads(t *testing.T) {
	m, db := newTestMapper(t)
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
	if depts[2] != (yidu.Department{ID: 3, ParentID: 1, Name: "ops", Order: 20}) {
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

func TestUsers(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()
	const corp = "corp"
	ids := make([]string, 1200)
	for i := range ids {
		ids[i] = fmt.Sprintf("u%04d", i)
	}
	mustAssign(t, m, corp, ids...)     // uids 0..1199
	mustAssign(t, m, "other", "u0000") // same uid 0 in another corp
	testenv.Check(t, "departments", m.ContactChanged(ctx, corp, idmap.ChangeUpdateUser, "u0001", "", []int64{3, 1}))
	testenv.Check(t, "leave", m.ContactChanged(ctx, corp, idmap.ChangeDeleteUser, "u0002", "", nil))
	_, err := db.Exec(`UPDATE users SET name = CASE userid WHEN 'u0001' THEN '张三' WHEN 'u1100' THEN 'Zoë 李' ELSE name END,
		departments = IF(userid = 'u0003', 'garbage', departments) WHERE corp_id = ?`, corp)
	testenv.Check(t, "seed names", err)
	_, err = db.Exec("UPDATE users SET name = 'not ours' WHERE corp_id = 'other'")
	testenv.Check(t, "seed other corp", err)

	tests := []struct {
		name    string
		uids    []uint32
		queries float64
		want    map[uint32]yidu.User // checked entries; len(got) must be wantLen
		wantLen int
	}{
		{"none", nil, 0, nil, 0},
		{"unknown only", []uint32{5000, 5001}, 1, nil, 0},
		{"names, departments, status", []uint32{0, 1, 2, 3, 1100, 9999}, 1, map[uint32]yidu.User{
			0:    {UID: 0, UserID: "u0000", Departments: []int64{}, Status: yidu.StatusActive},
			1:    {UID: 1, UserID: "u0001", Name: "张三", Departments: []int64{3, 1}, Status: yidu.StatusActive},
			2:    {UID: 2, UserID: "u0002", Departments: []int64{}, Status: yidu.StatusLeft},
			3:    {UID: 3, UserID: "u0003", Status: yidu.StatusActive}, // unparseable departments: left out
			1100: {UID: 1100, UserID: "u1100", Name: "Zoë 李", Departments: []int64{}, Status: yidu.StatusActive},
		}, 5},
		// 2500 uids are three statements of ≤ 1000; 1200 exist.
		{"chunked", seq(2500), 3, map[uint32]yidu.User{
			999:  {UID: 999, UserID: "u0999", Departments: []int64{}, Status: yidu.StatusActive},
			1000: {UID: 1000, UserID: "u1000", Departments: []int64{}, Status: yidu.StatusActive},
			1199: {UID: 1199, UserID: "u1199", Departments: []int64{}, Status: yidu.StatusActive},
		}, 1200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testutil.ToFloat64(idmap.QueryCounter(m, "read"))
			got, err := m.Users(ctx, corp, tt.uids)
			testenv.Check(t, "Users", err)
			if q := testutil.ToFloat64(idmap.QueryCounter(m, "read")) - before; q != tt.queries {
				t.Errorf("Users(%d uids) sent %v queries; want %v", len(tt.uids), q, tt.queries)
			}
			if len(got) != tt.wantLen {
				t.Errorf("Users(%d uids) returned %d users; want %d", len(tt.uids), len(got), tt.wantLen)
			}
			for uid, w := range tt.want {
				g, ok := got[uid]
				if !ok || g.UID != w.UID || g.UserID != w.UserID || g.Name != w.Name || g.Status != w.Status ||
					!slices.Equal(g.Departments, w.Departments) || (g.Departments == nil) != (w.Departments == nil) {
					t.Errorf("Users()[%d] = %+v, %v; want %+v", uid, g, ok, w)
				}
			}
		})
	}

	t.Run("cancelled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := m.Users(cctx, corp, []uint32{0}); !errors.Is(err, context.Canceled) {
			t.Errorf("Users with a cancelled context = %v; want context.Canceled", err)
		}
	})
}

// seq returns 0, 1, …, n-1.
func seq(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(i)
	}
	return out
}
