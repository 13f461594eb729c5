package idmap

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
)

// Index is one corp's directory in memory at one directory version: the
// department tree with each subtree's active members, the tags with theirs,
// the leaders, and the active people for search. Read-only once built:
// safe for concurrent use. Mapper.Index rebuilds it when the version moves
// (every sync and change_contact), so it never answers from a stale
// directory for longer than one version check.
type Index struct {
	// Version is the directory version it was read at.
	Version uint64

	org      *yidu.Org                 // the tree, in WeCom's display order (Mapper.Departments)
	subtree  map[int64]*roaring.Bitmap // active members of the department's whole subtree
	leaders  map[int64][]string        // dept → leaders' UserIDs (active)
	leadUIDs map[int64][]uint32
	tags     []yidu.TagCount
	tagSets  map[int64]*roaring.Bitmap
	all      *roaring.Bitmap
	people   []yidu.Person
	keys     []string // people[i]'s UserID folded + "\x00" + name lower-cased, for search
}

// indexCache holds each corp's last Index.
type indexCache struct {
	mu sync.Mutex
	m  map[string]*Index
}

// dropIndex forgets corpID's Index (after this process wrote the
// directory) and has the roster check the version again; other processes
// notice the version.
func (m *Mapper) dropIndex(corpID string) {
	m.rosterMoved(corpID, nil)
	m.indexes.mu.Lock()
	delete(m.indexes.m, corpID)
	m.indexes.mu.Unlock()
}

// Index returns corpID's directory Index at the current directory version,
// built from MySQL when the version moved (one build at a time per corp;
// concurrent callers share it). A version check is one primary-key read.
func (m *Mapper) Index(ctx context.Context, corpID string) (*Index, error) {
	if err := checkCorpID(corpID); err != nil {
		return nil, fmt.Errorf("idmap: index: %w", err)
	}
	v, err := m.Version(ctx, corpID)
	if err != nil {
		return nil, err
	}
	m.indexes.mu.Lock()
	idx := m.indexes.m[corpID]
	m.indexes.mu.Unlock()
	if idx != nil && idx.Version == v {
		return idx, nil
	}
	ch := m.sf.DoChan("index\x00"+corpID, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*lookupTimeout)
		defer cancel()
		idx, err := m.buildIndex(ctx, corpID)
		if err != nil {
			return nil, err
		}
		m.indexes.mu.Lock()
		if m.indexes.m == nil {
			m.indexes.m = map[string]*Index{}
		}
		if old := m.indexes.m[corpID]; old == nil || old.Version <= idx.Version {
			m.indexes.m[corpID] = idx
		}
		m.indexes.mu.Unlock()
		return idx, nil
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Index), nil
	}
}

