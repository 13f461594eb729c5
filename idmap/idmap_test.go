package idmap_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// newMapper returns a Mapper on db with its own registry.
func newMapper(tb testing.TB, db *sql.DB) *idmap.Mapper {
	tb.Helper()
	m, err := idmap.New(db, idmap.Options{Registerer: prometheus.NewRegistry()})
	testenv.Check(tb, "idmap.New", err)
	return m
}

// newTestMapper returns a Mapper on a fresh migrated database and the
// database.
func newTestMapper(tb testing.TB) (*idmap.Mapper, *sql.DB) {
	tb.Helper()
	db := testenv.MySQL(tb)
	return newMapper(tb, db), db
}

// noQueries fails tb unless m sends no statement while fn runs (what
// names fn in the message).
func noQueries(tb testing.TB, m *idmap.Mapper, what string, fn func()) {
	tb.Helper()
	if q := countQueries(m, fn); q != 0 {
		tb.Errorf("%s sent %v statements; want 0", what, q)
	}
}

// countQueries returns how many statements m sent, every op, while fn ran.
func countQueries(m *idmap.Mapper, fn func()) float64 {
	total := func() (n float64) {
		for _, op := range idmap.OpNames {
			n += testutil.ToFloat64(idmap.QueryCounter(m, op))
		}
		return n
	}
	before := total()
	fn()
	return total() - before
}

func mustAssign(tb testing.TB, m *idmap.Mapper, corp string, ids ...string) map[string]uint32 {
	tb.Helper()
	got, err := m.Assign(context.Background(), corp, ids)
	testenv.Check(tb, "Assign", err)
	return got
}

// density returns users, max(uid)+1 and uid_seq.next_uid of corp.
func density(tb testing.TB, db *sql.DB, corp string) (users, span, next int) {
	tb.Helper()
	err := db.QueryRow("SELECT COUNT(*), COALESCE(MAX(uid)+1, 0) FROM users WHERE corp_id = ?", corp).Scan(&users, &span)
	testenv.Check(tb, "count users", err)
	err = db.QueryRow("SELECT next_uid FROM uid_seq WHERE corp_id = ?", corp).Scan(&next)
	testenv.Check(tb, "read uid_seq", err)
	return users, span, next
}

func TestAssignDenseFromZero(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()

	got := mustAssign(t, m, "corpA", "a", "b", "c", "b")
	want := map[string]uint32{"a": 0, "b": 1, "c": 2}
	for id, uid := range want {
		if got[id] != uid {
			t.Errorf("Assign(%q) = %d; want %d", id, got[id], uid)
		}
	}
	if len(got) != 3 {
		t.Errorf("Assign returned %d ids; want 3", len(got))
	}
	got = mustAssign(t, m, "corpA", "b", "d")
	if got["b"] != 1 || got["d"] != 3 {
		t.Errorf("second Assign = %v; want b=1 d=3", got)
	}
	// Corps are independent: each starts at 0.
	if got := mustAssign(t, m, "corpB", "a"); got["a"] != 0 {
		t.Errorf("corpB Assign(a) = %d; want 0", got["a"])
	}
	// A second Mapper (another instance) sees the same mapping.
	m2 := newMapper(t, db)
	for id, uid := range map[string]uint32{"a": 0, "b": 1, "c": 2, "d": 3} {
		got, ok, err := m2.Lookup(ctx, "corpA", id)
		if err != nil || !ok || got != uid {
			t.Errorf("Lookup(%q) = %d, %v, %v; want %d, true, nil", id, got, ok, err, uid)
		}
	}
	if _, ok, err := m2.Lookup(ctx, "corpA", "nobody"); ok || err != nil {
		t.Errorf("Lookup(nobody) = ok %v, err %v; want false, nil", ok, err)
	}
	if users, span, next := density(t, db, "corpA"); users != 4 || span != 4 || next != 4 {
		t.Errorf("users %d, max uid+1 %d, next_uid %d; want 4, 4, 4", users, span, next)
	}
}

