package access_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

const corp = "wwcorp"

// listing is a WeCom directory read handed to idmap's sync.
type listing struct{ l yidu.Listing }

func (d *listing) List(context.Context) (yidu.Listing, error) { return d.l, nil }

// tree: 1 总部 ├ 3 销售 └ 4 研发 └ 5 后端. Members: sales1 (3),
// eng1 (4), back1 (5), boss (1), both (3 and 5).
func tree() yidu.Listing {
	return yidu.Listing{
		Complete: true,
		Departments: []yidu.Department{
			{ID: 1, Name: "总部"}, {ID: 3, ParentID: 1, Name: "销售"},
			{ID: 4, ParentID: 1, Name: "研发"}, {ID: 5, ParentID: 4, Name: "后端"},
		},
		Members: []yidu.Member{
			{UserID: "sales1", Departments: []int64{3}},
			{UserID: "eng1", Departments: []int64{4}},
			{UserID: "back1", Departments: []int64{5}},
			{UserID: "boss", Departments: []int64{1}},
			{UserID: "both", Departments: []int64{3, 5}},
		},
	}
}

// leaderDir is the synced directory with department leaders, as the
// directory work syncs them (department_leader).
type leaderDir struct {
	*idmap.Mapper
	led map[string][]int64
}

func (d leaderDir) LedDepartments(_ context.Context, _, userID string) ([]int64, error) {
	return d.led[userID], nil
}

