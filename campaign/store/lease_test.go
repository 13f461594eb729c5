package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
)

// leaseRow is a notice_acts row as the lease left it.
type leaseRow struct {
	State    string
	Owner    sql.NullString
	Until    sql.NullTime
	Attempts int
}

func readLease(t *testing.T, db *sql.DB, msgID string) leaseRow {
	t.Helper()
	var r leaseRow
	err := db.QueryRowContext(context.Background(), `SELECT state, owner, lease_until, attempts FROM notice_acts WHERE corp_id = 'ww1' AND msgid = ?`,
		msgID).Scan(&r.State, &r.Owner, &r.Until, &r.Attempts)
	testenv.Check(t, "read notice_acts "+msgID, err)
	return r
}

const leaseWhere = "corp_id = ? AND msgid = ?"

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// TestLeaseClaim claims rows of notice_acts in each state a row can be
// in: a row is claimed from a state of from, or taken over when it is
// 'sending' and its lease ended at or before now; never otherwise.
func TestLeaseClaim(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	const ttl = 30 * time.Second
	b := store.Lease{Table: "notice_acts", Owner: "replica-b", TTL: ttl}
	tests := []struct {
		name      string
		state     string
		owner     any
		until     any
		now       time.Time
		wantOK    bool
		wantOwner string
	}{
		{"idle row", "idle", nil, nil, t0, true, "replica-b"},
		{"not a from state", "sent", nil, nil, t0, false, ""},
		{"held by another, lease running", "sending", "replica-a", t0.Add(time.Millisecond), t0, false, "replica-a"},
		{"held by another, lease ends now", "sending", "replica-a", t0, t0, true, "replica-b"},
		{"held by another, lease ended", "sending", "replica-a", t0.Add(-time.Minute), t0, true, "replica-b"},
		{"held by itself, lease running", "sending", "replica-b", t0.Add(time.Second), t0, false, "replica-b"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := "lease-" + string(rune('a'+i))
			exec(t, db, `INSERT INTO notice_acts (corp_id, msgid, state, owner, lease_until, attempts) VALUES ('ww1', ?, ?, ?, ?, 3)`,
				msg, tt.state, tt.owner, tt.until)
			before := readLease(t, db, msg)
			ok, err := b.Claim(ctx, db, tt.now, []yidu.NoticeState{"idle"}, "act = ?", leaseWhere, "remind", "ww1", msg)
			testenv.Check(t, "Claim", err)
			if ok != tt.wantOK {
				t.Fatalf("Claim = %v; want %v", ok, tt.wantOK)
			}
			got := readLease(t, db, msg)
			if !tt.wantOK {
				if got != before {
					t.Errorf("a lost claim wrote the row: %+v; was %+v", got, before)
				}
				return
			}
			want := leaseRow{State: "sending", Owner: sql.NullString{String: tt.wantOwner, Valid: true},
				Until: sql.NullTime{Time: tt.now.Add(ttl), Valid: true}, Attempts: 4}
			if got != want {
				t.Errorf("row after Claim = %+v; want %+v", got, want)
			}
			if act := testenv.Column[string](t, db, "SELECT act FROM notice_acts WHERE msgid = ?", msg); act[0] != "remind" {
				t.Errorf("act = %q; want the claim's set (remind)", act[0])
			}
		})
	}
}

// TestLeaseOwnerGuards: once another replica took the row over, the old
// owner's Renew, Finish and Release change nothing and say so; the new
// owner's do what they say.
func TestLeaseOwnerGuards(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	a := store.Lease{Table: "notice_acts", Owner: "replica-a", TTL: 10 * time.Second}
	b := store.Lease{Table: "notice_acts", Owner: "replica-b", TTL: 10 * time.Second}
	exec(t, db, `INSERT INTO notice_acts (corp_id, msgid, state) VALUES ('ww1', 'm1', 'idle')`)
	idle := []yidu.NoticeState{"idle"}
	claim := func(l store.Lease, at time.Time) bool {
		t.Helper()
		ok, err := l.Claim(ctx, db, at, idle, "", leaseWhere, "ww1", "m1")
		testenv.Check(t, "Claim", err)
		return ok
	}
	if !claim(a, t0) {
		t.Fatal("replica-a did not claim an idle row")
	}
	if claim(b, t0.Add(5*time.Second)) {
		t.Fatal("replica-b claimed a row whose lease runs")
	}
	// Renewed, a's lease lasts past the time it would have ended.
	if held, err := a.Renew(ctx, db, t0.Add(5*time.Second), leaseWhere, "ww1", "m1"); err != nil || !held {
		t.Fatalf("a.Renew = %v, %v; want held", held, err)
	}
	if held, err := a.Renew(ctx, db, t0.Add(5*time.Second), leaseWhere, "ww1", "m1"); err != nil || !held {
		t.Fatalf("a.Renew again in the same millisecond = %v, %v; want held", held, err)
	}
	if claim(b, t0.Add(10*time.Second)) {
		t.Fatal("replica-b took over a renewed lease")
	}
	if !claim(b, t0.Add(15*time.Second)) {
		t.Fatal("replica-b did not take over a lease that ended")
	}
	taken := readLease(t, db, "m1")
	if held, err := a.Renew(ctx, db, t0.Add(16*time.Second), leaseWhere, "ww1", "m1"); err != nil || held {
		t.Errorf("a.Renew after the takeover = %v, %v; want not held", held, err)
	}
	if done, err := a.Finish(ctx, db, "idle", "", leaseWhere, "ww1", "m1"); err != nil || done {
		t.Errorf("a.Finish after the takeover = %v, %v; want not done", done, err)
	}
	testenv.Check(t, "a.Release", a.Release(ctx, db, t0, leaseWhere, "ww1", "m1"))
	if got := readLease(t, db, "m1"); got != taken {
		t.Errorf("the old owner wrote the row: %+v; was %+v", got, taken)
	}
	// b releases at until: the row stays 'sending', and anyone claims it then.
	until := t0.Add(20 * time.Second)
	testenv.Check(t, "b.Release", b.Release(ctx, db, until, leaseWhere, "ww1", "m1"))
	if got := readLease(t, db, "m1"); got.State != "sending" || !got.Until.Time.Equal(until) {
		t.Errorf("after Release: %+v; want sending until %v", got, until)
	}
	if claim(a, until.Add(-time.Millisecond)) {
		t.Error("replica-a claimed before the released lease's end")
	}
	if !claim(a, until) {
		t.Fatal("replica-a did not claim at the released lease's end")
	}
	if done, err := a.Finish(ctx, db, "idle", "act = ?", leaseWhere, "done", "ww1", "m1"); err != nil || !done {
		t.Fatalf("a.Finish = %v, %v; want done", done, err)
	}
	want := leaseRow{State: "idle", Attempts: 3}
	if got := readLease(t, db, "m1"); got != want {
		t.Errorf("after Finish: %+v; want %+v", got, want)
	}
	if act := testenv.Column[string](t, db, "SELECT act FROM notice_acts WHERE msgid = 'm1'"); act[0] != "done" {
		t.Errorf("act = %q; want Finish's set (done)", act[0])
	}
}