// buildIndex reads the corp's directory in one consistent snapshot (a
// read-only REPEATABLE READ transaction), so the version matches the rows.
func (m *Mapper) buildIndex(ctx context.Context, corpID string) (*Index, error) {
	tx, err := m.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("idmap: index: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	r := &indexRead{m: m, tx: tx, corpID: corpID, userIDs: map[uint32]string{}, direct: map[int64]*roaring.Bitmap{}, tagDepts: map[int64][]int64{},
		idx: &Index{leaders: map[int64][]string{}, leadUIDs: map[int64][]uint32{}, tagSets: map[int64]*roaring.Bitmap{}, all: roaring.New()}}
	for _, step := range []func(context.Context) error{r.readOrg, r.readPeople, r.readMemberships, r.readTags} {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	r.finish()
	return r.idx, nil
}

// indexRead is one buildIndex: its read-only transaction, the Index it
// fills and what it keeps between the reads.
type indexRead struct {
	m      *Mapper
	tx     *sql.Tx
	corpID string
	idx    *Index
	// userIDs are the active members' UserIDs by uid.
	userIDs map[uint32]string
	// direct are each department's own members; tagDepts each tag's
	// departments.
	direct   map[int64]*roaring.Bitmap
	tagDepts map[int64][]int64
}

// each runs q for the corp and hands each row to scan; what names the
// rows in the error.
func (r *indexRead) each(ctx context.Context, what, q string, scan func(*sql.Rows) error) error {
	r.m.metrics.query(opRead)
	rows, err := r.tx.QueryContext(ctx, q, r.corpID)
	if err != nil {
		return fmt.Errorf("idmap: index %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("idmap: index %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("idmap: index %s: %w", what, err)
	}
	return nil
}

// readOrg reads the directory's version and its departments.
func (r *indexRead) readOrg(ctx context.Context) error {
	idx := r.idx
	if err := r.each(ctx, "version", "SELECT version FROM directory_versions WHERE corp_id = ?", func(rows *sql.Rows) error {
		return rows.Scan(&idx.Version)
	}); err != nil {
		return err
	}
	var depts []yidu.Department
	err := r.each(ctx, "departments", `SELECT dept_id, parent_id, name, sort_order FROM departments
		WHERE corp_id = ? ORDER BY parent_id, sort_order DESC, dept_id`, func(rows *sql.Rows) error {
		var d yidu.Department
		if err := rows.Scan(&d.ID, &d.ParentID, &d.Name, &d.Order); err != nil {
			return err
		}
		depts = append(depts, d)
		return nil
	})
	if err != nil {
		return err
	}
	idx.org = yidu.NewOrg(depts)
	return nil
}

// readPeople reads the active members.
func (r *indexRead) readPeople(ctx context.Context) error {
	idx, userIDs := r.idx, r.userIDs
	return r.each(ctx, "users", "SELECT uid, userid, name, departments FROM users WHERE corp_id = ? AND status = 1 ORDER BY uid", func(rows *sql.Rows) error {
		var p yidu.Person
		var depts string
		if err := rows.Scan(&p.UID, &p.UserID, &p.Name, &depts); err != nil {
			return err
		}
		p.Departments, _ = ParseDepartments(depts) // unparseable: none (written only by FormatDepartments)
		idx.people = append(idx.people, p)
		idx.keys = append(idx.keys, fold(p.UserID)+"\x00"+strings.ToLower(p.Name))
		idx.all.Add(p.UID)
		userIDs[p.UID] = p.UserID
		return nil
	})
}

// readMemberships reads the active members' departments and the
// departments' leaders.
func (r *indexRead) readMemberships(ctx context.Context) error {
	idx, userIDs, direct := r.idx, r.userIDs, r.direct
	err := r.each(ctx, "memberships", "SELECT dept_id, uid FROM user_departments WHERE corp_id = ?", func(rows *sql.Rows) error {
		var d int64
		var uid uint32
		if err := rows.Scan(&d, &uid); err != nil {
			return err
		}
		if _, active := userIDs[uid]; active {
			bitmapOf(direct, d).Add(uid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.each(ctx, "leaders", "SELECT dept_id, uid FROM department_leaders WHERE corp_id = ? ORDER BY dept_id, uid", func(rows *sql.Rows) error {
		var d int64
		var uid uint32
		if err := rows.Scan(&d, &uid); err != nil {
			return err
		}
		if id, active := userIDs[uid]; active {
			idx.leaders[d] = append(idx.leaders[d], id)
			idx.leadUIDs[d] = append(idx.leadUIDs[d], uid)
		}
		return nil
	})
}

// readTags reads the tags, their active members and their departments.
func (r *indexRead) readTags(ctx context.Context) error {
	idx, userIDs, tagDepts := r.idx, r.userIDs, r.tagDepts
	err := r.each(ctx, "tags", "SELECT tag_id, name FROM tags WHERE corp_id = ? ORDER BY tag_id", func(rows *sql.Rows) error {
		var t yidu.TagCount
		if err := rows.Scan(&t.ID, &t.Name); err != nil {
			return err
		}
		idx.tags = append(idx.tags, t)
		idx.tagSets[t.ID] = roaring.New()
		return nil
	})
	if err != nil {
		return err
	}
	err = r.each(ctx, "tag users", "SELECT tag_id, uid FROM tag_users WHERE corp_id = ?", func(rows *sql.Rows) error {
		var t int64
		var uid uint32
		if err := rows.Scan(&t, &uid); err != nil {
			return err
		}
		if _, active := userIDs[uid]; active && idx.tagSets[t] != nil {
			idx.tagSets[t].Add(uid)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.each(ctx, "tag departments", "SELECT tag_id, dept_id FROM tag_departments WHERE corp_id = ?", func(rows *sql.Rows) error {
		var t, d int64
		if err := rows.Scan(&t, &d); err != nil {
			return err
		}
		tagDepts[t] = append(tagDepts[t], d)
		return nil
	})
}

// finish computes the subtrees, bottom-up and cycle-safe (yidu.Org's one
// walk), and each tag's members: its own and its departments' subtrees.
func (r *indexRead) finish() {
	idx := r.idx
	idx.subtree = idx.org.SubtreeSets(r.direct)
	idx.org.Leaders = idx.leadUIDs
	for i := range idx.tags {
		set := idx.tagSets[idx.tags[i].ID]
		for _, d := range r.tagDepts[idx.tags[i].ID] {
			if bm := idx.subtree[d]; bm != nil {
				set.Or(bm)
			} else if own := r.direct[d]; own != nil {
				set.Or(own)
			}
		}
		idx.tags[i].Members = int(set.GetCardinality())
	}
}

func bitmapOf(m map[int64]*roaring.Bitmap, k int64) *roaring.Bitmap {
	bm := m[k]
	if bm == nil {
		bm = roaring.New()
		m[k] = bm
	}
	return bm
}

// Departments returns every department with its subtree's active member
// count and leaders, in WeCom's display order (by parent, then order).
func (x *Index) Departments() []yidu.DepartmentNode {
	out := make([]yidu.DepartmentNode, 0, len(x.org.Departments()))
	for _, d := range x.org.Departments() {
		out = append(out, yidu.DepartmentNode{Department: d, Members: int(x.subtree[d.ID].GetCardinality()), Leaders: x.leaders[d.ID]})
	}
	return out
}

// Department returns department id, if the directory has it.
func (x *Index) Department(id int64) (yidu.Department, bool) { return x.org.Department(id) }

// Children returns the ids of id's direct sub-departments (0: the roots).
func (x *Index) Children(id int64) []int64 { return x.org.Children(id) }

// Org returns the department tree with its (active) leaders.
func (x *Index) Org() *yidu.Org { return x.org }

// SubtreeMembers returns a copy of the active members of the departments
// ids and their sub-departments (a leader's or a viewer's scope). Unknown
// ids add nobody.
func (x *Index) SubtreeMembers(ids ...int64) *roaring.Bitmap {
	bm := roaring.New()
	for _, d := range ids {
		if s := x.subtree[d]; s != nil {
			bm.Or(s)
		}
	}
	return bm
}

// Leaders returns department id's leaders' uids (active members), as
// department_leader lists them (doc path 90208); nil for none.
func (x *Index) Leaders(id int64) []uint32 { return x.leadUIDs[id] }

// LedBy returns the departments uid leads, ascending.
func (x *Index) LedBy(uid uint32) []int64 {
	var out []int64
	for d, uids := range x.leadUIDs {
		if slices.Contains(uids, uid) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// Tags returns the tags with their active member counts, by id.
func (x *Index) Tags() []yidu.TagCount { return x.tags }

// All returns a copy of every active member.
func (x *Index) All() *roaring.Bitmap { return x.all.Clone() }

// Members counts the active members.
func (x *Index) Members() int { return len(x.people) }

// Search returns up to limit active people whose UserID or name contains
// q (case-insensitively; q trimmed): those whose UserID or name starts
// with q first, then the others, each group in uid order. An empty q finds
// nobody. A scan of the prepared keys: ~100,000 short strings take a few
// milliseconds (docs/benchmarks.md), with no index to keep in step.
func (x *Index) Search(q string, limit int) []yidu.Person {
	q = strings.ToLower(strings.TrimSpace(q))
	if q == "" || limit <= 0 || strings.ContainsRune(q, 0) {
		return nil
	}
	var prefix, inner []int
	for i, k := range x.keys {
		j := strings.Index(k, q)
		if j < 0 {
			continue
		}
		sep := strings.IndexByte(k, 0)
		if j == 0 || j == sep+1 {
			if len(prefix) < limit {
				prefix = append(prefix, i)
			}
		} else if len(inner) < limit {
			inner = append(inner, i)
		}
		if len(prefix) >= limit {
			break
		}
	}
	out := make([]yidu.Person, 0, min(limit, len(prefix)+len(inner)))
	for _, i := range append(prefix, inner...) {
		if len(out) == limit {
			break
		}
		out = append(out, x.people[i])
	}
	return out
}
