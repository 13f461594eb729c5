package access

import (
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
)

// Senders kept to their audience (issue 41 item 3). A sender's grant may
// name departments and tags (dashboard.roles[].audience); such a sender
// may address only those departments' subtrees, those tags, and members
// inside them. Access decides what is inside (Limit, CheckAudience);
// campaign refuses a compose, preview, send or reminder outside it, and
// the dashboard's picker lists only what Limit allows.

// Tree is implemented by a Directory that knows the department tree
// (idmap.Mapper.Departments): a department under an allowed one is
// allowed. Without it only the listed departments themselves are.
type Tree interface {
	Departments(ctx context.Context, corpID string) ([]yidu.Department, error)
}

// TagDirectory is implemented by a Directory that resolves tags
// (idmap.Mapper.TagMembers): the members of an allowed tag may be named
// one by one. Without it a tag allows no single member.
type TagDirectory interface {
	TagMembers(ctx context.Context, corpID string, tags []int64) (*roaring.Bitmap, error)
}

// KnownDirectory is implemented by a Directory that resolves many
// UserIDs at once (idmap.Mapper.Known); without it each is looked up.
type KnownDirectory interface {
	Known(ctx context.Context, corpID string, userIDs []string) (map[string]uint32, error)
}

// SenderAudience returns the part of corp p may address through app and
// whether it is limited at all: an admin of the corp, or a sender of the
// app by a grant without an audience, is not (limited false). A sender
// holding several limited grants of the app may address their union.
func (p *Principal) SenderAudience(corp, app string) (yidu.SenderAudience, bool) {
	if p == nil {
		return yidu.SenderAudience{}, true
	}
	if p.allCorps {
		return yidu.SenderAudience{}, false
	}
	var out yidu.SenderAudience
	for _, g := range p.grants {
		if g.Scope.Corp != corp {
			continue
		}
		switch {
		case g.Role == yidu.RoleAdmin:
			return yidu.SenderAudience{}, false
		case g.Role == yidu.RoleSender && slices.Contains(g.Scope.Apps, app):
			if !g.Scope.Audience.Limited() {
				return yidu.SenderAudience{}, false
			}
			out.Departments = append(out.Departments, g.Scope.Audience.Departments...)
			out.Tags = append(out.Tags, g.Scope.Audience.Tags...)
		}
	}
	slices.Sort(out.Departments)
	slices.Sort(out.Tags)
	out.Departments, out.Tags = slices.Compact(out.Departments), slices.Compact(out.Tags)
	return out, true
}

// Limit is what a sender may address through one app: everyone (All),
// or some departments (with their subtrees), tags and the members
// inside them.
type Limit struct {
	all   bool
	depts map[int64]bool
	tags  map[int64]bool
	// members resolves, once, the members inside (subtrees ∪ tags).
	members func(ctx context.Context) (*roaring.Bitmap, error)
}

// Anyone is the Limit of a caller who is not kept to an audience.
var Anyone = Limit{all: true}

// All reports whether the sender may address everyone the app reaches.
func (l Limit) All() bool { return l.all }

// Department reports whether department id (with its subtree) is inside.
func (l Limit) Department(id int64) bool { return l.all || l.depts[id] }

// Tag reports whether tag id is inside.
func (l Limit) Tag(id int64) bool { return l.all || l.tags[id] }

// Members returns the active members inside the limit, read only; nil
// for All.
func (l Limit) Members(ctx context.Context) (*roaring.Bitmap, error) {
	if l.all {
		return nil, nil
	}
	return l.members(ctx)
}

