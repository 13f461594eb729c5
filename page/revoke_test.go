package page

import (
	"context"
	"net/http"
	"testing"
)

// TestSignInRacingRevoke: a sign-in answered from a copy of the directory
// that has not yet seen a member leave (idmap's roster, current to
// idmap.RosterCheck) must not leave them a session when their sessions
// were revoked: the revocation's mark sends the sign-in to the directory
// itself, and the session made from the copy is ended.
func TestSignInRacingRevoke(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sessions := NewSessions(f.rdb, f.prefix, 0)
	live := func() int {
		t.Helper()
		keys, err := f.rdb.Keys(ctx, f.prefix+"page:session:*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}

	// Before any revocation the copy is taken at its word: the window
	// the revocation's mark closes.
	old := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	if w := old.signIn(t, "/r/hr/perf", "eve"); w.Code != http.StatusFound {
		t.Fatalf("sign-in = %d %s", w.Code, w.Body)
	}
	if w := old.get(t, "/r/hr/perf"); w.Code != http.StatusOK {
		t.Fatalf("page before the revocation = %d", w.Code)
	}

	// Eve leaves: her session ends, and a sign-in from the stale copy
	// ends as the directory says, with one session (left) and not two.
	if err := sessions.Revoke(ctx, corp, []uint32{5}); err != nil {
		t.Fatal(err)
	}
	if n := live(); n != 0 {
		t.Fatalf("%d sessions after the revocation; want 0", n)
	}
	if w := old.get(t, "/r/hr/perf"); w.Code != http.StatusFound {
		t.Fatalf("the revoked session's page = %d; want 302 to sign in again", w.Code)
	}
	b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}, againAfterRevoke: 1}
	if w := b.signInCode(t, "/r/hr/perf", "code-eve~2"); w.Code != http.StatusFound {
		t.Fatalf("sign-in after leaving = %d %s", w.Code, w.Body)
	}
	if w := b.get(t, "/r/hr/perf"); w.Code != http.StatusNotFound {
		t.Fatalf("page of a member who left, signed in from a stale copy = %d; want 404", w.Code)
	}
	if n := live(); n != 1 {
		t.Fatalf("%d sessions; want 1 (the session made from the copy ended)", n)
	}

	// A member revoked who is back in the directory keeps the session
	// the directory gives them.
	if err := sessions.Revoke(ctx, corp, []uint32{6}); err != nil {
		t.Fatal(err)
	}
	back := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}, againAfterRevoke: 1}
	if w := back.signIn(t, "/r/hr/perf", "frank"); w.Code != http.StatusFound {
		t.Fatalf("sign-in = %d %s", w.Code, w.Body)
	}
	if w := back.get(t, "/r/hr/perf"); w.Code != http.StatusOK {
		t.Fatalf("page of a member back in the directory = %d; want 200", w.Code)
	}
	if n := live(); n != 2 {
		t.Fatalf("%d sessions; want 2", n)
	}
}