type fixture struct {
	m    *idmap.Mapper
	sync func(yidu.Listing)
	uid  func(string) uint32
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	m, err := idmap.New(testenv.MySQL(t), idmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	src := &listing{l: tree()}
	s, err := idmap.NewSyncer(m, map[string]idmap.Directory{corp: src}, idmap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{m: m}
	f.sync = func(l yidu.Listing) {
		t.Helper()
		src.l = l
		if _, err := s.Sync(context.Background(), corp); err != nil {
			t.Fatal(err)
		}
	}
	f.uid = func(userID string) uint32 {
		t.Helper()
		uid, ok, err := m.Lookup(context.Background(), corp, userID)
		if err != nil || !ok {
			t.Fatalf("Lookup(%s) = %v, %v", userID, ok, err)
		}
		return uid
	}
	f.sync(tree())
	return f
}

func (f fixture) set(userIDs ...string) *roaring.Bitmap {
	b := roaring.New()
	for _, u := range userIDs {
		b.Add(f.uid(u))
	}
	return b
}

func TestViewIsTheSubtree(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB")
	}
	ctx := context.Background()
	f := newFixture(t)
	dir := leaderDir{Mapper: f.m, led: map[string][]int64{"eng1": {4}}}
	a, err := access.New(access.Config{
		LeadersSee: true,
		Roles: []access.RoleGrant{
			{UserID: "sales1", Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp, Departments: []int64{3}}}},
			{UserID: "boss", Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: corp}}},
			{UserID: "back1", Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: corp, Apps: []string{"hr"}}}},
		},
	}, dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	everyone := f.set("sales1", "eng1", "back1", "boss", "both")
	for _, tc := range []struct {
		userID, app string
		want        []string // nil: everyone
		none        bool
	}{
		{userID: "sales1", app: "hr", want: []string{"sales1", "both"}},
		{userID: "eng1", app: "hr", want: []string{"eng1", "back1", "both"}}, // a leader of 4: 4 and 5
		{userID: "boss", app: "hr"},
		{userID: "back1", app: "hr"},
		{userID: "back1", app: "it", none: true}, // a sender of hr sees nothing of it
	} {
		p, err := a.WeCom(ctx, corp, tc.userID)
		if err != nil {
			t.Fatalf("WeCom(%s): %v", tc.userID, err)
		}
		v, err := a.View(ctx, p, corp, tc.app)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.none:
			if !v.None() || v.Count(everyone) != 0 || v.Sees(everyone) {
				t.Errorf("%s/%s: View sees %d, want nobody", tc.userID, tc.app, v.Count(everyone))
			}
		case tc.want == nil:
			if !v.All() || v.Count(everyone) != everyone.GetCardinality() {
				t.Errorf("%s/%s: View is not everyone", tc.userID, tc.app)
			}
		default:
			want := f.set(tc.want...)
			if got := v.Restrict(everyone); !got.Equals(want) {
				t.Errorf("%s/%s: Restrict = %v, want %v", tc.userID, tc.app, got.ToArray(), want.ToArray())
			}
			if v.Count(everyone) != want.GetCardinality() || v.All() {
				t.Errorf("%s/%s: Count = %d, want %d", tc.userID, tc.app, v.Count(everyone), want.GetCardinality())
			}
			if v.Sees(f.set("boss")) {
				t.Errorf("%s/%s: sees a notice sent to boss alone", tc.userID, tc.app)
			}
		}
	}

	// Only a leader's grant reminds, and only within what it leads.
	for _, tc := range []struct {
		userID string
		remind bool
		want   []string // RemindView; nil: nobody
	}{
		{userID: "eng1", remind: true, want: []string{"eng1", "back1", "both"}},
		{userID: "sales1"}, // a viewer of the configuration reads only
		{userID: "back1", remind: true, want: []string{"sales1", "eng1", "back1", "boss", "both"}}, // sender of hr: everyone
	} {
		p, err := a.WeCom(ctx, corp, tc.userID)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.MayRemindScoped(corp, "hr"); got != tc.remind {
			t.Errorf("%s: MayRemindScoped = %v, want %v", tc.userID, got, tc.remind)
		}
		rv, err := a.RemindView(ctx, p, corp, "hr")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := rv.Restrict(everyone), f.set(tc.want...); !got.Equals(want) {
			t.Errorf("%s: RemindView = %v, want %v", tc.userID, got.ToArray(), want.ToArray())
		}
	}

	// Leaders off: eng1 holds no role.
	off, err := access.New(access.Config{}, dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := off.WeCom(ctx, corp, "eng1"); !errors.Is(err, access.ErrNoRole) {
		t.Errorf("leaders off: WeCom(eng1) = %v, want ErrNoRole", err)
	}
	if _, err := a.WeCom(ctx, corp, "nobody"); !errors.Is(err, access.ErrNotMember) {
		t.Errorf("WeCom(nobody) = %v, want ErrNotMember", err)
	}
	// A named approver without a role signs in with none (issue 49: the
	// approval card's page said 您没有访问权限); in another corp, not.
	appr, err := access.New(access.Config{Approvers: map[string][]string{corp: {"eng1"}, "other": {"sales1"}}}, dir, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := appr.WeCom(ctx, corp, "eng1"); err != nil || p.UserID != "eng1" || p.Role(corp) != "" || len(p.Grants()) != 0 {
		t.Errorf("approver: WeCom(eng1) = %+v, %v; want a principal with no role", p, err)
	}
	if _, err := appr.WeCom(ctx, corp, "sales1"); !errors.Is(err, access.ErrNoRole) {
		t.Errorf("approver of another corp: WeCom(sales1) = %v, want ErrNoRole", err)
	}

	// A View's Key names its people: the same until the directory moves.
	eng1, err := a.WeCom(ctx, corp, "eng1")
	if err != nil {
		t.Fatal(err)
	}
	viewKey := func() string {
		v, err := a.View(ctx, eng1, corp, "hr")
		if err != nil {
			t.Fatal(err)
		}
		return v.Key()
	}
	k1 := viewKey()
	if k1 == "" || viewKey() != k1 || access.Everyone.Key() != "" {
		t.Errorf("View keys %q, %q, Everyone %q: want one non-empty key, and none for Everyone", k1, viewKey(), access.Everyone.Key())
	}

	// A member who left loses access at the next sync.
	l := tree()
	l.Members = slices.DeleteFunc(l.Members, func(m yidu.Member) bool { return m.UserID == "sales1" })
	f.sync(l)
	if viewKey() == k1 {
		t.Errorf("View key %q unchanged after a sync", k1)
	}
	if _, err := a.WeCom(ctx, corp, "sales1"); !errors.Is(err, access.ErrNotMember) {
		t.Errorf("after leaving: WeCom(sales1) = %v, want ErrNotMember", err)
	}
}

// TestScopeFollowsTheDirectory: a cached scope is rebuilt at once when
// the directory's version moves (idmap.Mapper), and once ScopeTTL passes
// for a directory without versions, so a member moved out of the
// subtree drops out of the leader's View.
func TestScopeFollowsTheDirectory(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB")
	}
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		versioned bool
	}{{"versioned", true}, {"ttl", false}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
			var dir access.Directory = f.m
			if !tt.versioned {
				dir = struct{ access.Directory }{f.m} // hides DirectoryVersion
			}
			a, err := access.New(access.Config{ScopeTTL: time.Minute}, dir, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			p := access.NewPrincipal("viewer4", access.KindToken, false, []access.Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp, Departments: []int64{4}}}})
			everyone := f.set("sales1", "eng1", "back1", "boss", "both")
			count := func() uint64 {
				v, err := a.View(ctx, p, corp, "hr")
				if err != nil {
					t.Fatal(err)
				}
				return v.Count(everyone)
			}
			if got := count(); got != 3 {
				t.Fatalf("View of 4 = %d people, want 3", got)
			}
			l := tree()
			l.Members[4].Departments = []int64{3} // "both" moves to sales only
			f.sync(l)
			want := map[bool]uint64{true: 2, false: 3}[tt.versioned]
			if got := count(); got != want {
				t.Fatalf("right after the sync: %d, want %d", got, want)
			}
			now = now.Add(time.Minute)
			if got := count(); got != 2 {
				t.Fatalf("after the TTL: %d, want 2", got)
			}
		})
	}
}

