package idmap_test

import (
	"context"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestOrgAndActive: what the round engine reads (campaign.People,
// OrgSource, Seats): members who left are not active; the tree and the
// memberships are MySQL's.
func TestOrgAndActive(t *testing.T) {
	m, db := newTestMapper(t)
	for _, q := range []string{
		`INSERT INTO users (corp_id, uid, userid, name, status) VALUES ('c', 1, 'zhangsan', '张三', 1), ('c', 2, 'lisi', '李四', 2), ('c', 3, 'wangwu', '', 1)`,
		`INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ('c', 1, 0, '总部'), ('c', 2, 1, 'HR')`,
		`INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ('c', 2, 1), ('c', 1, 3), ('c', 2, 3)`,
		`INSERT INTO department_leaders (corp_id, dept_id, uid) VALUES ('c', 2, 1)`,
	} {
		_, err := db.Exec(q)
		testenv.Check(t, q, err)
	}
	ctx := context.Background()
	got, err := m.Active(ctx, "c", []uint32{1, 2, 3, 4})
	testenv.Check(t, "Active", err)
	if len(got) != 2 || got[1].UserID != "zhangsan" || got[1].Name != "张三" || got[3].UserID != "wangwu" {
		t.Errorf("Active = %v; want zhangsan and wangwu (lisi left, 4 unknown)", got)
	}
	n, err := m.CountActive(ctx, "c")
	testenv.Check(t, "CountActive", err)
	if n != 2 {
		t.Errorf("CountActive = %d; want 2", n)
	}
	org, err := m.Org(ctx, "c")
	testenv.Check(t, "Org", err)
	if org.Parent(2) != 1 || len(org.Memberships[3]) != 2 || len(org.Memberships[1]) != 1 || len(org.Leaders[2]) != 1 {
		t.Errorf("Org = %+v", org)
	}
}
