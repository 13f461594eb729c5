package campaign

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/campaign/store"
)

// Picking is what the compose page and the approver need of the
// directory (idmap.Mapper, through cmd's adapter): the in-memory index of
// a corp's directory at its current version, and the audience expansion a
// registration snapshots (one rule: the preview's count is the
// registration's).
type Picking interface {
	store.Directory
	DirectoryIndex(ctx context.Context, corpID string) (DirectoryIndex, error)
}

// DirectoryIndex is one corp's directory at one version (idmap.Index):
// read-only, what the compose page lists, searches and counts.
type DirectoryIndex interface {
	Departments() []yidu.DepartmentNode
	Org() *yidu.Org
	SubtreeMembers(ids ...int64) *roaring.Bitmap
	Tags() []yidu.TagCount
	Search(q string, limit int) []yidu.Person
}

// ErrNoDirectory: the service was given no Picking (the dashboard's 501).
var ErrNoDirectory = errors.New("this directory cannot answer audience queries")

// DepartmentCount is a department and how many of an audience's
// recipients are in its subtree.
type DepartmentCount struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	Recipients int    `json:"recipients"`
}

// Preview is what an audience reaches, written nowhere.
type Preview struct {
	Recipients uint64
	// Unknown are UserIDs that name no member; Left counts members who left.
	Unknown []string
	Left    int
	// Departments are the top levels of what was picked with their
	// recipients (departments reaching none left out).
	Departments []DepartmentCount
}

// dir is the Picking, or ErrNoDirectory.
func (s *Service) dir() (Picking, error) {
	if s.o.Picking == nil {
		return nil, ErrNoDirectory
	}
	return s.o.Picking, nil
}

// Preview expands au of app for p, who must be allowed to address it
// (CheckAudience), with the registration's expansion. Its departments are
// the picked departments under no other picked one; without departments,
// the tree's first level.
func (s *Service) Preview(ctx context.Context, p *access.Principal, app yidu.App, au yidu.Audience) (Preview, error) {
	d, err := s.dir()
	if err != nil {
		return Preview{}, err
	}
	if err := s.CheckAudience(ctx, p, app, au); err != nil {
		return Preview{}, err
	}
	idx, err := d.DirectoryIndex(ctx, app.CorpID)
	if err != nil {
		return Preview{}, err
	}
	x, err := d.Expand(ctx, app.CorpID, au)
	if err != nil {
		return Preview{}, err
	}
	var tops []int64
	picked := map[int64]bool{}
	for _, d := range au.Departments {
		picked[d] = true
	}
	org := idx.Org()
	for _, d := range au.Departments {
		if _, known := org.Department(d); known && !org.Above(d, func(p int64) bool { return picked[p] }) {
			tops = append(tops, d)
		}
	}
	if len(tops) == 0 {
		for _, root := range org.Children(0) {
			tops = append(tops, org.Children(root)...)
			if len(org.Children(root)) == 0 {
				tops = append(tops, root)
			}
		}
	}
	out := Preview{Recipients: x.Recipients.GetCardinality(), Unknown: append([]string{}, x.Unknown...), Left: len(x.Left),
		Departments: []DepartmentCount{}}
	for _, d := range tops {
		n := int(idx.SubtreeMembers(d).AndCardinality(x.Recipients))
		if n == 0 {
			continue
		}
		dep, _ := org.Department(d)
		out.Departments = append(out.Departments, DepartmentCount{ID: d, Name: dep.Name, Recipients: n})
	}
	return out, nil
}

// TopDepartments are the first-level departments of n's recipients, the
// largest first (at most 10): the roots' children under a single root
// (总部), else the roots. None without a directory, or when it fails (a
// part of the approver's page, not a condition of it).
func (s *Service) TopDepartments(ctx context.Context, n yidu.Notice) []DepartmentCount {
	out := []DepartmentCount{}
	d, err := s.dir()
	if err != nil {
		return out
	}
	idx, err := d.DirectoryIndex(ctx, n.App.CorpID)
	if err != nil {
		return out
	}
	x, err := d.Expand(ctx, n.App.CorpID, n.Audience)
	if err != nil {
		return out
	}
	nodes := idx.Departments()
	ids := map[int64]bool{}
	for _, d := range nodes {
		ids[d.ID] = true
	}
	var roots []int64
	for _, d := range nodes {
		if !ids[d.ParentID] {
			roots = append(roots, d.ID)
		}
	}
	for _, d := range nodes {
		top := !ids[d.ParentID]
		if len(roots) == 1 {
			top = d.ParentID == roots[0]
		}
		if !top {
			continue
		}
		if c := idx.SubtreeMembers(d.ID).AndCardinality(x.Recipients); c > 0 {
			out = append(out, DepartmentCount{ID: d.ID, Name: d.Name, Recipients: int(c)})
		}
	}
	slices.SortStableFunc(out, func(a, b DepartmentCount) int { return cmp.Compare(b.Recipients, a.Recipients) })
	return out[:min(len(out), 10)]
}

