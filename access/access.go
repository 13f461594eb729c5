// Package access answers two questions for the dashboard: who is asking
// (a password user, a bearer token, a WeCom sign-in) and what they may do
// and see. What they may do is a role per corp (yidu.Role: admin, sender
// of named apps, viewer of department subtrees); whom they may see is a
// View, a roaring bitmap of uids that the dashboard ANDs with a notice's
// bitmaps. The dashboard asks; it never decides, and never filters a
// list by hand.
//
// Department leaders, as the synced directory names them, are viewers of
// the subtrees they lead without a grant (Config.LeadersSee).
package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
)

// Kind is how a principal proved who it is.
type Kind string

const (
	// KindUser is a password user of dashboard.users.
	KindUser Kind = "user"
	// KindToken is a bearer token of dashboard.tokens.
	KindToken Kind = "token"
	// KindWeCom is a member signed in with WeCom (OAuth or web login).
	KindWeCom Kind = "wecom"
)

// Grant is one role in one corp.
type Grant struct {
	Role  yidu.Role
	Scope yidu.Scope
	// led marks the viewer grant Access.WeCom gives a department leader
	// from the directory (department_leader), never one of the
	// configuration: a leader may remind their own unread people, a
	// configured viewer reads only (issue 31). Unexported, so no
	// configuration or caller can forge it.
	led bool
}

// Leader reports whether g is a department leader's automatic grant
// (the subtrees the directory says they lead), not a configured one.
func (g Grant) Leader() bool { return g.led }

// Principal is who is asking and the grants they hold. It is a value
// resolved at each request (from the configuration, the roles and the
// directory of now), so a grant removed or a member who left takes
// effect at once.
type Principal struct {
	// Name is what the audit and the limits call the principal: the
	// password user's name, the token's name, or the WeCom UserID.
	Name string
	Kind Kind
	// UserID is the WeCom UserID of a KindWeCom principal ("" otherwise).
	UserID string
	// Corp is the corp a WeCom principal signed in to ("" otherwise).
	Corp string
	// DisplayName is a WeCom principal's name in the synced directory
	// ("" otherwise, or while the directory gives UserIDs only): what the
	// page shows for who is signed in.
	DisplayName string
	// allCorps: an admin of every corp ("*" in corps).
	allCorps bool
	grants   []Grant
}

// NewPrincipal returns a principal holding grants; allCorps makes it an
// admin of every corp (the "*" of dashboard.users[].corps).
func NewPrincipal(name string, kind Kind, allCorps bool, grants []Grant) *Principal {
	return &Principal{Name: name, Kind: kind, allCorps: allCorps, grants: slices.Clone(grants)}
}

// Grants returns the principal's grants (a copy); nil for an admin of
// every corp.
func (p *Principal) Grants() []Grant { return slices.Clone(p.grants) }

// Role is the principal's strongest role in corp: admin over sender over
// viewer; "" when it holds none there.
func (p *Principal) Role(corp string) yidu.Role {
	if p.allCorps {
		return yidu.RoleAdmin
	}
	best := yidu.Role("")
	for _, g := range p.grants {
		if g.Scope.Corp != corp {
			continue
		}
		if best == "" || slices.Index(yidu.Roles, g.Role) < slices.Index(yidu.Roles, best) {
			best = g.Role
		}
	}
	return best
}

// AllowsCorp reports whether the principal holds any role in corp.
func (p *Principal) AllowsCorp(corp string) bool { return p.Role(corp) != "" }

// Admin reports whether the principal is an admin of corp.
func (p *Principal) Admin(corp string) bool { return p.Role(corp) == yidu.RoleAdmin }

// MaySend reports whether the principal may compose, schedule, send,
// remind every unread recipient of, and recall notices of app in corp:
// an admin of the corp, or a sender of that app. Campaign and follow-up
// code call this before any write through an app.
func (p *Principal) MaySend(corp, app string) bool {
	if p.allCorps {
		return true
	}
	for _, g := range p.grants {
		if g.Scope.Corp != corp {
			continue
		}
		if g.Role == yidu.RoleAdmin || (g.Role == yidu.RoleSender && slices.Contains(g.Scope.Apps, app)) {
			return true
		}
	}
	return false
}

// SendApps are the apps of apps p may send through (MaySend), in
// apps' order.
func (p *Principal) SendApps(apps []yidu.App) []yidu.App {
	var out []yidu.App
	for _, a := range apps {
		if p.MaySend(a.CorpID, a.Name) {
			out = append(out, a)
		}
	}
	return out
}