func TestAssignInvalid(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()
	tests := []struct {
		name   string
		corp   string
		userID string
		want   error
	}{
		{"empty userid", "corp", "", idmap.ErrInvalidUserID},
		{"65 bytes", "corp", strings.Repeat("x", 65), idmap.ErrInvalidUserID},
		{"invalid utf-8", "corp", "a\xffb", idmap.ErrInvalidUserID},
		{"trailing space (PAD SPACE collation)", "corp", "alice ", idmap.ErrInvalidUserID},
		{"empty corp", "", "a", idmap.ErrInvalidCorpID},
		{"corp with space", "co rp", "a", idmap.ErrInvalidCorpID},
		{"corp non-ascii", "公司", "a", idmap.ErrInvalidCorpID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			noQueries(t, m, "invalid input", func() {
				if _, err := m.Assign(ctx, tt.corp, []string{"fine", tt.userID}); !errors.Is(err, tt.want) {
					t.Errorf("Assign(%q, %q) error = %v; want %v", tt.corp, tt.userID, err, tt.want)
				}
				uid, ok, err := m.Lookup(ctx, tt.corp, tt.userID)
				if uid != 0 || ok || err != nil {
					t.Errorf("Lookup(%q, %q) = %d, %v, %v; want 0, false, nil", tt.corp, tt.userID, uid, ok, err)
				}
			})
		})
	}
	var n int
	testenv.Check(t, "count", db.QueryRow("SELECT COUNT(*) FROM users").Scan(&n))
	if n != 0 {
		t.Errorf("%d users written by rejected batches; want 0", n)
	}
	// 64 bytes of 4-byte characters is the longest valid UserID.
	long := strings.Repeat("😀", 16)
	if got := mustAssign(t, m, "corp", long); got[long] != 0 {
		t.Errorf("Assign(64-byte id) = %v", got)
	}
}

// TestCaseInsensitive: WeCom compares UserIDs case-insensitively, so
// spellings that differ only in ASCII case are one member with one uid,
// from the cache and from MySQL; a UserID with other characters is
// compared as spelt (yidu.UserID.Fold).
func TestCaseInsensitive(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()
	got := mustAssign(t, m, "corp", "Alice", "alice", "ALICE", " alice", "alicé", "ALICé")
	if got["Alice"] != 0 || got["alice"] != 0 || got["ALICE"] != 0 {
		t.Errorf("Assign = %v; want Alice, alice and ALICE on uid 0", got)
	}
	if got[" alice"] == 0 || got["alicé"] == 0 || got["ALICé"] == got["alicé"] {
		t.Errorf("Assign = %v; want \" alice\", alicé and ALICé apart", got)
	}
	if users, _, _ := density(t, db, "corp"); users != 4 {
		t.Errorf("%d users; want 4 (one row for Alice's spellings)", users)
	}
	var spelt string
	testenv.Check(t, "userid", db.QueryRow("SELECT userid FROM users WHERE corp_id = 'corp' AND uid = 0").Scan(&spelt))
	if spelt != "Alice" {
		t.Errorf("users.userid = %q; want the first spelling, Alice", spelt)
	}
	m2 := newMapper(t, db) // cold cache: answers come from MySQL
	for id, want := range map[string]uint32{"aLiCe": 0, "alice": 0, "alicé": got["alicé"], "ALICé": got["ALICé"]} {
		uid, ok, err := m2.Lookup(ctx, "corp", id)
		if err != nil || !ok || uid != want {
			t.Errorf("Lookup(%q) = %d, %v, %v; want %d", id, uid, ok, err, want)
		}
	}
	if _, ok, _ := m2.Lookup(ctx, "corp", "ALICÉ"); ok {
		t.Error("Lookup(ALICÉ) found a member; non-ASCII UserIDs are compared as spelt")
	}
}

// TestFoldColumn: users.userid_key (SQL) folds as yidu.UserID.Fold (Go),
// and users.bad_userid is yidu.UserID.Valid's verdict, for every UserID
// idmap stores.
func TestFoldColumn(t *testing.T) {
	m, db := newTestMapper(t)
	ids := []string{"Zhang.San@Corp", "zhang_san-2", "ÉMILE", "Émile", "张三", "-dash", "a b", strings.Repeat("X", 64), "9Lives"}
	mustAssign(t, m, "corp", ids...)
	rows, err := db.Query("SELECT userid, userid_key, bad_userid FROM users WHERE corp_id = 'corp'")
	testenv.Check(t, "select", err)
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id, key string
		var bad bool
		testenv.Check(t, "scan", rows.Scan(&id, &key, &bad))
		if want := yidu.UserID(id).Fold(); key != want {
			t.Errorf("userid_key of %q = %q; want %q (yidu.UserID.Fold)", id, key, want)
		}
		if want := !yidu.UserID(id).Valid(); bad != want {
			t.Errorf("bad_userid of %q = %v; want %v", id, bad, want)
		}
		n++
	}
	if n != len(ids) {
		t.Errorf("%d rows; want %d", n, len(ids))
	}
}

