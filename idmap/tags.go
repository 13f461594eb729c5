package idmap

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// extras are a listing's tags and department leaders resolved to uids, as
// the sync writes them with the memberships.
type extras struct {
	tags                      []yidu.Tag // ID and Name
	tagUsers                  [][2]int64 // tag, uid
	tagDepts                  [][2]int64 // tag, dept
	leaders                   [][2]int64 // dept, uid
	tagsListed, leadersListed bool
}

// resolveExtras maps the listing's tag members and leaders to the uids of
// listed members (byKey: folded UserID → uid); a UserID not listed (outside
// the read) is left out, as a department not listed is.
func resolveExtras(l yidu.Listing, byKey map[string]uint32, rep *Report) extras {
	x := extras{tagsListed: l.TagsListed, leadersListed: l.LeadersListed}
	listed := make(map[int64]bool, len(l.Departments))
	for _, d := range l.Departments {
		listed[d.ID] = true
	}
	seen := map[int64]bool{}
	for _, t := range l.Tags {
		if t.ID < 0 || seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		x.tags = append(x.tags, yidu.Tag{ID: t.ID, Name: t.Name})
		uids := map[uint32]bool{}
		for _, u := range t.UserIDs {
			if uid, ok := byKey[fold(u)]; ok && !uids[uid] {
				uids[uid] = true
				x.tagUsers = append(x.tagUsers, [2]int64{t.ID, int64(uid)})
			}
		}
		for _, d := range slices.Compact(slices.Sorted(slices.Values(t.Departments))) {
			if listed[d] {
				x.tagDepts = append(x.tagDepts, [2]int64{t.ID, d})
			}
		}
	}
	for d, ids := range l.Leaders {
		if !listed[d] {
			continue
		}
		uids := map[uint32]bool{}
		for _, u := range ids {
			if uid, ok := byKey[fold(u)]; ok && !uids[uid] {
				uids[uid] = true
				x.leaders = append(x.leaders, [2]int64{d, int64(uid)})
			}
		}
	}
	rep.Tags, rep.TagUsers, rep.TagDepartments, rep.Leaders = len(x.tags), len(x.tagUsers), len(x.tagDepts), len(x.leaders)
	return x
}

// writeExtras replaces the corp's tags, tag members and (within scope;
// nil: all) department leaders in tx. tag/list lists every tag of the
// corp whatever the read's scope (doc path 90216), so tags are replaced
// whole; tag/get's members are the app's visible range (doc path 90213),
// which is exactly whom the app can send to.
func (m *Mapper) writeExtras(ctx context.Context, tx *sql.Tx, corpID string, scope []int64, x extras) error {
	const rowsPerInsert = 2000
	if x.tagsListed {
		for _, q := range []string{
			"DELETE FROM tags WHERE corp_id = ?",
			"DELETE FROM tag_users WHERE corp_id = ?",
			"DELETE FROM tag_departments WHERE corp_id = ?",
		} {
			m.metrics.query(opSync)
			if _, err := tx.ExecContext(ctx, q, corpID); err != nil {
				return fmt.Errorf("idmap: sync tags: %w", err)
			}
		}
	}
	if !x.leadersListed {
		x.leaders = nil
	} else {
		err := m.clearScope(ctx, tx, corpID, scope, "DELETE FROM department_leaders WHERE corp_id = ?",
			"DELETE FROM department_leaders WHERE corp_id = ? AND dept_id IN (")
		if err != nil {
			return fmt.Errorf("idmap: sync leaders: %w", err)
		}
	}
	if !x.tagsListed {
		x.tags, x.tagUsers, x.tagDepts = nil, nil, nil
	}
	for start := 0; start < len(x.tags); start += rowsPerInsert {
		chunk := x.tags[start:min(start+rowsPerInsert, len(x.tags))]
		args := make([]any, 0, 3*len(chunk))
		for _, t := range chunk {
			args = append(args, corpID, t.ID, yidu.Truncate(t.Name, 255))
		}
		m.metrics.query(opSync)
		if _, err := tx.ExecContext(ctx, "INSERT INTO tags (corp_id, tag_id, name) VALUES "+rowMarks("(?,?,?)", len(chunk)), args...); err != nil {
			return fmt.Errorf("idmap: sync tags: %w", err)
		}
	}
	pairs := []struct {
		table string
		cols  string
		rows  [][2]int64
	}{
		{"tag_users", "tag_id, uid", x.tagUsers},
		{"tag_departments", "tag_id, dept_id", x.tagDepts},
		{"department_leaders", "dept_id, uid", x.leaders},
	}
	for _, p := range pairs {
		for start := 0; start < len(p.rows); start += rowsPerInsert {
			chunk := p.rows[start:min(start+rowsPerInsert, len(p.rows))]
			args := make([]any, 0, 3*len(chunk))
			for _, r := range chunk {
				args = append(args, corpID, r[0], r[1])
			}
			m.metrics.query(opSync)
			if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO "+p.table+" (corp_id, "+p.cols+") VALUES "+
				rowMarks("(?,?,?)", len(chunk)), args...); err != nil {
				return fmt.Errorf("idmap: sync %s: %w", p.table, err)
			}
		}
	}
	return nil
}

