package campaign

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// SQLDirectory reads the synced directory from MySQL for the round engine:
// active members (users.status 1) and the department tree with its
// leaders (department_leaders, migration 00010, synced from
// department/list's department_leader, doc path 90208).
type SQLDirectory struct{ DB *sql.DB }

// Active returns the active members among uids.
func (d SQLDirectory) Active(ctx context.Context, corpID string, uids []uint32) (map[uint32]Member, error) {
	out := make(map[uint32]Member, len(uids))
	for start := 0; start < len(uids); start += RoundBatch {
		chunk := uids[start:min(start+RoundBatch, len(uids))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, corpID)
		for _, u := range chunk {
			args = append(args, u)
		}
		rows, err := d.DB.QueryContext(ctx, `SELECT uid, userid, name FROM users WHERE corp_id = ? AND status = 1 AND uid IN (?`+
			strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("campaign: members: %w", err)
		}
		for rows.Next() {
			var uid uint32
			var m Member
			var name sql.NullString
			if err := rows.Scan(&uid, &m.UserID, &name); err != nil {
				rows.Close()
				return nil, fmt.Errorf("campaign: members: %w", err)
			}
			m.Name = name.String
			out[uid] = m
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("campaign: members: %w", err)
		}
	}
	return out, nil
}

// Org returns the corp's department tree, leaders and memberships.
func (d SQLDirectory) Org(ctx context.Context, corpID string) (Org, error) {
	org := Org{Parent: map[int64]int64{}, Leaders: map[int64][]uint32{}, Departments: map[uint32][]int64{}}
	scan := func(q string, row func(a, b int64)) error {
		rows, err := d.DB.QueryContext(ctx, q, corpID)
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
	if err := scan(`SELECT dept_id, parent_id FROM departments WHERE corp_id = ?`, func(a, b int64) { org.Parent[a] = b }); err != nil {
		return org, fmt.Errorf("campaign: departments: %w", err)
	}
	if err := scan(`SELECT uid, dept_id FROM user_departments WHERE corp_id = ?`, func(a, b int64) {
		org.Departments[uint32(a)] = append(org.Departments[uint32(a)], b)
	}); err != nil {
		return org, fmt.Errorf("campaign: memberships: %w", err)
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
		return org, fmt.Errorf("campaign: leaders: %w", err)
	}
	return org, nil
}

// Run ticks every interval until ctx ends: the round engine's loop.
func (r *Rounds) Run(ctx context.Context, every time.Duration) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.Tick(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("follow-up tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