// TestTwins: rows stored before migration 00002, whose UserIDs differ only
// in case, keep their uids; every lookup and Assign answers the lowest.
func TestTwins(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()
	mustAssign(t, m, "corp", "x") // uid 0, and uid_seq
	_, err := db.Exec("INSERT INTO users (corp_id, uid, userid) VALUES ('corp', 2, 'bob'), ('corp', 1, 'Bob')")
	testenv.Check(t, "insert twins", err)
	_, err = db.Exec("UPDATE uid_seq SET next_uid = 3 WHERE corp_id = 'corp'")
	testenv.Check(t, "uid_seq", err)
	m2 := newMapper(t, db)
	if uid, ok, err := m2.Lookup(ctx, "corp", "BOB"); err != nil || !ok || uid != 1 {
		t.Errorf("Lookup(BOB) = %d, %v, %v; want the lowest uid, 1", uid, ok, err)
	}
	if got := mustAssign(t, newMapper(t, db), "corp", "bob"); got["bob"] != 1 {
		t.Errorf("Assign(bob) = %v; want 1", got)
	}
	m3 := newMapper(t, db)
	if _, err := m3.Warm(ctx, "corp"); err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := m3.Lookup(ctx, "corp", "bOb"); uid != 1 {
		t.Errorf("Lookup(bOb) after Warm = %d; want 1", uid)
	}
}

func TestCacheHitNeverQueries(t *testing.T) {
	m, db := newTestMapper(t)
	ctx := context.Background()
	mustAssign(t, m, "corp", "a", "b")

	cold := newMapper(t, db)
	q := countQueries(cold, func() {
		if _, ok, err := cold.Lookup(ctx, "corp", "a"); !ok || err != nil {
			t.Fatalf("Lookup(a) = %v, %v", ok, err)
		}
	})
	if q != 1 {
		t.Errorf("a miss sent %v statements; want 1", q)
	}
	noQueries(t, cold, "cache hits", func() {
		for range 100 {
			if uid, ok, err := cold.Lookup(ctx, "corp", "a"); uid != 0 || !ok || err != nil {
				t.Fatalf("Lookup(a) = %d, %v, %v", uid, ok, err)
			}
		}
		if got, err := cold.Assign(ctx, "corp", []string{"a"}); err != nil || got["a"] != 0 {
			t.Fatalf("Assign(a) = %v, %v", got, err)
		}
	})
	if h := testutil.ToFloat64(idmap.LookupHits(cold)); h != 100 {
		t.Errorf("hits = %v; want 100", h)
	}
}

func TestLookupMissesCollapse(t *testing.T) {
	m, db := newTestMapper(t)
	mustAssign(t, m, "corp", "a")
	cold := newMapper(t, db)
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if uid, ok, err := cold.Lookup(context.Background(), "corp", "a"); uid != 0 || !ok || err != nil {
				t.Fatalf("Lookup(a) = %d, %v, %v", uid, ok, err)
			}
		})
	}
	wg.Wait()
	if q := testutil.ToFloat64(idmap.QueryCounter(cold, "lookup")); q != 1 {
		t.Errorf("50 concurrent misses sent %v lookups; want 1", q)
	}
}

