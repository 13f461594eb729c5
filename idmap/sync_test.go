package idmap_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/wecom"
)

// fake serves every corp of this test binary: the wecom clients go through
// silenceper, whose URI modifier is process-wide, so it is pointed here
// once and tests using it must not run in parallel.
var fake = fakewecom.New()

func TestMain(m *testing.M) { os.Exit(testenv.RunWithWeCom(m, fake)) }

// bigCorp has 12000 members in 5 departments, every tenth also in a second
// one: 13200 member-department pairs, two user/list_id pages of 10000.
// App 1000002 ("s3cret") sees the whole corp; the contacts-sync secret is
// "contacts", usable for ids only (an IP added since 2022-08-15).
func bigCorp(corp string) fakewecom.Corp {
	c := fakewecom.Corp{
		CorpID:          corp,
		Apps:            []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		ContactsSecret:  "contacts",
		ContactsIDsOnly: true,
		Departments: []fakewecom.Department{
			{ID: 1, Name: "公司", Order: 100},
			{ID: 2, ParentID: 1, Name: "研发", Order: 90},
			{ID: 3, ParentID: 1, Name: "销售", Order: 80},
			{ID: 4, ParentID: 2, Name: "后端", Order: 70},
			{ID: 5, ParentID: 2, Name: "前端", Order: 60},
		},
	}
	for i := range 12000 {
		depts := []int{1 + i%5}
		if i%10 == 0 {
			depts = append(depts, 1+(i+1)%5)
		}
		c.Users = append(c.Users, fakewecom.User{UserID: fmt.Sprintf("emp%05d", i), Name: fmt.Sprintf("员工%d", i), Departments: depts})
	}
	return c
}