// SortList splits a pasted list of UserIDs of app's corp into those that
// name active members, in the list's order, and the others (unknown or
// left), sorted.
func (s *Service) SortList(ctx context.Context, app yidu.App, ids []string) (known, missing []string, err error) {
	d, err := s.dir()
	if err != nil {
		return nil, nil, err
	}
	x, err := d.Expand(ctx, app.CorpID, yidu.Audience{UserIDs: ids})
	if err != nil {
		return nil, nil, err
	}
	unknown := map[string]bool{}
	for _, u := range x.Unknown {
		unknown[u] = true
	}
	for _, u := range x.Left {
		unknown[u] = true
	}
	known = []string{}
	for _, u := range ids {
		if !unknown[u] {
			known = append(known, u)
		}
	}
	missing = append(append([]string{}, x.Unknown...), x.Left...)
	slices.Sort(missing)
	return known, missing, nil
}

// Picker is what p may pick from app's corp directory: its departments,
// tags and people, within p's Limit.
type Picker struct {
	idx DirectoryIndex
	lim access.Limit
}

// Picker is p's picker of app's directory.
func (s *Service) Picker(ctx context.Context, p *access.Principal, app yidu.App) (Picker, error) {
	d, err := s.dir()
	if err != nil {
		return Picker{}, err
	}
	idx, err := d.DirectoryIndex(ctx, app.CorpID)
	if err != nil {
		return Picker{}, err
	}
	lim, err := s.Limit(ctx, p, app)
	if err != nil {
		return Picker{}, err
	}
	return Picker{idx: idx, lim: lim}, nil
}

// Everyone reports whether 全员 may be picked.
func (pk Picker) Everyone() bool { return pk.lim.All() }

// Departments are the departments that may be picked.
func (pk Picker) Departments() []yidu.DepartmentNode {
	return keep(pk.idx.Departments(), func(d yidu.DepartmentNode) bool { return pk.lim.Department(d.ID) })
}

// Tags are the tags that may be picked.
func (pk Picker) Tags() []yidu.TagCount {
	return keep(pk.idx.Tags(), func(t yidu.TagCount) bool { return pk.lim.Tag(t.ID) })
}

// maxSearch bounds the people a kept sender's search looks through for
// the limit it may pick.
const maxSearch = 1000

// People are at most limit people matching q that may be picked.
func (pk Picker) People(ctx context.Context, q string, limit int) ([]yidu.Person, error) {
	if pk.lim.All() {
		return pk.idx.Search(q, limit), nil
	}
	inside, err := pk.lim.Members(ctx)
	if err != nil {
		return nil, err
	}
	found := keep(pk.idx.Search(q, maxSearch), func(p yidu.Person) bool { return inside.Contains(p.UID) })
	return found[:min(len(found), limit)], nil
}

// keep keeps the items of xs allowed.
func keep[T any](xs []T, allowed func(T) bool) []T {
	out := xs[:0:0]
	for _, x := range xs {
		if allowed(x) {
			out = append(out, x)
		}
	}
	return out
}

// ApprovalView is what an approver sees of a notice besides the notice
// itself.
type ApprovalView struct {
	// Recipients is the exact number of people it reaches now;
	// Departments the top departments among them (TopDepartments).
	Recipients  uint64
	Departments []DepartmentCount
	Trail       []store.ApprovalStep
	// MayDecide: p may approve or reject this version (not its author,
	// an approver of its app), and it waits for a decision.
	MayDecide bool
	// ReadingPage is the members' reading page of a notice that has one
	// published (sent with content); "" otherwise.
	ReadingPage string
	// Approvers and ApproverRole are who approves it (Service.Approvers).
	Approvers    []string
	ApproverRole yidu.Role
	// Standing is a standing notice's rule, which the approval binds
	// (issue 51): a joiner's deadline and the cycle; nil for others.
	Standing *yidu.Standing
}

// ApprovalView is p's view of n's approval.
func (s *Service) ApprovalView(ctx context.Context, p *access.Principal, n yidu.Notice) (ApprovalView, error) {
	_, count, err := s.NeedsApproval(ctx, n)
	if err != nil {
		return ApprovalView{}, err
	}
	trail, err := s.ApprovalTrail(ctx, n)
	if err != nil {
		return ApprovalView{}, err
	}
	v := ApprovalView{Recipients: count, Trail: trail, Departments: s.TopDepartments(ctx, n),
		MayDecide: n.Approval == yidu.ApprovalPending && MayApprove(p, n) == nil && s.notOwnRevision(ctx, p, n) == nil}
	v.Approvers, v.ApproverRole = s.Approvers(ctx, n.App, n.CreatedBy)
	if s.o.ReadingPage != nil {
		has, err := s.HasContent(ctx, n.App.CorpID, n.MsgID)
		if err != nil {
			return ApprovalView{}, err
		}
		if has {
			v.ReadingPage = s.o.ReadingPage(n.App.Name, n.MsgID)
		}
	}
	if s.o.Standing != nil {
		spec, ok, err := s.o.Standing.Spec(ctx, n.App.CorpID, n.MsgID)
		if err != nil {
			return ApprovalView{}, err
		}
		if ok {
			spec.JoinDeadline = cmp.Or(spec.JoinDeadline, yidu.DefaultJoinDeadline)
			v.Standing = &spec
		}
	}
	return v, nil
}