// TestConcurrentInstances runs two Mappers, each on its own pool (two
// instances), 8 goroutines each, assigning overlapping ranges of 2000 new
// UserIDs in shuffled batches. Every answer must agree and uids stay dense.
func TestConcurrentInstances(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	var mappers []*idmap.Mapper
	for range 2 {
		db, err := sql.Open("mysql", dsn)
		testenv.Check(t, "open", err)
		db.SetMaxOpenConns(16)
		t.Cleanup(func() { db.Close() })
		m := newMapper(t, db)
		mappers = append(mappers, m)
	}
	const universe, perWorker, batch = 2000, 750, 50
	var mu sync.Mutex
	answers := map[string]uint32{}
	var wg sync.WaitGroup
	for mi, m := range mappers {
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(mi), uint64(g)))
				ids := make([]string, perWorker)
				for i := range ids {
					ids[i] = fmt.Sprintf("user-%04d", (g*250+i)%universe)
				}
				r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
				for start := 0; start < len(ids); start += batch {
					got, err := m.Assign(context.Background(), "corp", ids[start:start+batch])
					if err != nil {
						t.Errorf("Assign: %v", err)
						return
					}
					mu.Lock()
					for id, uid := range got {
						if prev, ok := answers[id]; ok && prev != uid {
							t.Errorf("%s got uid %d and %d", id, prev, uid)
						}
						answers[id] = uid
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	check, err := sql.Open("mysql", dsn)
	testenv.Check(t, "open", err)
	defer check.Close()
	users, span, next := density(t, check, "corp")
	t.Logf("density: %d users over uids [0,%d): %.1f%%, next_uid %d", users, span, 100*float64(users)/float64(span), next)
	if users != universe || span != universe || next != universe {
		t.Errorf("users %d, max uid+1 %d, next_uid %d; want all %d (exactly dense)", users, span, next, universe)
	}
	if len(answers) != universe {
		t.Errorf("%d ids answered; want %d", len(answers), universe)
	}
	rows, err := check.Query("SELECT userid, uid FROM users WHERE corp_id = 'corp'")
	testenv.Check(t, "read users", err)
	defer rows.Close()
	for rows.Next() {
		var id string
		var uid uint32
		testenv.Check(t, "scan", rows.Scan(&id, &uid))
		if answers[id] != uid {
			t.Errorf("MySQL has %s = %d; Assign answered %d", id, uid, answers[id])
		}
	}
}

func TestWarm(t *testing.T) {
	m, db := newTestMapper(t)
	mustAssign(t, m, "corp", "a", "b", "c")
	cold := newMapper(t, db)
	n, err := cold.Warm(context.Background(), "corp")
	if err != nil || n != 3 {
		t.Fatalf("Warm = %d, %v; want 3, nil", n, err)
	}
	noQueries(t, cold, "Lookup after Warm", func() {
		if uid, ok, _ := cold.Lookup(context.Background(), "corp", "c"); !ok || uid != 2 {
			t.Errorf("Lookup(c) = %d, %v; want 2, true", uid, ok)
		}
	})
	if e := testutil.ToFloat64(idmap.CacheEntries(cold)); e != 3 {
		t.Errorf("cache entries = %v; want 3", e)
	}
}

// TestSeqStartsAfterExistingUsers: users loaded without uid_seq (e.g. by
// hand) must not be overwritten by fresh uids.
func TestSeqStartsAfterExistingUsers(t *testing.T) {
	db := testenv.MySQL(t)
	_, err := db.Exec("INSERT INTO users (corp_id, uid, userid) VALUES ('corp', 0, 'x'), ('corp', 5, 'y')")
	testenv.Check(t, "seed", err)
	m := newMapper(t, db)
	got := mustAssign(t, m, "corp", "x", "z")
	if got["x"] != 0 || got["z"] != 6 {
		t.Errorf("Assign = %v; want x=0 z=6", got)
	}
}

// TestCached: the read path's memory-only lookup answers what the cache
// holds (as WeCom compares UserIDs, case-insensitively) and nothing else,
// and never asks MySQL.
func TestCached(t *testing.T) {
	m, db := newTestMapper(t)
	uids := mustAssign(t, m, "corp", "alice", "bob")
	cold := newMapper(t, db)
	if _, ok := cold.Cached("corp", "alice"); ok {
		t.Errorf("Cached(alice) on a cold mapper = ok; want a miss")
	}
	if _, err := cold.Warm(context.Background(), "corp"); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(idmap.QueryCounter(cold, "lookup"))
	for _, tc := range []struct {
		corp, user string
		uid        uint32
		ok         bool
	}{
		{"corp", "alice", uids["alice"], true},
		{"corp", "ALICE", uids["alice"], true},
		{"corp", "bob", uids["bob"], true},
		{"corp", "carol", 0, false},
		{"other", "alice", 0, false},
		{"corp", "", 0, false},
		{"corp", strings.Repeat("x", 65), 0, false},
		{"bad corp!", "alice", 0, false},
	} {
		if uid, ok := cold.Cached(tc.corp, tc.user); uid != tc.uid || ok != tc.ok {
			t.Errorf("Cached(%q, %q) = %d, %v; want %d, %v", tc.corp, tc.user, uid, ok, tc.uid, tc.ok)
		}
	}
	if q := testutil.ToFloat64(idmap.QueryCounter(cold, "lookup")); q != before {
		t.Errorf("Cached sent %v lookups; want none", q-before)
	}
}
