package access_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestCheckAudience is issue 41 item 3 against the synced directory: a
// sender kept to department 4 (研发, with 5 后端 under it) and tag 7 may
// address those and the members inside, nothing else.
func TestCheckAudience(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB")
	}
	ctx := context.Background()
	f := newFixture(t)
	l := tree()
	l.Tags = []yidu.Tag{{ID: 7, Name: "值班", UserIDs: []string{"sales1"}}, {ID: 8, Name: "全体销售", Departments: []int64{3}}}
	l.TagsListed = true
	f.sync(l)
	a, err := access.New(access.Config{Roles: []access.RoleGrant{
		{UserID: "eng1", Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: corp, Apps: []string{"hr"},
			Audience: yidu.SenderAudience{Departments: []int64{4}, Tags: []int64{7}}}}},
		{UserID: "back1", Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: corp, Apps: []string{"hr"}}}},
	}}, f.m, time.Now)
	testenv.Check(t, "access.New", err)
	limited, err := a.WeCom(ctx, corp, "eng1")
	testenv.Check(t, "WeCom(eng1)", err)
	free, err := a.WeCom(ctx, corp, "back1")
	testenv.Check(t, "WeCom(back1)", err)
	for _, tc := range []struct {
		name  string
		p     *access.Principal
		au    yidu.Audience
		field string // "" = allowed
	}{
		{"its department", limited, yidu.Audience{Departments: []int64{4}}, ""},
		{"a department under it", limited, yidu.Audience{Departments: []int64{5}}, ""},
		{"its tag", limited, yidu.Audience{Tags: []int64{7}}, ""},
		{"members inside", limited, yidu.Audience{UserIDs: []string{"back1", "both", "sales1"}}, ""},
		{"department 3", limited, yidu.Audience{Departments: []int64{4, 3}}, "audience.departments"},
		{"the root", limited, yidu.Audience{Departments: []int64{1}}, "audience.departments"},
		{"a tag outside", limited, yidu.Audience{Tags: []int64{8}}, "audience.tags"},
		{"全员", limited, yidu.Audience{All: true}, "audience.all"},
		{"a member outside", limited, yidu.Audience{UserIDs: []string{"back1", "boss"}}, "audience.userids"},
		{"an unknown UserID", limited, yidu.Audience{UserIDs: []string{"nobody"}}, "audience.userids"},
		{"a sender without audience", free, yidu.Audience{All: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := a.CheckAudience(ctx, tc.p, corp, "hr", tc.au)
			var oe *access.OutsideError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("CheckAudience = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &oe) || oe.Field != tc.field):
				t.Fatalf("CheckAudience = %v, want OutsideError at %s", err, tc.field)
			}
		})
	}
	t.Run("picker", func(t *testing.T) {
		lim, err := a.Limit(ctx, limited, corp, "hr")
		testenv.Check(t, "Limit", err)
		if lim.All() || !lim.Department(4) || !lim.Department(5) || lim.Department(3) || lim.Department(1) || !lim.Tag(7) || lim.Tag(8) {
			t.Fatalf("Limit: all %v, departments 4 %v 5 %v 3 %v 1 %v, tags 7 %v 8 %v; want only 4, 5 and 7",
				lim.All(), lim.Department(4), lim.Department(5), lim.Department(3), lim.Department(1), lim.Tag(7), lim.Tag(8))
		}
		m, err := lim.Members(ctx)
		testenv.Check(t, "Members", err)
		if want := f.set("eng1", "back1", "both", "sales1"); !m.Equals(want) {
			t.Fatalf("Members = %v, want %v", m.ToArray(), want.ToArray())
		}
		if fl, _ := a.Limit(ctx, free, corp, "hr"); !fl.All() {
			t.Fatal("a sender without audience is limited")
		}
	})
}
