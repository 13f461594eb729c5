package yidu

import (
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
)

// Org is a corp's department tree as the synced directory has it, with
// (when the reader filled them) each department's leaders and each
// member's departments, by dense uid. It is the one walk of parent_id
// links every package uses (idmap's index and audience expansion, the
// dashboard's department breakdown and scope, campaign's escalation), so
// a corrupt directory is handled the same everywhere: a department whose
// parent is not in the tree is a root, and a cycle is cut where it is
// met instead of looping.
//
// Built by NewOrg; read-only afterwards, safe for concurrent readers.
type Org struct {
	depts    []Department // as given: WeCom's display order where the reader kept it
	byID     map[int64]int
	children map[int64][]int64 // parent id → children, in depts order

	// Leaders are each department's leaders (department_leader of
	// department/list, doc path 90208), as uids; nil without leaders.
	Leaders map[int64][]uint32
	// Memberships are each member's direct departments, by uid; nil when
	// the reader did not list them.
	Memberships map[uint32][]int64
}

// NewOrg returns the tree of depts. A department listed twice keeps its
// first entry.
func NewOrg(depts []Department) *Org {
	o := &Org{byID: make(map[int64]int, len(depts)), children: map[int64][]int64{}}
	for _, d := range depts {
		if _, dup := o.byID[d.ID]; dup {
			continue
		}
		o.byID[d.ID] = len(o.depts)
		o.depts = append(o.depts, d)
		o.children[d.ParentID] = append(o.children[d.ParentID], d.ID)
	}
	return o
}

// Departments returns the departments in the order NewOrg was given them.
func (o *Org) Departments() []Department { return o.depts }

// Department returns department id, if the tree has it.
func (o *Org) Department(id int64) (Department, bool) {
	i, ok := o.byID[id]
	if !ok {
		return Department{}, false
	}
	return o.depts[i], true
}

// Parent returns id's parent: 0 for a root or an unknown department.
func (o *Org) Parent(id int64) int64 {
	d, _ := o.Department(id)
	return d.ParentID
}

// Children returns the ids of the departments whose parent_id is id (0:
// those at the top), in the order NewOrg was given them.
func (o *Org) Children(id int64) []int64 { return o.children[id] }

// isRoot: the department's parent is not in the tree (0 included) or is
// itself.
func (o *Org) isRoot(d Department) bool {
	_, known := o.byID[d.ParentID]
	return !known || d.ParentID == d.ID
}

// Walk calls fn for every department once, depth-first with parents
// before their children, depth 0 for a root. Roots come in the order
// NewOrg was given them; the departments of a pure cycle (no root above
// them) come last, each cycle entered where it is first listed.
func (o *Org) Walk(fn func(d Department, depth int)) {
	visited := make(map[int64]bool, len(o.depts))
	var walk func(id int64, depth int)
	walk = func(id int64, depth int) {
		visited[id] = true
		fn(o.depts[o.byID[id]], depth)
		for _, c := range o.children[id] {
			if !visited[c] {
				walk(c, depth+1)
			}
		}
	}
	for _, d := range o.depts {
		if o.isRoot(d) && !visited[d.ID] {
			walk(d.ID, 0)
		}
	}
	for _, d := range o.depts {
		if !visited[d.ID] {
			walk(d.ID, 0)
		}
	}
}

// Subtree returns ids and every department below them, each once (ids
// the tree does not know included as given: they may still have members).
func (o *Org) Subtree(ids ...int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	out := make([]int64, 0, len(ids))
	queue := slices.Clone(ids)
	for len(queue) > 0 {
		d := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		if seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, d)
		queue = append(queue, o.children[d]...)
	}
	return out
}

// Within reports whether department id is one of roots or below one.
func (o *Org) Within(id int64, roots []int64) bool {
	for seen := 0; seen <= len(o.depts); seen++ { // bounded: a cycle ends
		if slices.Contains(roots, id) {
			return true
		}
		d, ok := o.Department(id)
		if !ok || d.ParentID == id {
			return false
		}
		id = d.ParentID
	}
	return false
}

// Above reports whether a department strictly above id satisfies pick.
func (o *Org) Above(id int64, pick func(int64) bool) bool {
	seen := map[int64]bool{id: true}
	for {
		d, ok := o.Department(id)
		if !ok || d.ParentID == 0 || seen[d.ParentID] {
			return false
		}
		if pick(d.ParentID) {
			return true
		}
		id = d.ParentID
		seen[id] = true
	}
}

// SubtreeSets returns, for every department of the tree, the union of
// direct's sets of it and of every department below it: a person in two
// sub-departments counts once in the parent. A department on a cycle
// gets the members the cycle reaches, itself once.
func (o *Org) SubtreeSets(direct map[int64]*roaring.Bitmap) map[int64]*roaring.Bitmap {
	out := make(map[int64]*roaring.Bitmap, len(o.depts))
	var visit func(d int64, path map[int64]bool) *roaring.Bitmap
	visit = func(d int64, path map[int64]bool) *roaring.Bitmap {
		if bm, ok := out[d]; ok {
			return bm
		}
		path[d] = true
		sets := make([]*roaring.Bitmap, 0, 1+len(o.children[d]))
		if own := direct[d]; own != nil {
			sets = append(sets, own)
		}
		for _, c := range o.children[d] {
			if !path[c] {
				sets = append(sets, visit(c, path))
			}
		}
		delete(path, d)
		bm := roaring.FastOr(sets...)
		out[d] = bm
		return bm
	}
	for _, d := range o.depts {
		visit(d.ID, map[int64]bool{})
	}
	return out
}
