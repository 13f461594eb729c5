package idmap

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// UserIDs returns the UserIDs of uids; uids without a user are left out.
// Used to address WeCom (reminders, sending), so it reads MySQL. A UserID
// that breaks WeCom's rule is returned too (its reads count); callers that
// address WeCom skip it by yidu.UserID.Valid, the rule users.bad_userid
// records (Users carries it as yidu.User.BadUserID).
func (m *Mapper) UserIDs(ctx context.Context, corpID string, uids []uint32) (map[uint32]string, error) {
	users, err := m.Users(ctx, corpID, uids)
	if err != nil {
		return nil, err
	}
	out := make(map[uint32]string, len(users))
	for uid, u := range users {
		out[uid] = u.UserID
	}
	return out, nil
}

// Users returns the users of uids (any status), flagged ones included
// (yidu.User.BadUserID); uids without a user are left out. One query per
// chunkSize uids keeps statements and packets bounded whatever the caller
// asks for.
func (m *Mapper) Users(ctx context.Context, corpID string, uids []uint32) (map[uint32]yidu.User, error) {
	out := make(map[uint32]yidu.User, len(uids))
	bad := 0
	err := eachChunk(corpID, uids, func(marks string, args []any) error {
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx,
			"SELECT uid, userid, name, departments, status, bad_userid FROM users WHERE corp_id = ? AND uid IN ("+marks+")", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var u yidu.User
			var depts string
			if err := rows.Scan(&u.UID, &u.UserID, &u.Name, &depts, &u.Status, &u.BadUserID); err != nil {
				return err
			}
			// The column is only written through FormatDepartments; a value
			// that does not parse costs that member's departments, not the
			// whole page.
			if u.Departments, err = ParseDepartments(depts); err != nil {
				u.Departments = nil
				bad++
			}
			out[u.UID] = u
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: users: %w", err)
	}
	if bad > 0 {
		m.log.Warn("users.departments not parseable; departments left out", "corp", corpID, "users", bad)
	}
	return out, nil
}

// AllMembers returns the uids of every active member of the corp.
func (m *Mapper) AllMembers(ctx context.Context, corpID string) (*roaring.Bitmap, error) {
	m.metrics.query(opRead)
	rows, err := m.db.QueryContext(ctx, "SELECT uid FROM users WHERE corp_id = ? AND status = 1", corpID)
	if err != nil {
		return nil, fmt.Errorf("idmap: all members: %w", err)
	}
	defer rows.Close()
	bm := roaring.New()
	if err := addUIDs(bm, rows); err != nil {
		return nil, fmt.Errorf("idmap: all members: %w", err)
	}
	return bm, nil
}

// Departments returns the corp's departments ordered by parent, then Order
// descending (WeCom's display order), then id.
func (m *Mapper) Departments(ctx context.Context, corpID string) ([]yidu.Department, error) {
	m.metrics.query(opRead)
	out, err := sqlrows.List(ctx, m.db, func(rows *sql.Rows, d *yidu.Department) error {
		return rows.Scan(&d.ID, &d.ParentID, &d.Name, &d.Order)
	}, `SELECT dept_id, parent_id, name, sort_order FROM departments
		 WHERE corp_id = ? ORDER BY parent_id, sort_order DESC, dept_id`, corpID)
	if err != nil {
		return nil, fmt.Errorf("idmap: departments: %w", err)
	}
	return out, nil
}

// DepartmentMemberSets returns the active direct members of every department
// that has any; the dashboard derives recursive sets from Departments.
func (m *Mapper) DepartmentMemberSets(ctx context.Context, corpID string) (map[int64]*roaring.Bitmap, error) {
	m.metrics.query(opRead)
	rows, err := m.db.QueryContext(ctx,
		`SELECT ud.dept_id, ud.uid FROM user_departments ud
		 JOIN users u ON u.corp_id = ud.corp_id AND u.uid = ud.uid
		 WHERE ud.corp_id = ? AND u.status = 1`, corpID)
	if err != nil {
		return nil, fmt.Errorf("idmap: department members: %w", err)
	}
	defer rows.Close()
	out := map[int64]*roaring.Bitmap{}
	for rows.Next() {
		var dept int64
		var uid uint32
		if err := rows.Scan(&dept, &uid); err != nil {
			return nil, fmt.Errorf("idmap: department members: %w", err)
		}
		bm := out[dept]
		if bm == nil {
			bm = roaring.New()
			out[dept] = bm
		}
		bm.Add(uid)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("idmap: department members: %w", err)
	}
	return out, nil
}

// DepartmentMembers returns the active members of deptIDs; with recursive,
// of their sub-departments too (from departments.parent_id, cycle-safe).
// Unknown department ids add nobody.
func (m *Mapper) DepartmentMembers(ctx context.Context, corpID string, deptIDs []int64, recursive bool) (*roaring.Bitmap, error) {
	want := make(map[int64]struct{}, len(deptIDs))
	for _, d := range deptIDs {
		want[d] = struct{}{}
	}
	if recursive && len(want) > 0 {
		depts, err := m.Departments(ctx, corpID)
		if err != nil {
			return nil, err
		}
		for _, d := range yidu.NewOrg(depts).Subtree(deptIDs...) {
			want[d] = struct{}{}
		}
	}
	ids := make([]int64, 0, len(want))
	for d := range want {
		ids = append(ids, d)
	}
	bm := roaring.New()
	err := eachChunk(corpID, ids, func(marks string, args []any) error {
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx,
			`SELECT DISTINCT ud.uid FROM user_departments ud
			 JOIN users u ON u.corp_id = ud.corp_id AND u.uid = ud.uid
			 WHERE ud.corp_id = ? AND u.status = 1 AND ud.dept_id IN (`+marks+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		return addUIDs(bm, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: department members: %w", err)
	}
	return bm, nil
}

// placeholders returns "?,?,…" with n marks.
func placeholders(n int) string { return rowMarks("?", n) }

// eachChunk calls fn with every chunkSize ids in turn, as the marks and
// arguments of "corp_id = ? AND … IN (marks)": the corp, then the
// chunk's ids. It returns fn's first error.
func eachChunk[T any](corpID string, ids []T, fn func(marks string, args []any) error) error {
	for start := 0; start < len(ids); start += chunkSize {
		chunk := ids[start:min(start+chunkSize, len(ids))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, corpID)
		for _, id := range chunk {
			args = append(args, id)
		}
		if err := fn(placeholders(len(chunk)), args); err != nil {
			return err
		}
	}
	return nil
}

// Known returns the uids of the UserIDs that name active members
// (compared case-insensitively, as WeCom does), keyed by the UserIDs as
// given; the others are left out. It creates nothing: a registration's
// made-up UserID must not become a member.
func (m *Mapper) Known(ctx context.Context, corpID string, userIDs []string) (map[string]uint32, error) {
	if err := checkCorpID(corpID); err != nil {
		return nil, fmt.Errorf("idmap: known: %w", err)
	}
	byKey := make(map[string]uint32, len(userIDs))
	err := m.eachFolded(ctx, corpID, userIDs, "SELECT userid_key, uid FROM users WHERE corp_id = ? AND status = 1 AND userid_key", func(rows *sql.Rows) error {
		var key string
		var uid uint32
		if err := rows.Scan(&key, &uid); err != nil {
			return err
		}
		if old, ok := byKey[key]; !ok || uid < old {
			byKey[key] = uid
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: known: %w", err)
	}
	out := make(map[string]uint32, len(userIDs))
	for _, id := range userIDs {
		if uid, ok := byKey[fold(id)]; ok {
			out[id] = uid
		}
	}
	return out, nil
}

// eachFolded runs query, whose last words are "… userid_key", with
// " IN (…)" of every chunkSize of ids (folded: yidu.UserID.Fold) in turn,
// and hands each row to scan.
func (m *Mapper) eachFolded(ctx context.Context, corpID string, ids []string, query string, scan func(*sql.Rows) error) error {
	folded := make([]string, len(ids))
	for i, id := range ids {
		folded[i] = fold(id)
	}
	return eachChunk(corpID, folded, func(marks string, args []any) error {
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx, query+" IN ("+marks+")", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := scan(rows); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}
