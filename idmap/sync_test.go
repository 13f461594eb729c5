package idmap_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/idmap/wecomdir"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// wecom serves every corp of this test binary: wecomdir goes through
// silenceper, whose URI modifier is process-wide, so it is pointed here once
// and tests using it must not run in parallel.
var wecom = fakewecom.New()

func TestMain(m *testing.M) { os.Exit(testenv.RunWithWeCom(m, wecom)) }

// bigCorp has 12000 members in 5 departments, every tenth also in a second
// one: 13200 user/list_id rows, two pages of 10000.
func bigCorp(corp string) fakewecom.Corp {
	c := fakewecom.Corp{
		CorpID: corp,
		Apps:   []fakewecom.App{{AgentID: 1000002, Secret: "s3cret"}},
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

func TestSync(t *testing.T) {
	const corp = "wwsync"
	db := testenv.MySQL(t)
	fake := wecom
	fake.SetCorp(bigCorp(corp))
	listCalls := fake.Calls("/cgi-bin/user/list_id")
	m, _ := newMapper(t, db)
	dir := wecomdir.New(corp, "s3cret")
	s, err := idmap.NewSyncer(m, map[string]idmap.Directory{corp: dir}, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewSyncer", err)
	ctx := context.Background()

	// A member known before the first sync (e.g. from a callback) keeps uid 0.
	mustAssign(t, m, corp, "emp00007")

	rep, err := s.Sync(ctx, corp)
	testenv.Check(t, "Sync", err)
	want := idmap.Report{Departments: 5, Users: 12000, Created: 11999, Updated: 1, Memberships: 13200, Names: true, DepartmentNames: true}
	if rep != want {
		t.Errorf("Sync report = %+v; want %+v", rep, want)
	}
	if n := fake.Calls("/cgi-bin/user/list_id") - listCalls; n != 2 {
		t.Errorf("user/list_id called %d times; want 2 pages", n)
	}
	if users, span, next := density(t, db, corp); users != 12000 || span != 12000 || next != 12000 {
		t.Errorf("users %d, max uid+1 %d, next_uid %d; want 12000 each", users, span, next)
	}
	first := userMap(t, db, corp)
	if u := first["emp00007"]; u.uid != 0 || u.status != 1 || u.depts != "3" {
		t.Errorf("emp00007 = %+v; want uid 0, active, departments 3", u)
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
		want := idmap.Report{Departments: 5, Users: 11999, Updated: 1, Left: 1, Memberships: 13198, Names: true}
		if rep != want {
			t.Errorf("re-Sync report = %+v; want %+v", rep, want)
		}
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
			t.Errorf("%d department names lost when department/list was refused", n)
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
		if _, err := s.Sync(ctx, "unknown-corp"); err == nil {
			t.Error("Sync of a corp without a directory succeeded")
		}
		bad, err := idmap.NewSyncer(m, map[string]idmap.Directory{corp: wecomdir.New(corp, "wrong")}, idmap.Options{})
		testenv.Check(t, "NewSyncer", err)
		_, err = bad.Sync(ctx, corp)
		var apiErr *idmap.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != fakewecom.ErrInvalidCredential {
			t.Errorf("Sync with a wrong secret = %v; want errcode %d", err, fakewecom.ErrInvalidCredential)
		}
	})
}