// SeenApps are the names of the apps of apps whose notices p may see,
// sorted: those it may send through, and every app of a corp where it
// views departments.
func (p *Principal) SeenApps(apps []yidu.App) []string {
	var out []string
	for _, a := range apps {
		if p.MaySend(a.CorpID, a.Name) || p.Departments(a.CorpID) != nil {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return out
}

// MayRemindScoped reports whether the principal may remind unread
// people of a notice of app in corp: a sender of the app (everyone
// unread) or a department leader (the unread people of the subtrees it
// leads, Access.RemindView; "make sure your team reads it"). A viewer
// of the configuration (a user, a token, dashboard.roles) reads only.
func (p *Principal) MayRemindScoped(corp, app string) bool {
	return p.MaySend(corp, app) || p.ledDepartments(corp) != nil
}

// ledDepartments is the union of the departments p leads in corp (its
// leader grants), sorted and deduplicated; nil when it leads none.
func (p *Principal) ledDepartments(corp string) []int64 {
	var ds []int64
	for _, g := range p.grants {
		if g.Scope.Corp == corp && g.Role == yidu.RoleViewer && g.led {
			ds = append(ds, g.Scope.Departments...)
		}
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

// Departments returns the departments whose subtrees the principal
// views in corp (its viewer grants and, for a leader, the departments it
// leads): the departments panel of a scoped principal shows these
// subtrees only. nil when it views none.
func (p *Principal) Departments(corp string) []int64 { return p.departments(corp) }

// departments is the union of the principal's viewer departments in
// corp, sorted and deduplicated; nil when it views none.
func (p *Principal) departments(corp string) []int64 {
	var ds []int64
	for _, g := range p.grants {
		if g.Scope.Corp == corp && g.Role == yidu.RoleViewer {
			ds = append(ds, g.Scope.Departments...)
		}
	}
	slices.Sort(ds)
	return slices.Compact(ds)
}

// View is whom a principal sees of one notice: everyone, or the uids of a
// bitmap. The dashboard ANDs it with the notice's bitmaps; a View that
// meets none of a notice's recipients makes the notice 404 to them.
type View struct {
	all  bool
	uids *roaring.Bitmap // read only: shared by every request of the scope
	// key names uids: the corp, the departments and the directory's
	// version (or the time the bitmap was built) it was built at.
	key string
	// depts are the departments whose subtrees uids holds.
	depts []int64
}

// Departments are the departments whose subtrees the View sees (a
// leader's, a viewer's); all is true for Everyone. Evidence cuts a
// person's departments to them, so a scoped caller learns nothing of the
// departments outside their scope through a member of both.
func (v View) Departments() (ids []int64, all bool) { return v.depts, v.all }

// Key names the View's members for a cache of answers computed within it:
// two Views with one Key see the same people (same corp, departments and
// directory version). "" for Everyone and for nobody. It holds no
// personal data.
func (v View) Key() string { return v.key }

// Everyone is the View of an admin or of a sender of the notice's app.
var Everyone = View{all: true}

// All reports whether the View is everyone.
func (v View) All() bool { return v.all }

// None reports whether the View sees nobody at all (no grant for the
// notice): the notice is 404 to them.
func (v View) None() bool { return !v.all && (v.uids == nil || v.uids.IsEmpty()) }

// Restrict returns b ∩ View. For Everyone it is b itself (no copy), so a
// caller must not modify the result; otherwise a new bitmap.
func (v View) Restrict(b *roaring.Bitmap) *roaring.Bitmap {
	if v.all || b == nil {
		return b
	}
	if v.uids == nil {
		return roaring.New()
	}
	return roaring.And(b, v.uids)
}

// Count returns |b ∩ View| without building the intersection.
func (v View) Count(b *roaring.Bitmap) uint64 {
	switch {
	case b == nil:
		return 0
	case v.all:
		return b.GetCardinality()
	case v.uids == nil:
		return 0
	}
	return b.AndCardinality(v.uids)
}

// Sees reports whether the View meets b: false means a notice whose
// recipients are b is, to this principal, missing.
func (v View) Sees(b *roaring.Bitmap) bool {
	switch {
	case b == nil:
		return false
	case v.all:
		return true
	case v.uids == nil:
		return false
	}
	return b.Intersects(v.uids)
}

// UIDs returns the View's members, read only (shared by every request
// of the scope); nil for Everyone. For a store that counts within a set
// without building the notice's bitmaps (bitmap.Store.CountsWithin).
func (v View) UIDs() *roaring.Bitmap {
	if v.all {
		return nil
	}
	if v.uids == nil {
		return roaring.New()
	}
	return v.uids
}

// Contains reports whether uid is in the View.
func (v View) Contains(uid uint32) bool { return v.all || (v.uids != nil && v.uids.Contains(uid)) }

// Directory is what access needs of the synced directory (idmap.Mapper).
type Directory interface {
	// DepartmentMembers returns the active members of deptIDs and, with
	// recursive, of their subtrees.
	DepartmentMembers(ctx context.Context, corpID string, deptIDs []int64, recursive bool) (*roaring.Bitmap, error)
	// Lookup returns a UserID's uid.
	Lookup(ctx context.Context, corpID, userID string) (uid uint32, ok bool, err error)
	// Users returns the directory entries of uids.
	Users(ctx context.Context, corpID string, uids []uint32) (map[uint32]yidu.User, error)
}

// Leaders is implemented by a Directory that syncs WeCom's
// department_leader (user/get, doc path 90196): the departments a member
// leads. Without it nobody is a leader.
type Leaders interface {
	LedDepartments(ctx context.Context, corpID, userID string) ([]int64, error)
}

// Versioned is implemented by a Directory that counts its syncs: a
// scope's bitmap is kept until the version changes. Without it a bitmap
// is kept for Config.ScopeTTL.
type Versioned interface {
	DirectoryVersion(ctx context.Context, corpID string) (int64, error)
}

// RoleGrant grants a role to a WeCom member (dashboard.roles[]).
type RoleGrant struct {
	UserID string
	Grant
}

// Config is access's part of the configuration.
type Config struct {
	// Roles are the roles granted to WeCom members.
	Roles []RoleGrant
	// LeadersSee makes each department leader a viewer of the subtrees
	// they lead (dashboard.leaders_see, default true).
	LeadersSee bool
	// ScopeTTL is how long a scope's bitmap is kept without a directory
	// version (default 30 s).
	ScopeTTL time.Duration
	// Approvers are the WeCom members named as approvers of an app's
	// notices (apps[].approval.approvers), by corp: one who holds no role
	// still signs in, with none, to open the approval page the card
	// links to (campaign decides what they may see there).
	Approvers map[string][]string
}

// ErrNotMember is returned for a WeCom sign-in of a UserID that is not an
// active member of the synced directory (unknown, or left).
var ErrNotMember = errors.New("not an active member of the directory")

// ErrNoRole is returned for a WeCom member who holds no role and leads no
// department: signed in, but with nothing to see.
var ErrNoRole = errors.New("no role in yidu")

// maxCached bounds the scope cache: a scope is a set of departments, and
// there are at most as many as there are grants and leaders.
const maxCached = 4096

// Access resolves principals and their Views.
type Access struct {
	dir   Directory
	cfg   Config
	now   func() time.Time
	roles map[string][]Grant // corp + "\x00" + userid

	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	version int64
	at      time.Time
	uids    *roaring.Bitmap
}

// New validates cfg's grants and returns an Access over dir.
func New(cfg Config, dir Directory, now func() time.Time) (*Access, error) {
	if cfg.ScopeTTL <= 0 {
		cfg.ScopeTTL = 30 * time.Second
	}
	a := &Access{dir: dir, cfg: cfg, now: now, roles: map[string][]Grant{}, cache: map[string]cached{}}
	for i, r := range cfg.Roles {
		if r.UserID == "" {
			return nil, fmt.Errorf("access: roles[%d]: userid is required: %w", i, yidu.ErrInvalid)
		}
		if err := r.Scope.Validate(r.Role); err != nil {
			return nil, fmt.Errorf("access: roles[%d] (%s): %w", i, r.UserID, err)
		}
		k := r.Scope.Corp + "\x00" + r.UserID
		a.roles[k] = append(a.roles[k], r.Grant)
	}
	return a, nil
}

// ConfigGrants turns one dashboard.users[] or dashboard.tokens[] entry
// into grants: corps alone (the form before roles) is an admin of each
// corp, "*" of every corp (all); role with corp, apps and departments is
// that one grant. Both at once is refused: a reader could not tell which
// one wins.
func ConfigGrants(corps []string, role yidu.Role, corp string, apps []string, departments []int64) (grants []Grant, all bool, err error) {
	if role == "" && corp == "" && len(apps) == 0 && len(departments) == 0 {
		for _, c := range corps {
			if c == "*" {
				return nil, true, nil
			}
			grants = append(grants, Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: c}})
		}
		return grants, false, nil
	}
	if len(corps) > 0 {
		return nil, false, fmt.Errorf("corps and role: give one (corps alone is an admin of those corps): %w", yidu.ErrInvalid)
	}
	g := Grant{Role: role, Scope: yidu.Scope{Corp: corp, Apps: apps, Departments: departments}}
	if err := g.Scope.Validate(role); err != nil {
		return nil, false, err
	}
	return []Grant{g}, false, nil
}

// WeCom resolves a WeCom member of corp: the UserID must be an active
// member of the synced directory (ErrNotMember otherwise; someone who
// left loses access at the next sync), and holds its configured roles
// plus, with LeadersSee, a viewer grant of the departments it leads.
// Called at sign-in and again at every request of the session.
func (a *Access) WeCom(ctx context.Context, corp, userID string) (*Principal, error) {
	uid, ok, err := a.dir.Lookup(ctx, corp, userID)
	if err != nil {
		return nil, fmt.Errorf("access: look up member: %w", err)
	}
	if !ok {
		return nil, ErrNotMember
	}
	us, err := a.dir.Users(ctx, corp, []uint32{uid})
	if err != nil {
		return nil, fmt.Errorf("access: read member: %w", err)
	}
	if u, ok := us[uid]; !ok || u.Status != yidu.StatusActive {
		return nil, ErrNotMember
	}
	grants := slices.Clone(a.roles[corp+"\x00"+userID])
	if l, ok := a.dir.(Leaders); ok && a.cfg.LeadersSee {
		led, err := l.LedDepartments(ctx, corp, userID)
		if err != nil {
			return nil, fmt.Errorf("access: read led departments: %w", err)
		}
		if len(led) > 0 {
			grants = append(grants, Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp, Departments: led}, led: true})
		}
	}
	if len(grants) == 0 && !slices.Contains(a.cfg.Approvers[corp], userID) {
		return nil, ErrNoRole
	}
	return &Principal{Name: userID, Kind: KindWeCom, UserID: userID, Corp: corp, DisplayName: us[uid].Name, grants: grants}, nil
}