// execer is a *sql.DB or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// bumpVersion moves the corp's directory version on, with the write that
// changed the directory when q is its transaction.
func bumpVersion(ctx context.Context, q execer, corpID string) error {
	if _, err := q.ExecContext(ctx,
		"INSERT INTO directory_versions (corp_id, version) VALUES (?, 1) ON DUPLICATE KEY UPDATE version = version + 1", corpID); err != nil {
		return fmt.Errorf("idmap: directory version: %w", err)
	}
	return nil
}

// Version returns the corp's directory version: it moves with every sync
// and change_contact, so a cache of the directory keyed by it is never
// stale. 0 before the first.
func (m *Mapper) Version(ctx context.Context, corpID string) (uint64, error) {
	var v uint64
	m.metrics.query(opRead)
	err := m.db.QueryRowContext(ctx, "SELECT version FROM directory_versions WHERE corp_id = ?", corpID).Scan(&v)
	if err == sql.ErrNoRows {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("idmap: directory version: %w", err)
	}
	return v, nil
}

// TagMembers returns the active members of tags: each tag's users plus
// every member of its departments and their sub-departments. Unknown tags
// add nobody.
func (m *Mapper) TagMembers(ctx context.Context, corpID string, tags []int64) (*roaring.Bitmap, error) {
	bm := roaring.New()
	if len(tags) == 0 {
		return bm, nil
	}
	var depts []int64
	err := eachChunk(corpID, tags, func(marks string, args []any) error {
		m.metrics.query(opRead)
		rows, err := m.db.QueryContext(ctx,
			`SELECT tu.uid FROM tag_users tu JOIN users u ON u.corp_id = tu.corp_id AND u.uid = tu.uid
			 WHERE tu.corp_id = ? AND u.status = 1 AND tu.tag_id IN (`+marks+`)`, args...)
		if err != nil {
			return err
		}
		err = addUIDs(bm, rows)
		rows.Close()
		if err != nil {
			return err
		}
		m.metrics.query(opRead)
		rows, err = m.db.QueryContext(ctx, "SELECT DISTINCT dept_id FROM tag_departments WHERE corp_id = ? AND tag_id IN ("+marks+")", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d int64
			if err := rows.Scan(&d); err != nil {
				return err
			}
			depts = append(depts, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("idmap: tag members: %w", err)
	}
	if len(depts) > 0 {
		members, err := m.DepartmentMembers(ctx, corpID, depts, true)
		if err != nil {
			return nil, err
		}
		bm.Or(members)
	}
	return bm, nil
}

// Leaders returns the corp's department leaders as synced from
// department_leader (department/list, doc path 90208): department id →
// the uids of its leaders who are active members, ascending. A department
// without a leader is absent. For escalation (nearest leader above a
// member: walk Departments' parent_id up from the member's departments)
// and for leaders' scopes (SubtreeMembers of the departments they lead).
func (m *Mapper) Leaders(ctx context.Context, corpID string) (map[int64][]uint32, error) {
	m.metrics.query(opRead)
	rows, err := m.db.QueryContext(ctx,
		`SELECT dl.dept_id, dl.uid FROM department_leaders dl JOIN users u ON u.corp_id = dl.corp_id AND u.uid = dl.uid
		 WHERE dl.corp_id = ? AND u.status = 1 ORDER BY dl.dept_id, dl.uid`, corpID)
	if err != nil {
		return nil, fmt.Errorf("idmap: leaders: %w", err)
	}
	defer rows.Close()
	out := map[int64][]uint32{}
	for rows.Next() {
		var d int64
		var uid uint32
		if err := rows.Scan(&d, &uid); err != nil {
			return nil, fmt.Errorf("idmap: leaders: %w", err)
		}
		out[d] = append(out[d], uid)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("idmap: leaders: %w", err)
	}
	return out, nil
}

// Tags returns the corp's tags (ID and Name; members are left out),
// ordered by id.
func (m *Mapper) Tags(ctx context.Context, corpID string) ([]yidu.Tag, error) {
	m.metrics.query(opRead)
	out, err := sqlrows.List(ctx, m.db, func(rows *sql.Rows, t *yidu.Tag) error {
		return rows.Scan(&t.ID, &t.Name)
	}, "SELECT tag_id, name FROM tags WHERE corp_id = ? ORDER BY tag_id", corpID)
	if err != nil {
		return nil, fmt.Errorf("idmap: tags: %w", err)
	}
	return out, nil
}

// LedDepartments returns the departments userID leads, as synced from
// department_leader (department/list, doc path 90208), ascending; none
// for a member who left or leads nothing. access.Leaders: a leader views
// the subtrees they lead.
func (m *Mapper) LedDepartments(ctx context.Context, corpID, userID string) ([]int64, error) {
	m.metrics.query(opRead)
	out, err := sqlrows.List(ctx, m.db, func(rows *sql.Rows, d *int64) error { return rows.Scan(d) },
		`SELECT dl.dept_id FROM department_leaders dl JOIN users u ON u.corp_id = dl.corp_id AND u.uid = dl.uid
		 WHERE dl.corp_id = ? AND u.userid = ? AND u.status = 1 ORDER BY dl.dept_id`, corpID, userID)
	if err != nil {
		return nil, fmt.Errorf("idmap: led departments: %w", err)
	}
	return out, nil
}

// DirectoryVersion is Version as access.Versioned wants it: a scope's
// bitmap is kept until the directory changes.
func (m *Mapper) DirectoryVersion(ctx context.Context, corpID string) (int64, error) {
	v, err := m.Version(ctx, corpID)
	return int64(v), err
}
