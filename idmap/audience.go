package idmap

import (
	"context"
	"fmt"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// Expansion is yidu.Expansion.
//
// Deprecated: moved to yidu.Expansion; kept while other branches merge.
type Expansion = yidu.Expansion

// Expand expands a (validated) audience: the one rule a registration's
// snapshot (tracker) and the dashboard's preview share, so the count a
// preview shows is the count a registration snapshots from the same
// directory.
func (m *Mapper) Expand(ctx context.Context, corpID string, a yidu.Audience) (Expansion, error) {
	x := Expansion{Recipients: roaring.New()}
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
	for start := 0; start < len(ids); start += chunkSize {
		chunk := ids[start:min(start+chunkSize, len(ids))]
		args := make([]any, 0, len(chunk)+1)
		args = append(args, corpID)
		for _, id := range chunk {
			args = append(args, fold(id))
		}
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx, "SELECT userid_key FROM users WHERE corp_id = ? AND status = 2 AND userid_key IN (?"+
			strings.Repeat(",?", len(chunk)-1)+")", args...)
		if err != nil {
			return nil, fmt.Errorf("idmap: left members: %w", err)
		}
		for rows.Next() {
			var key string
			if err := rows.Scan(&key); err != nil {
				rows.Close()
				return nil, fmt.Errorf("idmap: left members: %w", err)
			}
			out[key] = true
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("idmap: left members: %w", err)
		}
	}
	return out, nil
}