// View returns whom p sees of a notice of app in corp: Everyone for an
// admin of the corp or a sender of the app; the members of its viewer
// departments' subtrees otherwise (a sender of another app who is also
// a viewer sees its departments); nobody without a grant there.
func (a *Access) View(ctx context.Context, p *Principal, corp, app string) (View, error) {
	if p.MaySend(corp, app) {
		return Everyone, nil
	}
	return a.subtrees(ctx, corp, p.departments(corp))
}

// RemindView returns whom p may remind of a notice of app in corp (the
// reminder goes to RemindView ∩ unread): Everyone for an admin of the
// corp or a sender of the app; the members of the subtrees it leads for
// a department leader (a viewer grant of the configuration adds none:
// viewers read only); nobody otherwise.
func (a *Access) RemindView(ctx context.Context, p *Principal, corp, app string) (View, error) {
	if p.MaySend(corp, app) {
		return Everyone, nil
	}
	return a.subtrees(ctx, corp, p.ledDepartments(corp))
}

// subtrees returns the active members of ds's subtrees, cached per corp
// and department set until the directory's version changes (or ScopeTTL
// passes, for a directory without versions); nobody for nil ds (a
// principal with no grant there).
func (a *Access) subtrees(ctx context.Context, corp string, ds []int64) (View, error) {
	if ds == nil {
		return View{}, nil
	}
	key := fmt.Sprint(corp, ds)
	version := int64(-1)
	if v, ok := a.dir.(Versioned); ok {
		n, err := v.DirectoryVersion(ctx, corp)
		if err != nil {
			return View{}, fmt.Errorf("access: directory version: %w", err)
		}
		version = n
	}
	now := a.now()
	a.mu.Lock()
	c, ok := a.cache[key]
	a.mu.Unlock()
	if !ok || c.version != version || (version < 0 && now.Sub(c.at) >= a.cfg.ScopeTTL) {
		uids, err := a.dir.DepartmentMembers(ctx, corp, ds, true)
		if err != nil {
			return View{}, fmt.Errorf("access: subtree members: %w", err)
		}
		uids.RunOptimize()
		c = cached{version: version, at: now, uids: uids}
		a.mu.Lock()
		if len(a.cache) >= maxCached {
			clear(a.cache)
		}
		a.cache[key] = c
		a.mu.Unlock()
	}
	return View{uids: c.uids, key: fmt.Sprintf("%s@%d/%d", key, c.version, c.at.UnixNano()), depts: ds}, nil
}

// AdminCorps returns the corps the principal is an admin of; all is true
// for an admin of every corp ("*"), and corps is then nil.
func (p *Principal) AdminCorps() (corps []string, all bool) {
	if p.allCorps {
		return nil, true
	}
	corps = []string{}
	for _, g := range p.grants {
		if g.Role == yidu.RoleAdmin && !slices.Contains(corps, g.Scope.Corp) {
			corps = append(corps, g.Scope.Corp)
		}
	}
	return corps, false
}
