package access

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
	"golang.org/x/crypto/bcrypt"
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// TestDummyHashCost: an unknown name is compared against a hash of the
// users' cost, so it takes as long as a wrong password.
func TestDummyHashCost(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost+1)
	testenv.Check(t, "hash", err)
	ids, err := NewIdentities(IdentityOptions{Users: []User{{Name: "alice", PasswordHash: string(h), Corps: []string{"acme"}}}})
	testenv.Check(t, "NewIdentities", err)
	hc, _ := bcrypt.Cost(ids.users["alice"].hash)
	if dc, err := bcrypt.Cost(ids.dummyHash); err != nil || dc != hc {
		t.Errorf("dummy hash cost = %d (%v); want the users' %d", dc, err, hc)
	}
}

// TestBuckets: a bucket refills at its rate up to its burst and takes a
// token back; a full set drops idle buckets first, and when none is idle a
// new name starts empty (fail closed) while a new address starts full.
func TestBuckets(t *testing.T) {
	r := bucketRule{burst: 2, every: time.Second}
	var b bucket
	b.tokens, b.at = 2, t0
	for i, want := range []bool{true, true, false} {
		if got := b.take(r, t0); got != want {
			t.Fatalf("take %d of a burst of 2 = %v; want %v", i+1, got, want)
		}
	}
	if b.take(r, t0.Add(999*time.Millisecond)) || !b.take(r, t0.Add(2*time.Second)) {
		t.Error("refill: want a token after 1 s, not before")
	}
	b.give(r)
	b.give(r)
	b.give(r)
	if got := b.level(r, t0.Add(2*time.Second)); got != 2 {
		t.Errorf("give beyond the burst: level %v; want 2", got)
	}
	for _, failOpen := range []bool{true, false} {
		bs := newBuckets(r, failOpen)
		for i := range maxLimiters {
			bs.get(strconv.Itoa(i), t0).take(r, t0)
		}
		if got := bs.get("new", t0).level(r, t0); (got == r.burst) != failOpen || len(bs.m) > maxLimiters {
			t.Errorf("failOpen %v, full of busy buckets: new key level %v, %d kept; want burst only when failing open, ≤ %d", failOpen, got, len(bs.m), maxLimiters)
		}
		later := t0.Add(time.Minute) // every bucket idle again
		if got := bs.get("newer", later).level(r, later); got != r.burst || len(bs.m) != 1 {
			t.Errorf("failOpen %v, full of idle buckets: new key level %v, %d kept; want burst, the idle ones dropped", failOpen, got, len(bs.m))
		}
	}
}

// TestNoGrantsNoRole: a configured token or user without corps or a
// role is a principal of no corp (there is no fallback that makes a
// principal without grants an admin), and each kind keeps its own key.
func TestNoGrantsNoRole(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	testenv.Check(t, "hash", err)
	ids, err := NewIdentities(IdentityOptions{
		Tokens: []Token{{Name: "bare", Token: "0123456789abcdef-bare"}, {Name: "all", Token: "0123456789abcdef-all", Corps: []string{"*"}}},
		Users:  []User{{Name: "bob", PasswordHash: string(h)}},
	})
	testenv.Check(t, "NewIdentities", err)
	bare, ok := ids.Bearer("0123456789abcdef-bare")
	if !ok {
		t.Fatal("bare token not found")
	}
	if c := bare.Corps(); c == nil || len(c) != 0 || bare.Admin("acme") || bare.MaySend("acme", "hr") || bare.Role("acme") != "" {
		t.Errorf("token without grants: corps %v, admin %v, may send %v; want none of any corp", c, bare.Admin("acme"), bare.MaySend("acme", "hr"))
	}
	all, _ := ids.Bearer("0123456789abcdef-all")
	if all.Corps() != nil || !all.Admin("acme") {
		t.Errorf(`token of "*": corps %v, admin %v; want every corp`, all.Corps(), all.Admin("acme"))
	}
	if _, ok := ids.Bearer("0123456789abcdef-none"); ok {
		t.Error("an unknown token was accepted")
	}
	at, err := ids.SignIn(context.Background(), "192.0.2.1", "bob", "pw")
	s := at.Session
	testenv.Check(t, "SignIn", err)
	if s.Principal.Admin("acme") || s.Principal.Key() != "user:bob" || bare.Key() != "token:bare" {
		t.Errorf("bob: admin %v, key %q; bare's key %q", s.Principal.Admin("acme"), s.Principal.Key(), bare.Key())
	}
	if _, err := ids.SignIn(context.Background(), "192.0.2.1", "bob", "wrong"); !errors.Is(err, ErrBadPassword) {
		t.Errorf("wrong password: %v; want ErrBadPassword", err)
	}
}
