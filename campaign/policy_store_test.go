package campaign

import (
	"context"
	"testing"

	"github.com/yidu-io/yidu/internal/testenv"
)

// TestSQLDirectory: members who left are not active; the tree and the
// memberships are MySQL's.
func TestSQLDirectory(t *testing.T) {
	db := testenv.MySQL(t)
	for _, q := range []string{
		`INSERT INTO users (corp_id, uid, userid, name, status) VALUES ('c', 1, 'zhangsan', '张三', 1), ('c', 2, 'lisi', '李四', 2), ('c', 3, 'wangwu', '', 1)`,
		`INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES ('c', 1, 0, '总部'), ('c', 2, 1, 'HR')`,
		`INSERT INTO user_departments (corp_id, dept_id, uid) VALUES ('c', 2, 1), ('c', 1, 3), ('c', 2, 3)`,
	} {
		_, err := db.Exec(q)
		testenv.Check(t, q, err)
	}
	d := SQLDirectory{DB: db}
	got, err := d.Active(context.Background(), "c", []uint32{1, 2, 3, 4})
	testenv.Check(t, "Active", err)
	if len(got) != 2 || got[1] != (Member{"zhangsan", "张三"}) || got[3].UserID != "wangwu" {
		t.Errorf("Active = %v; want zhangsan and wangwu (lisi left, 4 unknown)", got)
	}
	org, err := d.Org(context.Background(), "c")
	testenv.Check(t, "Org", err)
	if org.Parent[2] != 1 || len(org.Departments[3]) != 2 || len(org.Departments[1]) != 1 {
		t.Errorf("Org = %+v", org)
	}
}