func TestPrincipalRoles(t *testing.T) {
	senderHR := access.NewPrincipal("s", access.KindToken, false, []access.Grant{{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: corp, Apps: []string{"hr"}}}})
	viewer := access.NewPrincipal("v", access.KindUser, false, []access.Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp, Departments: []int64{4}}}})
	admin := access.NewPrincipal("a", access.KindUser, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: corp}}})
	root := access.NewPrincipal("r", access.KindUser, true, nil)
	for _, tc := range []struct {
		name                  string
		p                     *access.Principal
		corp, app             string
		role                  yidu.Role
		send, remind, allowed bool
	}{
		{"sender of hr sends hr", senderHR, corp, "hr", yidu.RoleSender, true, true, true},
		{"sender of hr cannot send it", senderHR, corp, "it", yidu.RoleSender, false, false, true},
		{"sender of hr, other corp", senderHR, "wwother", "hr", "", false, false, false},
		// A configured viewer reads only: reminding is a sender's or a
		// department leader's (TestViewIsTheSubtree).
		{"viewer cannot send or remind", viewer, corp, "hr", yidu.RoleViewer, false, false, true},
		{"viewer, other corp", viewer, "wwother", "hr", "", false, false, false},
		{"admin sends any app", admin, corp, "it", yidu.RoleAdmin, true, true, true},
		{"admin, other corp", admin, "wwother", "it", "", false, false, false},
		{"star admin", root, "wwany", "x", yidu.RoleAdmin, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.Role(tc.corp); got != tc.role {
				t.Errorf("Role = %q, want %q", got, tc.role)
			}
			if got := tc.p.MaySend(tc.corp, tc.app); got != tc.send {
				t.Errorf("MaySend = %v, want %v", got, tc.send)
			}
			if got := tc.p.MayRemindScoped(tc.corp, tc.app); got != tc.remind {
				t.Errorf("MayRemindScoped = %v, want %v", got, tc.remind)
			}
			if got := tc.p.AllowsCorp(tc.corp); got != tc.allowed {
				t.Errorf("AllowsCorp = %v, want %v", got, tc.allowed)
			}
		})
	}
}

func TestConfigGrants(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corps   []string
		role    yidu.Role
		corp    string
		apps    []string
		depts   []int64
		want    []access.Grant
		all, ok bool
	}{
		{name: "corps alone are admin", corps: []string{"ww1", "ww2"}, ok: true,
			want: []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "ww1"}}, {Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "ww2"}}}},
		{name: "star", corps: []string{"*"}, all: true, ok: true},
		{name: "viewer token", role: yidu.RoleViewer, corp: "ww1", depts: []int64{4}, ok: true,
			want: []access.Grant{{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "ww1", Departments: []int64{4}}}}},
		{name: "both forms", corps: []string{"ww1"}, role: yidu.RoleAdmin, corp: "ww1"},
		{name: "viewer without departments", role: yidu.RoleViewer, corp: "ww1"},
		{name: "role without corp", role: yidu.RoleSender, apps: []string{"hr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, all, err := access.ConfigGrants(tc.corps, tc.role, tc.corp, tc.apps, tc.depts)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, yidu.ErrInvalid)) {
				t.Fatalf("err = %v, want ok %v", err, tc.ok)
			}
			if all != tc.all || len(got) != len(tc.want) {
				t.Fatalf("= %v, %v; want %v, %v", got, all, tc.want, tc.all)
			}
			for i := range got {
				if got[i].Role != tc.want[i].Role || got[i].Scope.Corp != tc.want[i].Scope.Corp || !slices.Equal(got[i].Scope.Departments, tc.want[i].Scope.Departments) {
					t.Errorf("[%d] = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestNewRefusesBadRoles(t *testing.T) {
	for _, r := range []access.RoleGrant{
		{Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: corp}}},                         // no userid
		{UserID: "x", Grant: access.Grant{Role: "boss", Scope: yidu.Scope{Corp: corp}}},                    // unknown role
		{UserID: "x", Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp}}},           // no departments
		{UserID: "x", Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Apps: []string{"hr"}}}}, // no corp
	} {
		if _, err := access.New(access.Config{Roles: []access.RoleGrant{r}}, nil, time.Now); !errors.Is(err, yidu.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", r, err)
		}
	}
}
