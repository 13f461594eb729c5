package idmap

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// Expand expands a (validated) audience: the one rule a registration's
// snapshot (tracker) and the dashboard's preview share, so the count a
// preview shows is the count a registration snapshots from the same
// directory.
func (m *Mapper) Expand(ctx context.Context, corpID string, a yidu.Audience) (yidu.Expansion, error) {
	x := yidu.Expansion{Recipients: roaring.New()}
	if a.All {
		all, err := m.AllMembers(ctx, corpID)
		if err != nil {
			return x, err
		}
		x.Recipients.Or(all)
	}
	if len(a.Departments) > 0 {
		members, err := m.DepartmentMembers(ctx, corpID, a.Departments, true)
		if err != nil {
			return x, err
		}
		x.Recipients.Or(members)
	}
	if len(a.Tags) > 0 {
		members, err := m.TagMembers(ctx, corpID, a.Tags)
		if err != nil {
			return x, err
		}
		x.Recipients.Or(members)
	}
	if len(a.UserIDs) > 0 {
		known, err := m.Known(ctx, corpID, a.UserIDs)
		if err != nil {
			return x, err
		}
		var missing []string
		for _, u := range a.UserIDs {
			if uid, ok := known[u]; ok {
				x.Recipients.Add(uid)
			} else {
				missing = append(missing, u)
			}
		}
		left, err := m.leftOf(ctx, corpID, missing)
		if err != nil {
			return x, err
		}
		for _, u := range missing {
			if left[fold(u)] {
				x.Left = append(x.Left, u)
			} else {
				x.Unknown = append(x.Unknown, u)
			}
		}
	}
	return x, nil
}

// leftOf returns the folded UserIDs among ids whose members left.
func (m *Mapper) leftOf(ctx context.Context, corpID string, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	err := m.eachFolded(ctx, corpID, ids, "SELECT userid_key FROM users WHERE corp_id = ? AND status = 2 AND userid_key", func(rows *sql.Rows) error {
		var key string
		if err := rows.Scan(&key); err != nil {
			return err
		}
		out[key] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: left members: %w", err)
	}
	return out, nil
}