// syncer returns a Syncer reading corp with the app secret and, if not
// empty, the contacts-sync secret.
func syncer(tb testing.TB, m *idmap.Mapper, corp, secret, contacts string) *idmap.Syncer {
	tb.Helper()
	dir, err := wecom.NewDirectory(wecom.App{CorpID: corp, AgentID: 1000002, Secret: secret}, wecom.DirectoryOptions{ContactsSecret: contacts})
	testenv.Check(tb, "NewDirectory", err)
	s, err := idmap.NewSyncer(m, map[string]idmap.Directory{corp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(tb, "NewSyncer", err)
	return s
}

func userMap(tb testing.TB, db *sql.DB, corp string) map[string]userRow {
	tb.Helper()
	rows, err := db.Query("SELECT userid, uid, status, departments FROM users WHERE corp_id = ?", corp)
	testenv.Check(tb, "read users", err)
	defer rows.Close()
	out := map[string]userRow{}
	for rows.Next() {
		var id string
		var u userRow
		testenv.Check(tb, "scan", rows.Scan(&id, &u.uid, &u.status, &u.depts))
		out[id] = u
	}
	return out
}

func count(tb testing.TB, db *sql.DB, query string, args ...any) int {
	tb.Helper()
	var n int
	testenv.Check(tb, query, db.QueryRow(query, args...).Scan(&n))
	return n
}

// report is a Report without its Source, comparable.
type report struct {
	Complete                                   bool
	Departments, Users, Created, Updated, Left int
	Unseen                                     int
	UnseenSample                               string
	Flagged                                    int
	FlaggedSample                              string
	Unstorable, Memberships, Names             int
	DepartmentNames                            bool
}

// checkReport checks the report of the sync named what against want.
func checkReport(tb testing.TB, what string, rep idmap.Report, want report) {
	tb.Helper()
	if got := summary(rep); got != want {
		tb.Errorf("%s report = %+v; want %+v", what, got, want)
	}
}

// checkSource checks that a report names the secret the sync read with.
func checkSource(tb testing.TB, rep idmap.Report, secret string) {
	tb.Helper()
	if !strings.Contains(rep.Source, secret) {
		tb.Errorf("Source = %q; want the %s named", rep.Source, secret)
	}
}

func summary(r idmap.Report) report {
	return report{r.Complete, r.Departments, r.Users, r.Created, r.Updated, r.Left, r.Unseen,
		strings.Join(r.UnseenSample, ","), r.Flagged, strings.Join(r.FlaggedSample, ","),
		r.Unstorable, r.Memberships, r.Names, r.DepartmentNames}
}

// TestSync: the app secret alone, with the whole corp visible: a complete
// read without user/list_id (WeCom refuses it the app's token).
func TestSync(t *testing.T) {
	const corp = "wwsync"
	db := testenv.MySQL(t)
	fake.SetCorp(bigCorp(corp))
	listCalls := fake.Calls("/cgi-bin/user/list_id")
	m := newMapper(t, db)
	s := syncer(t, m, corp, "s3cret", "")
	ctx := context.Background()

	// A member known before the first sync (e.g. from a callback, spelt
	// in another case) keeps uid 0.
	mustAssign(t, m, corp, "EMP00007")

	rep, err := s.Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	want := report{Complete: true, Departments: 5, Users: 12000, Created: 11999, Updated: 1, Memberships: 13200, Names: 12000, DepartmentNames: true}
	checkReport(t, "Sync", rep, want)
	checkSource(t, rep, "app secret")
	if n := fake.Calls("/cgi-bin/user/list_id") - listCalls; n != 0 {
		t.Errorf("user/list_id called %d times with the app secret alone; want 0", n)
	}
	if users, span, next := density(t, db, corp); users != 12000 || span != 12000 || next != 12000 {
		t.Errorf("users %d, max uid+1 %d, next_uid %d; want 12000 each", users, span, next)
	}
	first := userMap(t, db, corp)
	if u := first["EMP00007"]; u.uid != 0 || u.status != 1 || u.depts != "3" {
		t.Errorf("EMP00007 = %+v; want uid 0, active, departments 3", u)
	}
	if u := first["emp00010"]; u.depts != "1,2" {
		t.Errorf("emp00010 departments = %q; want 1,2", u.depts)
	}
	var name string
	testenv.Check(t, "name", db.QueryRow("SELECT name FROM users WHERE corp_id = ? AND userid = 'emp00042'", corp).Scan(&name))
	if name != "员工42" {
		t.Errorf("emp00042 name = %q; want 员工42", name)
	}
	depts, err := m.Departments(ctx, corp)
	testenv.Check(t, "Departments", err)
	if len(depts) != 5 || depts[0] != (yidu.Department{ID: 1, Name: "公司", Order: 100}) {
		t.Errorf("Departments = %+v", depts)
	}
	eng, err := m.DepartmentMembers(ctx, corp, []int64{2}, true)
	testenv.Check(t, "DepartmentMembers", err)
	// Departments 2, 4, 5 hold 3 × 2400 primary members plus the second
	// memberships of i%10==0 members whose primary is 1 (i%5==0 → 2nd is 2).
	if got := eng.GetCardinality(); got != 3*2400+1200 {
		t.Errorf("recursive members of 2 = %d; want %d", got, 3*2400+1200)
	}

	t.Run("resync removes a member and renames nobody", func(t *testing.T) {
		c := bigCorp(corp)
		c.Users = append(c.Users[:5], c.Users[6:]...) // emp00005 left
		c.Users[0].Departments = []int{4}             // emp00000 moved
		c.Apps[0].NoDepartmentNames = true            // names must survive
		fake.SetCorp(c)
		fake.RevokeTokens() // the cached token expired meanwhile
		tokens := fake.Calls("/cgi-bin/gettoken")
		rep, err := s.Sync(ctx, corp)
		testenv.Check(t, "Sync", err)
		if n := fake.Calls("/cgi-bin/gettoken") - tokens; n != 1 {
			t.Errorf("gettoken called %d times after the token expired; want 1", n)
		}
		want := report{Complete: true, Departments: 5, Users: 11999, Updated: 1, Left: 1, Memberships: 13198, Names: 11999}
		checkReport(t, "re-Sync", rep, want)
		second := userMap(t, db, corp)
		if len(second) != len(first) {
			t.Errorf("%d users after re-sync; want %d", len(second), len(first))
		}
		for id, u := range first {
			if second[id].uid != u.uid {
				t.Errorf("%s uid %d → %d", id, u.uid, second[id].uid)
			}
		}
		if u := second["emp00005"]; u.status != yidu.StatusLeft {
			t.Errorf("emp00005 status = %d; want 2", u.status)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM user_departments WHERE corp_id = ? AND uid = ?", corp, second["emp00005"].uid); n != 0 {
			t.Errorf("left member still has %d memberships", n)
		}
		if u := second["emp00000"]; u.depts != "4" {
			t.Errorf("emp00000 departments = %q; want 4", u.depts)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM departments WHERE corp_id = ? AND name = ''", corp); n != 0 {
			t.Errorf("%d department names lost when department/list gave none", n)
		}
	})

	t.Run("empty directory writes nothing", func(t *testing.T) {
		c := bigCorp(corp)
		c.Users = nil
		fake.SetCorp(c)
		before := count(t, db, "SELECT COUNT(*) FROM users WHERE corp_id = ? AND status = 1", corp)
		if _, err := s.Sync(ctx, corp); !errors.Is(err, idmap.ErrEmptyDirectory) {
			t.Errorf("Sync of an empty directory = %v; want ErrEmptyDirectory", err)
		}
		if after := count(t, db, "SELECT COUNT(*) FROM users WHERE corp_id = ? AND status = 1", corp); after != before {
			t.Errorf("active users %d → %d", before, after)
		}
	})

	t.Run("errors", func(t *testing.T) {
		fake.SetCorp(bigCorp(corp))
		if _, err := s.Sync(ctx, "unknown-corp"); err == nil {
			t.Error("Sync of a corp without a directory succeeded")
		}
		_, err = syncer(t, m, corp, "wrong", "").Sync(ctx, corp)
		var apiErr *wecom.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != fakewecom.ErrInvalidCredential {
			t.Errorf("Sync with a wrong secret = %v; want errcode %d", err, fakewecom.ErrInvalidCredential)
		}
	})
}

// TestSyncContactsSecret: with the contacts-sync secret, user/list_id
// lists the whole corp (the app sees part of it); names come from the
// app's visible range; a member gone from the corp is marked left.
func TestSyncContactsSecret(t *testing.T) {
	const corp = "wwcontacts"
	db := testenv.MySQL(t)
	m := newMapper(t, db)
	ctx := context.Background()
	c := bigCorp(corp)
	c.Apps[0].VisibleDepartments = []int{2} // 2, 4, 5
	fake.SetCorp(c)
	listCalls := fake.Calls("/cgi-bin/user/list_id")

	rep, err := syncer(t, m, corp, "s3cret", "contacts").Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	// Names only for members in a department the app sees (2, 4 or 5).
	want := report{Complete: true, Departments: 5, Users: 12000, Created: 12000, Memberships: 13200, Names: namesVisible(c), DepartmentNames: true}
	checkReport(t, "Sync", rep, want)
	checkSource(t, rep, "contacts-sync secret")
	if n := fake.Calls("/cgi-bin/user/list_id") - listCalls; n != 2 {
		t.Errorf("user/list_id called %d times; want 2 pages", n)
	}
	var name1, name2 string
	testenv.Check(t, "names", db.QueryRow("SELECT (SELECT name FROM users WHERE corp_id = ? AND userid = 'emp00002'), (SELECT name FROM users WHERE corp_id = ? AND userid = 'emp00001')", corp, corp).Scan(&name1, &name2))
	if name1 != "" || name2 != "员工1" {
		t.Errorf("names of emp00002 (department 3), emp00001 (department 2) = %q, %q; want \"\", 员工1", name1, name2)
	}

	c.Users = c.Users[1:] // emp00000 left the corp
	fake.SetCorp(c)
	rep, err = syncer(t, m, corp, "s3cret", "contacts").Sync(ctx, corp)
	testenv.Check(t, "re-Sync", err)
	if rep.Left != 1 || rep.Unseen != 0 {
		t.Errorf("re-Sync left %d, unseen %d; want 1, 0", rep.Left, rep.Unseen)
	}

	t.Run("an app's secret as the contacts secret", func(t *testing.T) {
		before := count(t, db, "SELECT COUNT(*) FROM users WHERE corp_id = ? AND status = 1", corp)
		c.Apps = append(c.Apps, fakewecom.App{AgentID: 1000009, Secret: "other-app"})
		fake.SetCorp(c)
		_, err := syncer(t, m, corp, "s3cret", "other-app").Sync(ctx, corp)
		var ae *wecom.APIError
		if !errors.As(err, &ae) || ae.API != "user/list_id" || ae.Code != fakewecom.ErrNoPermission ||
			!strings.Contains(err.Error(), "needs the contacts-sync secret") {
			t.Errorf("Sync = %v; want user/list_id errcode 48002 saying it needs the contacts-sync secret", err)
		}
		if after := count(t, db, "SELECT COUNT(*) FROM users WHERE corp_id = ? AND status = 1", corp); after != before {
			t.Errorf("active users %d → %d after a refused sync", before, after)
		}
	})
}

// namesVisible counts c's members in a department app 0 sees.
func namesVisible(c fakewecom.Corp) int {
	vis := map[int]bool{}
	for _, top := range c.Apps[0].VisibleDepartments {
		vis[top] = true
	}
	for changed := true; changed; {
		changed = false
		for _, d := range c.Departments {
			if vis[d.ParentID] && !vis[d.ID] {
				vis[d.ID], changed = true, true
			}
		}
	}
	n := 0
	for _, u := range c.Users {
		if slices.ContainsFunc(u.Departments, func(d int) bool { return vis[d] }) {
			n++
		}
	}
	return n
}

// TestSyncVisibleRange: an app that sees part of the corp reads a partial
// directory. Members it does not list may only be outside its range: they
// are reported, never marked left; what it lists is the truth for the
// departments it sees.
func TestSyncVisibleRange(t *testing.T) {
	const corp = "wwrange"
	db := testenv.MySQL(t)
	m := newMapper(t, db)
	ctx := context.Background()
	c := fakewecom.Corp{
		CorpID: corp,
		Apps:   []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		Departments: []fakewecom.Department{
			{ID: 1, Name: "总部"}, {ID: 2, ParentID: 1, Name: "HR"}, {ID: 3, ParentID: 1, Name: "研发"},
		},
		Users: []fakewecom.User{
			{UserID: "boss", Name: "Boss", Departments: []int{1}},
			{UserID: "hr1", Name: "HR 1", Departments: []int{2}},
			{UserID: "hr2", Name: "HR 2", Departments: []int{2, 3}},
			{UserID: "dev1", Name: "Dev 1", Departments: []int{3}},
			{UserID: "dev2", Name: "Dev 2", Departments: []int{3}},
		},
	}
	fake.SetCorp(c)
	_, err := syncer(t, m, corp, "s3cret", "").Sync(ctx, corp) // the whole corp: complete
	testenv.Check(t, "Sync", err)

	// The app now sees HR only; dev1 moved to HR, hr1 left the corp.
	c.Apps[0].VisibleDepartments = []int{2}
	c.Users = []fakewecom.User{
		{UserID: "boss", Name: "Boss", Departments: []int{1}},
		{UserID: "hr2", Name: "HR 2", Departments: []int{2, 3}},
		{UserID: "dev1", Name: "Dev 1", Departments: []int{2}},
		{UserID: "dev2", Name: "Dev 2", Departments: []int{3}},
	}
	fake.SetCorp(c)
	rep, err := syncer(t, m, corp, "s3cret", "").Sync(ctx, corp)
	testenv.Check(t, "partial Sync", err)
	want := report{Departments: 1, Users: 2, Updated: 1, Unseen: 3, UnseenSample: "boss,dev2,hr1", Memberships: 2, Names: 2, DepartmentNames: true}
	checkReport(t, "partial Sync", rep, want)
	users := userMap(t, db, corp)
	// The app cannot see 1 or 3: what was stored there stands (dev1 may
	// still be in 3 as far as it knows); HR (2) is as listed.
	for id, wantDepts := range map[string]string{"boss": "1", "hr1": "", "hr2": "2,3", "dev1": "2,3", "dev2": "3"} {
		if u := users[id]; u.status != yidu.StatusActive || u.depts != wantDepts {
			t.Errorf("%s = %+v; want active (never left on a partial read), departments %q", id, u, wantDepts)
		}
	}
	hr, err := m.DepartmentMembers(ctx, corp, []int64{2}, false)
	testenv.Check(t, "DepartmentMembers", err)
	if got, want := hr.ToArray(), []uint32{users["hr2"].uid, users["dev1"].uid}; !slices.Equal(sorted(got), sorted(want)) {
		t.Errorf("members of HR = %v; want hr2 and dev1 %v", got, want)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM departments WHERE corp_id = ?", corp); n != 3 {
		t.Errorf("%d departments after a partial read; want the 3 stored (none is deleted)", n)
	}
}

func sorted(s []uint32) []uint32 { s = slices.Clone(s); slices.Sort(s); return s }

// TestSyncFlagsUserIDs: a member whose UserID breaks WeCom's rule is kept
// (their reads count) and flagged; one users.userid cannot hold is left
// out and counted. UserIDs that differ only in case are one member.
func TestSyncFlagsUserIDs(t *testing.T) {
	const corp = "wwflags"
	db := testenv.MySQL(t)
	m := newMapper(t, db)
	ctx := context.Background()
	mustAssign(t, m, corp, "Alice") // from a callback
	fake.SetCorp(fakewecom.Corp{
		CorpID:      corp,
		Apps:        []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}, {ID: 2, ParentID: 1, Name: "HR"}},
		Users: []fakewecom.User{
			{UserID: "alice", Name: "Alice", Departments: []int{1}},
			{UserID: "ALICE", Name: "Alice", Departments: []int{2}},
			{UserID: "-dash", Name: "Dash", Departments: []int{1}},
			{UserID: "张三", Name: "张三", Departments: []int{2}},
			{UserID: strings.Repeat("x", 65), Name: "Long", Departments: []int{1}},
			{UserID: "fine", Name: "Fine", Departments: []int{1}},
		},
	})
	rep, err := syncer(t, m, corp, "s3cret", "").Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	want := report{Complete: true, Departments: 2, Users: 4, Created: 3, Updated: 1, Flagged: 2, FlaggedSample: "-dash,张三",
		Unstorable: 1, Memberships: 5, Names: 4, DepartmentNames: true}
	checkReport(t, "Sync", rep, want)
	ids := map[string]uint32{}
	for _, id := range []string{"alice", "-dash", "张三", "fine"} {
		uid, ok, err := m.Lookup(ctx, corp, id)
		if err != nil || !ok {
			t.Fatalf("Lookup(%q) = %v, %v", id, ok, err)
		}
		ids[id] = uid
	}
	if ids["alice"] != 0 {
		t.Errorf("alice has uid %d; want 0, Alice's from the callback", ids["alice"])
	}
	users, err := m.Users(ctx, corp, []uint32{ids["alice"], ids["-dash"], ids["张三"], ids["fine"]})
	testenv.Check(t, "Users", err)
	for id, bad := range map[string]bool{"alice": false, "-dash": true, "张三": true, "fine": false} {
		if u := users[ids[id]]; u.BadUserID != bad || u.Status != yidu.StatusActive {
			t.Errorf("Users[%s] = %+v; want BadUserID %v, active", id, u, bad)
		}
	}
	if u := users[ids["alice"]]; !slices.Equal(u.Departments, []int64{1, 2}) {
		t.Errorf("alice departments = %v; want [1 2] (alice and ALICE are one member)", u.Departments)
	}
}

