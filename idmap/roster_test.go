package idmap_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestRoster: the sign-in's Member answers active members from memory
// while the directory version holds, and a change made by another
// process (replica) within idmap.RosterCheck of the last check; its own
// changes at once.
func TestRoster(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 7, 1, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	tick := func(d time.Duration) { clock.Add(int64(d)) }
	a, err := idmap.New(db, idmap.Options{Registerer: prometheus.NewRegistry(), Now: now})
	testenv.Check(t, "idmap.New", err)
	b := newMapper(t, db) // another replica
	const corp = "wwroster"
	ids := mustAssign(t, a, corp, "zhangsan", "lisi", "wangwu")
	// A sync named them.
	for id, name := range map[string]string{"zhangsan": "张三", "lisi": "李四", "wangwu": "王五"} {
		if _, err := db.ExecContext(ctx, "UPDATE users SET name = ? WHERE corp_id = ? AND uid = ?", name, corp, ids[id]); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Check(t, "contact", b.ContactChanged(ctx, corp, idmap.ChangeUpdateUser, "wangwu", "", []int64{1}))

	member := func(m *idmap.Mapper, userID string) (string, bool) {
		t.Helper()
		uid, name, active, found, err := m.Member(ctx, corp, userID, false)
		testenv.Check(t, "Member", err)
		if !found || uid != ids[userID] {
			t.Fatalf("Member(%s) = uid %d found %v; want %d", userID, uid, found, ids[userID])
		}
		return name, active
	}
	// The first asks MySQL and reads the roster in the background.
	if name, active := member(a, "zhangsan"); name != "张三" || !active {
		t.Fatalf("Member = %q %v", name, active)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countQueries(a, func() { member(a, "lisi") }) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the roster was never read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	noQueries(t, a, "a sign-in within RosterCheck", func() {
		if name, active := member(a, "lisi"); name != "李四" || !active {
			t.Fatalf("Member(lisi) = %q %v", name, active)
		}
	})
	if q := countQueries(a, func() { tick(idmap.RosterCheck); member(a, "lisi") }); q != 1 {
		t.Fatalf("a sign-in after RosterCheck sent %v statements; want 1 (the version)", q)
	}

	// Another replica: lisi leaves and wangwu is renamed by a sync.
	testenv.Check(t, "delete_user", b.ContactChanged(ctx, corp, idmap.ChangeDeleteUser, "lisi", "", nil))
	if _, err := db.ExecContext(ctx, "UPDATE users SET name = '王五五' WHERE corp_id = ? AND uid = ?", corp, ids["wangwu"]); err != nil {
		t.Fatal(err)
	}
	testenv.Check(t, "contact", b.ContactChanged(ctx, corp, idmap.ChangeUpdateUser, "wangwu", "", []int64{1}))
	// Within RosterCheck the roster may still say so (the page's
	// revocation marks cover that); after it, never.
	tick(idmap.RosterCheck)
	if _, active := member(a, "lisi"); active {
		t.Fatal("a member who left on another replica is still active after RosterCheck")
	}
	if name, _ := member(a, "wangwu"); name != "王五五" {
		t.Fatalf("renamed member = %q after RosterCheck", name)
	}

	// This replica's own leave takes effect at once.
	testenv.Check(t, "delete_user", a.ContactChanged(ctx, corp, idmap.ChangeDeleteUser, "zhangsan", "", nil))
	if _, active := member(a, "zhangsan"); active {
		t.Fatal("a member who left here is still active")
	}
	// And once the roster is read again (not within RosterReload of the
	// last read: between reads a moved directory costs point reads),
	// the answers are the directory's.
	if q := countQueries(a, func() { member(a, "wangwu") }); q == 0 {
		t.Fatal("a member answered from a roster read within RosterReload of the last")
	}
	tick(idmap.RosterReload)
	for countQueries(a, func() { member(a, "wangwu") }) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the roster was never read again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for id, want := range map[string]bool{"zhangsan": false, "lisi": false, "wangwu": true} {
		if _, active := member(a, id); active != want {
			t.Errorf("Member(%s) active = %v; want %v", id, active, want)
		}
	}
}
