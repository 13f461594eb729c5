package idmap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/yidu-io/yidu"
)

// What the follow-up round engine reads of the synced directory
// (campaign.People, campaign.OrgSource, campaign.Seats): campaign declares
// it and never reads idmap's tables itself.

// Active returns the active members among uids (users.status 1); a member
// who left is absent from the answer.
func (m *Mapper) Active(ctx context.Context, corpID string, uids []uint32) (map[uint32]yidu.User, error) {
	out := make(map[uint32]yidu.User, len(uids))
	err := eachChunk(corpID, uids, func(marks string, args []any) error {
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx, `SELECT uid, userid, name FROM users WHERE corp_id = ? AND status = 1 AND uid IN (`+marks+`)`, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			u := yidu.User{Status: yidu.StatusActive}
			var name sql.NullString
			if err := rows.Scan(&u.UID, &u.UserID, &name); err != nil {
				return err
			}
			u.Name = name.String
			out[u.UID] = u
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: active members: %w", err)
	}
	return out, nil
}

// CountActive counts the corp's active members (the seats a daily quota
// defaults from).
func (m *Mapper) CountActive(ctx context.Context, corpID string) (int, error) {
	var n int
	m.metrics.query(opRead)
	if err := m.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM users WHERE corp_id = ? AND status = 1`, corpID).Scan(&n); err != nil {
		return 0, fmt.Errorf("idmap: members of %s: %w", corpID, err)
	}
	return n, nil
}

// Org returns the corp's department tree with its leaders
// (department_leaders, migration 00010, synced from department/list's
// department_leader, doc path 90208) and every member's departments, as
// MySQL has them now (members who left included: escalation asks about
// a notice's recipients, who are filtered by the caller).
func (m *Mapper) Org(ctx context.Context, corpID string) (*yidu.Org, error) {
	scan := func(q string, row func(a, b int64)) error {
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx, q, corpID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a, b int64
			if err := rows.Scan(&a, &b); err != nil {
				return err
			}
			row(a, b)
		}
		return rows.Err()
	}
	var depts []yidu.Department
	if err := scan(`SELECT dept_id, parent_id FROM departments WHERE corp_id = ?`, func(a, b int64) {
		depts = append(depts, yidu.Department{ID: a, ParentID: b})
	}); err != nil {
		return nil, fmt.Errorf("idmap: departments: %w", err)
	}
	org := yidu.NewOrg(depts)
	org.Leaders, org.Memberships = map[int64][]uint32{}, map[uint32][]int64{}
	if err := scan(`SELECT uid, dept_id FROM user_departments WHERE corp_id = ?`, func(a, b int64) {
		org.Memberships[uint32(a)] = append(org.Memberships[uint32(a)], b)
	}); err != nil {
		return nil, fmt.Errorf("idmap: memberships: %w", err)
	}
	err := scan(`SELECT dept_id, uid FROM department_leaders WHERE corp_id = ?`, func(a, b int64) {
		org.Leaders[a] = append(org.Leaders[a], uint32(b))
	})
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		// A database before migration 00010 has no leaders: every digest
		// goes to the fallback.
		err = nil
	}
	if err != nil {
		return nil, fmt.Errorf("idmap: leaders: %w", err)
	}
	return org, nil
}
