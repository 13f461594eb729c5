package access_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestRecordRoleChanges: the first start records every configured grant,
// a start with the same grants records nothing, a changed grant is one
// revoke and one grant, and replicas starting together record each
// change once.
func TestRecordRoleChanges(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB")
	}
	ctx := context.Background()
	db := testenv.MySQL(t)
	rec := audit.NewMySQL(db)
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	viewer := func(depts ...int64) access.Holder {
		return access.Holder{Kind: access.KindWeCom, Name: "lisi", Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: "acme", Departments: depts}}}
	}
	first := []access.Holder{
		{Kind: access.KindUser, Name: "hr-admin", AllCorps: true},
		{Kind: access.KindToken, Name: "ci", Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: "acme", Apps: []string{"hr", "it"}}}},
		viewer(4, 3),
	}
	details := func() []string {
		t.Helper()
		rows, err := db.QueryContext(ctx, "SELECT detail FROM audit_events WHERE action = 'role_change' AND actor = 'yidu.yaml' ORDER BY id")
		testenv.Check(t, "read audit", err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var d string
			testenv.Check(t, "scan", rows.Scan(&d))
			out = append(out, d)
		}
		return out
	}
	steps := []struct {
		name    string
		holders []access.Holder
		want    []string // the events this start adds
	}{
		{"first start", first, []string{
			"grant sender apps=hr,it of acme to token ci",
			"grant viewer departments=3,4 of acme to wecom lisi",
			"grant admin of * to user hr-admin"}},
		{"same grants, order aside", []access.Holder{first[2], first[0], first[1], viewer(3, 4)}, nil},
		{"lisi views 5 instead", []access.Holder{first[0], first[1], viewer(5)}, []string{
			"grant viewer departments=5 of acme to wecom lisi",
			"revoke viewer departments=3,4 of acme to wecom lisi"}},
		// dashboard.leaders_see on, then off: a grant and a revoke
		// (issue 38: it grants every department leader a viewer role).
		{"leaders_see on", []access.Holder{first[0], first[1], viewer(5), access.LeadersHolder()}, []string{
			"grant viewer of * to leaders department_leaders"}},
		{"leaders_see off", []access.Holder{first[0], first[1], viewer(5)}, []string{
			"revoke viewer of * to leaders department_leaders"}},
	}
	var all []string
	for _, st := range steps {
		n, err := access.RecordRoleChanges(ctx, db, rec, st.holders, now)
		testenv.Check(t, st.name, err)
		all = append(all, st.want...)
		if got := details(); n != len(st.want) || !sameSet(got, all) {
			t.Fatalf("%s: recorded %d, events %q; want %q", st.name, n, got, all)
		}
	}

	// Three replicas start together with a new token: one event.
	next := []access.Holder{first[0], first[1], viewer(5), {Kind: access.KindToken, Name: "bi", Grant: access.Grant{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "acme"}}}}
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := access.RecordRoleChanges(ctx, db, rec, next, now); err != nil {
				t.Errorf("replica: %v", err)
			}
		}()
	}
	wg.Wait()
	all = append(all, "grant admin of acme to token bi")
	if got := details(); !sameSet(got, all) {
		t.Errorf("after three replicas: %q; want %q", got, all)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}
