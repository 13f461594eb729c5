package loops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/loop"
	"github.com/yidu-io/yidu/internal/testenv"
)

// fakeEnroller answers Enrolments; nothing else is called.
type fakeEnroller struct {
	Enroller
	es []yidu.Enrolment
}

func (f fakeEnroller) Enrolments(context.Context, string, string, time.Time, int) ([]yidu.Enrolment, error) {
	return f.es, nil
}

// fakeStandingDir answers Active: every uid but 3 (who left).
type fakeStandingDir struct{ StandingDirectory }

func (fakeStandingDir) Active(_ context.Context, _ string, uids []uint32) (map[uint32]yidu.User, error) {
	out := map[uint32]yidu.User{}
	for _, u := range uids {
		if u != 3 {
			out[u] = yidu.User{UID: u, UserID: fmt.Sprintf("u%d", u), Name: fmt.Sprintf("成员%d", u)}
		}
	}
	return out, nil
}

// fakeReads is a notice's live bitmaps.
type fakeReads struct{ rcpt, read *roaring.Bitmap }

func (f fakeReads) RecipientBitmap(context.Context, string, string) (*roaring.Bitmap, bool, error) {
	return f.rcpt, true, nil
}
func (f fakeReads) ReadBitmap(context.Context, string, string) (*roaring.Bitmap, bool, error) {
	return f.read, true, nil
}

// TestStandingInfoScope: the standing view counts and lists only the
// joiners within the caller's scope (a leader's people), a joiner who
// left is 已离职 and not pending, one past their deadline unread is
// overdue, the last 30 days only are listed, and by_cycle's live cycle
// counts within the scope.
func TestStandingInfoScope(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	testenv.Check(t, "save", SaveStanding(ctx, db, "c1", "m1", "hr", yidu.Audience{Departments: []int64{2}}, yidu.Standing{JoinDeadline: "7d"}, "hr", now.AddDate(0, -2, 0)))
	_, err := db.Exec("INSERT INTO standing_cycles (corp_id, msgid, cycle, version, started_at) VALUES ('c1', 'm1', 1, 1, ?)", now.AddDate(0, -2, 0))
	testenv.Check(t, "cycle", err)
	sent := now.Add(-time.Hour)
	e := func(uid uint32, joined time.Time) yidu.Enrolment {
		return yidu.Enrolment{UID: uid, UserID: fmt.Sprintf("u%d", uid), Version: 1, JoinedAt: joined, Deadline: joined.AddDate(0, 0, 7), SentAt: &sent, Status: "sent"}
	}
	l := &StandingLoop{DB: db, Now: func() time.Time { return now },
		Tracker:   fakeEnroller{es: []yidu.Enrolment{e(1, now.AddDate(0, 0, -40)), e(2, now.AddDate(0, 0, -10)), e(3, now.AddDate(0, 0, -2)), e(4, now.AddDate(0, 0, -1)), e(5, now.AddDate(0, 0, -1))}},
		Directory: fakeStandingDir{},
		Reads:     fakeReads{rcpt: roaring.BitmapOf(1, 2, 3, 4, 5, 10, 11), read: roaring.BitmapOf(4, 10)},
	}
	all, err := l.Info(ctx, "c1", "m1", nil)
	testenv.Check(t, "Info", err)
	// Pending: 1, 2, 5 (3 left, 4 read).
	if all.PendingJoiners != 3 || len(all.Joiners) != 4 || !all.InForce {
		t.Errorf("Info(everyone) = pending %d, %d joiners listed; want 3 pending, 4 of the last 30 days", all.PendingJoiners, len(all.Joiners))
	}
	byUser := map[string]Joiner{}
	for _, j := range all.Joiners {
		byUser[j.UserID] = j
	}
	if !byUser["u3"].Left || !byUser["u2"].Overdue || byUser["u5"].Overdue || !byUser["u4"].Read || byUser["u4"].Name != "成员4" {
		t.Errorf("joiners = %+v; want u3 left, u2 overdue, u5 not yet, u4 read", all.Joiners)
	}
	if len(all.ByCycle) != 1 || all.ByCycle[0].Recipients != 7 || all.ByCycle[0].Acknowledged != 2 {
		t.Errorf("by_cycle = %+v; want the live cycle 2 of 7", all.ByCycle)
	}
	leader, err := l.Info(ctx, "c1", "m1", roaring.BitmapOf(4, 5, 11))
	testenv.Check(t, "Info(leader)", err)
	if leader.PendingJoiners != 1 || len(leader.Joiners) != 2 || leader.ByCycle[0].Recipients != 3 || leader.ByCycle[0].Acknowledged != 1 {
		t.Errorf("Info(leader of 4, 5, 11) = pending %d, joiners %+v, by_cycle %+v; want 1 pending (u5), u4 and u5 listed, 1 of 3", leader.PendingJoiners, leader.Joiners, leader.ByCycle)
	}
	if _, err := l.Info(ctx, "c1", "other", nil); !errors.Is(err, ErrNotStanding) {
		t.Errorf("Info(not standing) = %v; want ErrNotStanding", err)
	}
}

// TestStandingUnreadableRowCounted: a standing_notices row whose spec
// does not decode is a failed notice of the loop: counted in
// yidu_loop_item_failures_total{loop="standing"} and backed off (the
// next tick does not count it again), and the tick goes on.
func TestStandingUnreadableRowCounted(t *testing.T) {
	db := testenv.MySQL(t)
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	_, err := db.Exec(`INSERT INTO messages (corp_id, msgid, app, agent_id, title, sent_at, recipient_count, audience_hash, state)
		VALUES ('c1', 'bad', 'hr', 1, '员工手册', ?, 1, '', 1)`, now)
	testenv.Check(t, "message", err)
	_, err = db.Exec(`INSERT INTO standing_notices (corp_id, msgid, app, audience, spec, created_at) VALUES ('c1', 'bad', 'hr', '{"departments":[2]}', '[]', ?)`, now)
	testenv.Check(t, "standing row", err)
	reg := prometheus.NewRegistry()
	g, err := loop.New("standing", loop.Options{Registerer: reg, Now: func() time.Time { return now }})
	testenv.Check(t, "guard", err)
	l := &StandingLoop{DB: db, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }, Owner: "a", TTL: time.Minute, Guard: g}
	failures := func() float64 {
		mfs, err := reg.Gather()
		testenv.Check(t, "gather", err)
		for _, mf := range mfs {
			if mf.GetName() == "yidu_loop_item_failures_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	for range 2 {
		testenv.Check(t, "Tick", l.Tick(context.Background()))
	}
	if got := failures(); got != 1 {
		t.Errorf("yidu_loop_item_failures_total{loop=\"standing\"} = %v; want 1 (the unreadable row, once: backed off)", got)
	}
	if !g.BackedOff("bad") {
		t.Errorf("the unreadable notice is not backed off")
	}
}
