package progress

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// deptTree is a corp's departments with their recursive member sets: a
// department's set is the union of its direct members and its whole
// subtree, so a person in two sub-departments counts once in the parent.
type deptTree struct {
	org   *yidu.Org
	order []deptNode // depth-first, parents before children
	byID  map[int64]*deptNode
}

type deptNode struct {
	ID, ParentID int64
	Name         string
	Depth        int
	Members      *roaring.Bitmap // recursive
	Direct       *roaring.Bitmap // nil when none
}

// buildDeptTree computes the recursive sets with yidu.Org's one walk:
// departments whose parent is unknown are roots; a cycle (corrupt
// directory) is cut where it is met instead of looping.
func buildDeptTree(depts []yidu.Department, direct map[int64]*roaring.Bitmap) *deptTree {
	t := &deptTree{org: yidu.NewOrg(depts)}
	sets := t.org.SubtreeSets(direct)
	t.order = make([]deptNode, 0, len(depts))
	t.org.Walk(func(d yidu.Department, depth int) {
		t.order = append(t.order, deptNode{ID: d.ID, ParentID: d.ParentID, Name: d.Name, Depth: depth, Members: sets[d.ID], Direct: direct[d.ID]})
	})
	t.byID = make(map[int64]*deptNode, len(t.order))
	for i := range t.order {
		t.byID[t.order[i].ID] = &t.order[i]
	}
	return t
}

// newDeptCache keeps each corp's tree for ttl: the directory changes
// rarely and rebuilding 500 unions on every poll would dominate the
// request. The tree is built when a message is registered (WarmDepartments:
// the registration has just read the same directory) and rebuilt in the
// background once older than ttl while the old one answers, so a message
// page's departments never wait on reading the directory (2,000
// memberships on the demo's embedded MySQL, mid-storm, took 18 s).
func newDeptCache(dir Directory, now func() time.Time, ttl time.Duration) *cache[*deptTree] {
	c := newCache(now, ttl, maxCacheEntries, func(ctx context.Context, corp string) (*deptTree, error) {
		if dir == nil {
			return buildDeptTree(nil, nil), nil
		}
		depts, err := dir.Departments(ctx, corp)
		if err != nil {
			return nil, fmt.Errorf("progress: departments: %w", err)
		}
		direct, err := dir.DepartmentMemberSets(ctx, corp)
		if err != nil {
			return nil, fmt.Errorf("progress: department members: %w", err)
		}
		return buildDeptTree(depts, direct), nil
	})
	c.stale = true
	return c
}

// WarmDepartments loads corp's department tree in the background (a
// notice was just registered there).
func (p *Progress) WarmDepartments(ctx context.Context, corp string) { p.depts.warm(ctx, corp) }

// Department is one department's numbers within a View.
type Department struct {
	ID         int64   `json:"id"`
	ParentID   int64   `json:"parent_id"`
	Name       string  `json:"name"`
	Depth      int     `json:"depth"`
	Recipients uint64  `json:"recipients"`
	Read       uint64  `json:"read"`
	Unread     uint64  `json:"unread"`
	Percent    float64 `json:"percent"`
}

// breakdown intersects every department set with the recipients and the
// read recipients; departments without recipients are left out.
func breakdown(t *deptTree, rec, readRec *roaring.Bitmap) []Department {
	out := []Department{}
	for i := range t.order {
		d := &t.order[i]
		n := rec.AndCardinality(d.Members)
		if n == 0 {
			continue
		}
		read := readRec.AndCardinality(d.Members)
		out = append(out, Department{ID: d.ID, ParentID: d.ParentID, Name: d.Name, Depth: d.Depth,
			Recipients: n, Read: read, Unread: n - read, Percent: Percent(int64(read), int64(n))})
	}
	return out
}

// Departments is m's department breakdown within v, for who: the
// departments holding recipients in v; for a scoped viewer only the
// subtrees access says it views (a parent above a leader's subtree is
// not theirs, even though it holds their people). loading is true while
// the corp's first tree since the start is still being read (the page
// polls again) rather than keep the view waiting on the directory.
func (p *Progress) Departments(ctx context.Context, m yidu.Message, v access.View, who *access.Principal) (depts []Department, loading bool, err error) {
	rec, readRec, err := p.Bitmaps(ctx, m, v)
	if err != nil {
		return nil, false, err
	}
	t, err := p.deptTree(ctx, m.CorpID)
	if err != nil {
		return nil, false, err
	}
	if t == nil {
		return []Department{}, true, nil
	}
	out := breakdown(t, rec, readRec)
	if !v.All() {
		roots := rootsOf(who, m.CorpID)
		out = slices.DeleteFunc(out, func(d Department) bool { return !t.org.Within(d.ID, roots) })
	}
	return out, false, nil
}

func rootsOf(who *access.Principal, corp string) []int64 {
	if who == nil {
		return nil
	}
	return who.Departments(corp)
}

// inScope returns whether a department of m's corp is within v: every
// department for everyone; for a scoped viewer the subtrees access says
// it views (issue 38: an in-scope person's other departments are not
// shown, and ?department= outside the scope is answered as a department
// that does not exist).
func inScope(t *deptTree, corp string, v access.View, who *access.Principal) func(id int64) bool {
	if v.All() {
		return func(int64) bool { return true }
	}
	roots := rootsOf(who, corp)
	return func(id int64) bool { return t != nil && t.within(id, roots) }
}

// within reports whether department id is one of roots or below one.
func (t *deptTree) within(id int64, roots []int64) bool {
	for seen := 0; seen <= len(t.order); seen++ { // bounded: a cycle ends
		if slices.Contains(roots, id) {
			return true
		}
		d := t.byID[id]
		if d == nil || d.ParentID == id {
			return false
		}
		id = d.ParentID
	}
	return false
}

// deptWait is the longest a department view waits for a corp's first
// tree after a start (issue 32): a cold cache reads the whole directory,
// which takes seconds on a large corp or a busy MySQL.
const deptWait = time.Second

// deptTree returns corp's tree: the cached one (a stale one while it is
// rebuilt), else the first one if it loads within deptWait, else nil
// while its load goes on in the background for the next poll.
func (p *Progress) deptTree(ctx context.Context, corp string) (*deptTree, error) {
	c := p.depts
	c.mu.Lock()
	_, cached := c.entries[corp]
	c.mu.Unlock()
	if cached {
		return c.get(ctx, corp)
	}
	ch := c.flight.DoChan(corp, func() (any, error) { return c.fill(ctx, corp) })
	t := time.NewTimer(deptWait)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*deptTree), nil
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
