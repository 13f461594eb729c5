package idmap

import (
	"context"
	"database/sql"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// Querier is what the package-level reads of idmap's tables need:
// *sql.DB or *sql.Tx. Other packages read users and departments through
// these functions, not by their own SQL (one owner per table group,
// issue 47).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// DepartmentNames are corp's department names now, by id.
func DepartmentNames(ctx context.Context, q Querier, corpID string) (map[int64]string, error) {
	return sqlrows.Map[int64, string](ctx, q, "SELECT dept_id, name FROM departments WHERE corp_id = ?", corpID)
}

// UIDs returns the uids users holds for the UserIDs, spelt exactly
// (members who left included), by UserID; a UserID users does not hold is
// missing from it.
func UIDs(ctx context.Context, q Querier, corpID string, userIDs []string) (map[string]uint32, error) {
	if len(userIDs) == 0 {
		return map[string]uint32{}, nil
	}
	args := make([]any, 0, len(userIDs)+1)
	args = append(args, corpID)
	for _, u := range userIDs {
		args = append(args, u)
	}
	rows, err := q.QueryContext(ctx, "SELECT userid, uid FROM users WHERE corp_id = ? AND userid IN (?"+strings.Repeat(",?", len(userIDs)-1)+")", args...)
	if err != nil {
		return nil, err
	}
	return scanUIDs(rows, len(userIDs))
}

// scanUIDs reads rows of (key, uid) by key and closes them; of twins (see
// migrations/00002) the lowest uid.
func scanUIDs(rows *sql.Rows, n int) (map[string]uint32, error) {
	defer rows.Close()
	found := make(map[string]uint32, n)
	for rows.Next() {
		var key string
		var uid uint32
		if err := rows.Scan(&key, &uid); err != nil {
			return nil, err
		}
		if old, ok := found[key]; !ok || uid < old {
			found[key] = uid
		}
	}
	return found, rows.Err()
}

// addUIDs adds each row's uid, the one column of rows, to bm.
func addUIDs(bm *roaring.Bitmap, rows *sql.Rows) error {
	for rows.Next() {
		var uid uint32
		if err := rows.Scan(&uid); err != nil {
			return err
		}
		bm.Add(uid)
	}
	return rows.Err()
}

// Tree is corp's department tree now: each department's id and parent.
func Tree(ctx context.Context, q Querier, corpID string) (*yidu.Org, error) {
	depts, err := sqlrows.List(ctx, q, func(rows *sql.Rows, d *yidu.Department) error {
		return rows.Scan(&d.ID, &d.ParentID)
	}, "SELECT dept_id, parent_id FROM departments WHERE corp_id = ?", corpID)
	if err != nil {
		return nil, err
	}
	return yidu.NewOrg(depts), nil
}

// InDepartments returns the direct members of deptIDs (user_departments),
// members who left included.
func InDepartments(ctx context.Context, q Querier, corpID string, deptIDs []int64) (*roaring.Bitmap, error) {
	bm := roaring.New()
	err := eachChunk(corpID, deptIDs, func(marks string, args []any) error {
		rows, err := q.QueryContext(ctx, "SELECT uid FROM user_departments WHERE corp_id = ? AND dept_id IN ("+marks+")", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return addUIDs(bm, rows)
	})
	if err != nil {
		return nil, err
	}
	return bm, nil
}