// TestSyncTwins: of rows whose UserIDs differ only in case (stored before
// migration 00002), a complete read keeps the lowest uid and marks the
// others left: one member, one active uid.
func TestSyncTwins(t *testing.T) {
	const corp = "wwtwins"
	db := testenv.MySQL(t)
	m := newMapper(t, db)
	ctx := context.Background()
	mustAssign(t, m, corp, "bob") // uid 0
	_, err := db.Exec("INSERT INTO users (corp_id, uid, userid) VALUES (?, 1, 'Bob')", corp)
	testenv.Check(t, "twin", err)
	_, err = db.Exec("UPDATE uid_seq SET next_uid = 2 WHERE corp_id = ?", corp)
	testenv.Check(t, "uid_seq", err)
	fake.SetCorp(fakewecom.Corp{
		CorpID: corp, Apps: []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}},
		Users:       []fakewecom.User{{UserID: "BOB", Name: "Bob", Departments: []int{1}}},
	})
	rep, err := syncer(t, newMapper(t, db), corp, "s3cret", "").Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	if rep.Created != 0 || rep.Left != 1 {
		t.Errorf("Sync created %d, left %d; want 0, 1 (the twin)", rep.Created, rep.Left)
	}
	if u := userMap(t, db, corp); u["bob"].status != yidu.StatusActive || u["Bob"].status != yidu.StatusLeft {
		t.Errorf("bob %+v, Bob %+v; want uid 0 active, uid 1 left", u["bob"], u["Bob"])
	}
}

