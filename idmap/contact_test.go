package idmap_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

type userRow struct {
	uid    uint32
	status yidu.UserStatus
	depts  string
}

func readUser(tb testing.TB, db *sql.DB, corp, userID string) (userRow, bool) {
	tb.Helper()
	var u userRow
	err := db.QueryRow("SELECT uid, status, departments FROM users WHERE corp_id = ? AND userid = ?", corp, userID).
		Scan(&u.uid, &u.status, &u.depts)
	if errors.Is(err, sql.ErrNoRows) {
		return u, false
	}
	testenv.Check(tb, "read user", err)
	return u, true
}

func memberships(tb testing.TB, db *sql.DB, corp string, uid uint32) []int64 {
	tb.Helper()
	return testenv.Column[int64](tb, db, "SELECT dept_id FROM user_departments WHERE corp_id = ? AND uid = ? ORDER BY dept_id", corp, uid)
}

func TestContactChanged(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()
	const corp = "corp"
	apply := func(t *testing.T, typ, id, newID string, depts []int64) {
		t.Helper()
		testenv.Check(t, "ContactChanged "+typ, m.ContactChanged(ctx, corp, typ, id, newID, depts))
	}
	mustAssign(t, m, corp, "first") // uid 0

	t.Run("create", func(t *testing.T) {
		for range 2 { // idempotent
			apply(t, idmap.ChangeCreateUser, "zhang", "", []int64{2, 3})
		}
		u, ok := readUser(t, db, corp, "zhang")
		if !ok || u.uid != 1 || u.status != yidu.StatusActive || u.depts != "2,3" {
			t.Errorf("zhang = %+v, %v; want uid 1, status 1, departments 2,3", u, ok)
		}
		if got := memberships(t, db, corp, 1); !slices.Equal(got, []int64{2, 3}) {
			t.Errorf("memberships = %v; want [2 3]", got)
		}
	})
	t.Run("update departments", func(t *testing.T) {
		apply(t, idmap.ChangeUpdateUser, "zhang", "", []int64{4})
		if got := memberships(t, db, corp, 1); !slices.Equal(got, []int64{4}) {
			t.Errorf("memberships = %v; want [4]", got)
		}
		apply(t, idmap.ChangeUpdateUser, "zhang", "", nil) // no Department: unchanged
		if got := memberships(t, db, corp, 1); !slices.Equal(got, []int64{4}) {
			t.Errorf("memberships after update without departments = %v; want [4]", got)
		}
	})
	t.Run("rename keeps uid", func(t *testing.T) {
		for range 2 {
			apply(t, idmap.ChangeUpdateUser, "zhang", "zhang.san", []int64{4, 5})
		}
		if _, ok := readUser(t, db, corp, "zhang"); ok {
			t.Error("old userid still in users")
		}
		u, ok := readUser(t, db, corp, "zhang.san")
		if !ok || u.uid != 1 || u.depts != "4,5" {
			t.Errorf("zhang.san = %+v, %v; want uid 1, departments 4,5", u, ok)
		}
		if uid, ok, _ := m.Lookup(ctx, corp, "zhang.san"); !ok || uid != 1 {
			t.Errorf("Lookup(new) = %d, %v; want 1, true", uid, ok)
		}
		if _, ok, _ := m.Lookup(ctx, corp, "zhang"); ok {
			t.Error("Lookup(old) still answers from the cache")
		}
	})
	t.Run("rename onto an existing userid", func(t *testing.T) {
		mustAssign(t, m, corp, "li", "li.si") // uids 2, 3
		apply(t, idmap.ChangeUpdateUser, "li", "li.si", nil)
		old, _ := readUser(t, db, corp, "li")
		nw, _ := readUser(t, db, corp, "li.si")
		if old.status != yidu.StatusLeft || nw.uid != 3 || nw.status != yidu.StatusActive {
			t.Errorf("li = %+v, li.si = %+v; want li left, li.si uid 3 active", old, nw)
		}
	})
	t.Run("rename of an unknown member creates the new id", func(t *testing.T) {
		apply(t, idmap.ChangeUpdateUser, "ghost", "wang", []int64{7})
		u, ok := readUser(t, db, corp, "wang")
		if !ok || u.uid != 4 || u.depts != "7" {
			t.Errorf("wang = %+v, %v; want uid 4, departments 7", u, ok)
		}
	})
	t.Run("delete keeps uid forever", func(t *testing.T) {
		for range 2 {
			apply(t, idmap.ChangeDeleteUser, "wang", "", nil)
		}
		u, _ := readUser(t, db, corp, "wang")
		if u.uid != 4 || u.status != yidu.StatusLeft {
			t.Errorf("wang = %+v; want uid 4, status 2", u)
		}
		if got := memberships(t, db, corp, 4); len(got) != 0 {
			t.Errorf("left member still in departments %v", got)
		}
		all, err := m.AllMembers(ctx, corp)
		testenv.Check(t, "AllMembers", err)
		if all.Contains(4) {
			t.Error("AllMembers includes a left member")
		}
		// Re-created: the same uid comes back, active.
		apply(t, idmap.ChangeCreateUser, "wang", "", nil)
		if u, _ := readUser(t, db, corp, "wang"); u.uid != 4 || u.status != yidu.StatusActive {
			t.Errorf("re-created wang = %+v; want uid 4 active", u)
		}
		apply(t, idmap.ChangeDeleteUser, "never-seen", "", nil)
		if _, ok := readUser(t, db, corp, "never-seen"); ok {
			t.Error("delete_user of an unknown member created it")
		}
	})
	t.Run("UserIDs match whatever their case", func(t *testing.T) {
		apply(t, idmap.ChangeCreateUser, "ZhaoLiu", "", []int64{1}) // uid 5
		// A new UserID that differs only in case is the same member.
		apply(t, idmap.ChangeUpdateUser, "zhaoliu", "ZHAOLIU", []int64{2})
		u, ok := readUser(t, db, corp, "ZhaoLiu")
		if !ok || u.uid != 5 || u.status != yidu.StatusActive || u.depts != "2" {
			t.Errorf("ZhaoLiu = %+v, %v; want uid 5 active in 2 (no rename conflict)", u, ok)
		}
		apply(t, idmap.ChangeDeleteUser, "zhaoLIU", "", nil)
		if u, _ := readUser(t, db, corp, "ZhaoLiu"); u.status != yidu.StatusLeft {
			t.Errorf("ZhaoLiu after delete_user of zhaoLIU = %+v; want left", u)
		}
	})
	t.Run("a UserID breaking WeCom's rule is kept and flagged", func(t *testing.T) {
		apply(t, idmap.ChangeCreateUser, "good.one", "", nil) // uid 6
		apply(t, idmap.ChangeUpdateUser, "good.one", "-bad one", nil)
		users, err := m.Users(ctx, corp, []uint32{6})
		testenv.Check(t, "Users", err)
		if u := users[6]; u.UserID != "-bad one" || !u.BadUserID || u.Status != yidu.StatusActive {
			t.Errorf("renamed member = %+v; want -bad one, flagged, active", u)
		}
		apply(t, idmap.ChangeUpdateUser, "-bad one", "good.two", nil)
		if users, _ := m.Users(ctx, corp, []uint32{6}); users[6].BadUserID {
			t.Errorf("member renamed to good.two = %+v; want the flag cleared", users[6])
		}
	})
	t.Run("ignored and invalid", func(t *testing.T) {
		tests := []struct {
			name      string
			typ, id   string
			newID     string
			depts     []int64
			wantErr   error
			wantWrite bool
		}{
			{"party change ignored", "create_party", "x", "", nil, nil, false},
			{"empty userid", idmap.ChangeCreateUser, "", "", nil, idmap.ErrInvalidChange, false},
			{"bad new userid", idmap.ChangeUpdateUser, "zhang.san", "a\xff", nil, idmap.ErrInvalidChange, false},
			{"negative department", idmap.ChangeCreateUser, "neg", "", []int64{-1}, idmap.ErrInvalidChange, false},
			{"too many departments", idmap.ChangeCreateUser, "many", "", make([]int64, 600), idmap.ErrInvalidChange, false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var before int
				testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM users").Scan(&before))
				err := m.ContactChanged(ctx, corp, tt.typ, tt.id, tt.newID, tt.depts)
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("ContactChanged(%q, %q) = %v; want %v", tt.typ, tt.id, err, tt.wantErr)
				}
				var after int
				testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM users").Scan(&after))
				if after != before {
					t.Errorf("users went from %d to %d; want no write", before, after)
				}
			})
		}
	})
	if users, span, next := density(t, db, corp); users != span || span != next {
		t.Errorf("users %d, max uid+1 %d, next_uid %d; want equal", users, span, next)
	}
}