// Limit returns what p may address through app of corp (SenderAudience,
// with each allowed department's subtree expanded by the directory's
// tree).
func (a *Access) Limit(ctx context.Context, p *Principal, corp, app string) (Limit, error) {
	sa, limited := p.SenderAudience(corp, app)
	if !limited {
		return Limit{all: true}, nil
	}
	l := Limit{depts: map[int64]bool{}, tags: map[int64]bool{}}
	for _, t := range sa.Tags {
		l.tags[t] = true
	}
	for _, d := range sa.Departments {
		l.depts[d] = true
	}
	if t, ok := a.dir.(Tree); ok && len(sa.Departments) > 0 {
		ds, err := t.Departments(ctx, corp)
		if err != nil {
			return Limit{}, fmt.Errorf("access: department tree: %w", err)
		}
		children := map[int64][]int64{}
		for _, d := range ds {
			children[d.ParentID] = append(children[d.ParentID], d.ID)
		}
		queue := slices.Clone(sa.Departments)
		for len(queue) > 0 {
			d := queue[len(queue)-1]
			queue = queue[:len(queue)-1]
			for _, c := range children[d] {
				if !l.depts[c] {
					l.depts[c] = true
					queue = append(queue, c)
				}
			}
		}
	}
	var got *roaring.Bitmap
	l.members = func(ctx context.Context) (*roaring.Bitmap, error) {
		if got != nil {
			return got, nil
		}
		b := roaring.New()
		if len(sa.Departments) > 0 {
			v, err := a.subtrees(ctx, corp, sa.Departments)
			if err != nil {
				return nil, err
			}
			b.Or(v.UIDs())
		}
		if td, ok := a.dir.(TagDirectory); ok && len(sa.Tags) > 0 {
			tm, err := td.TagMembers(ctx, corp, sa.Tags)
			if err != nil {
				return nil, fmt.Errorf("access: tag members: %w", err)
			}
			b.Or(tm)
		}
		got = b
		return b, nil
	}
	return l, nil
}

// OutsideError is an audience, or a part of it, outside what the sender
// may address. Field is the audience's field (audience.all,
// audience.departments, audience.tags, audience.userids).
type OutsideError struct {
	Field  string
	Reason string
}

func (e *OutsideError) Error() string { return e.Field + ": " + e.Reason }

// CheckAudience returns an *OutsideError naming the first field of au
// that p may not address through app of corp: 全员, a department outside
// the allowed subtrees, a tag not allowed, a UserID that is no member
// inside them (an unknown one included: it cannot be shown to be
// inside). nil when au is inside, or p is not limited.
func (a *Access) CheckAudience(ctx context.Context, p *Principal, corp, app string, au yidu.Audience) error {
	l, err := a.Limit(ctx, p, corp, app)
	if err != nil {
		return err
	}
	return l.Check(ctx, a, corp, au)
}

// Check is CheckAudience against l; a resolves UserIDs.
func (l Limit) Check(ctx context.Context, a *Access, corp string, au yidu.Audience) error {
	if l.all {
		return nil
	}
	if au.All {
		return &OutsideError{Field: "audience.all", Reason: "everyone (全员) is outside the audience your role may send to"}
	}
	for _, d := range au.Departments {
		if !l.depts[d] {
			return &OutsideError{Field: "audience.departments", Reason: fmt.Sprintf("department %d is outside the audience your role may send to", d)}
		}
	}
	for _, t := range au.Tags {
		if !l.tags[t] {
			return &OutsideError{Field: "audience.tags", Reason: fmt.Sprintf("tag %d is outside the audience your role may send to", t)}
		}
	}
	if len(au.UserIDs) == 0 {
		return nil
	}
	inside, err := l.members(ctx)
	if err != nil {
		return err
	}
	uids, err := a.known(ctx, corp, au.UserIDs)
	if err != nil {
		return err
	}
	for _, id := range au.UserIDs {
		if uid, ok := uids[id]; !ok || !inside.Contains(uid) {
			return &OutsideError{Field: "audience.userids", Reason: fmt.Sprintf("%q is not a member inside the audience your role may send to", yidu.Truncate(id, 64))}
		}
	}
	return nil
}

// known maps UserIDs to the uids of active members.
func (a *Access) known(ctx context.Context, corp string, ids []string) (map[string]uint32, error) {
	if k, ok := a.dir.(KnownDirectory); ok {
		m, err := k.Known(ctx, corp, ids)
		if err != nil {
			return nil, fmt.Errorf("access: resolve userids: %w", err)
		}
		return m, nil
	}
	m := make(map[string]uint32, len(ids))
	for _, id := range ids {
		uid, ok, err := a.dir.Lookup(ctx, corp, id)
		if err != nil {
			return nil, fmt.Errorf("access: resolve userid: %w", err)
		}
		if ok {
			m[id] = uid
		}
	}
	return m, nil
}