// revokes records the members the Mapper said left.
type revokes struct {
	mu   sync.Mutex
	uids []uint32
}

func (r *revokes) Revoke(_ context.Context, corpID string, uids []uint32) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uids = append(r.uids, uids...)
	return nil
}

// TestLeaveRevokes (issue 50): a member a complete sync no longer lists,
// and one change_contact delete_user names, are told to the Revoker (the
// reading page ends their sessions); members who stay are not.
func TestLeaveRevokes(t *testing.T) {
	const corp = "wwrevoke"
	db := testenv.MySQL(t)
	rv := &revokes{}
	m, err := idmap.New(db, idmap.Options{Registerer: prometheus.NewRegistry(), Revoker: rv})
	testenv.Check(t, "idmap.New", err)
	ctx := context.Background()
	c := fakewecom.Corp{
		CorpID: corp, Apps: []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}},
		Users: []fakewecom.User{{UserID: "ann", Name: "Ann", Departments: []int{1}}, {UserID: "ben", Name: "Ben", Departments: []int{1}},
			{UserID: "cat", Name: "Cat", Departments: []int{1}}},
	}
	fake.SetCorp(c)
	_, err = syncer(t, m, corp, "s3cret", "").Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	ids := userMap(t, db, corp)
	c.Users = c.Users[1:] // ann left
	fake.SetCorp(c)
	_, err = syncer(t, m, corp, "s3cret", "").Sync(ctx, corp)
	testenv.Check(t, "re-Sync", err)
	testenv.Check(t, "delete_user", m.ContactChanged(ctx, corp, idmap.ChangeDeleteUser, "cat", "", nil))
	want := []uint32{ids["ann"].uid, ids["cat"].uid}
	if !slices.Equal(rv.uids, want) {
		t.Errorf("revoked %v; want ann's and cat's %v", rv.uids, want)
	}
}
