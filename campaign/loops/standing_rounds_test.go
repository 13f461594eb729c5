package loops

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// roundsEnroller is the tracker a joiner's round calls: the message, and
// the reminder sent through the fixture's sender.
type roundsEnroller struct {
	Enroller
	send *fakeSender
}

func (e roundsEnroller) GetMessage(_ context.Context, corps []string, msgID string) (yidu.Message, bool, error) {
	return yidu.Message{CorpID: corps[0], MsgID: msgID, Title: "员工手册"}, true, nil
}

func (e roundsEnroller) RemindBatch(ctx context.Context, m yidu.Message, taskID string, batch int, users []string) ([]string, error) {
	return e.send.RemindBatch(ctx, m, taskID, batch, users)
}

// TestStandingNoticeOwnRoundLeavesJoinersOut (issue 51): a standing
// notice with a follow-up policy, sent to 1, 2, 3 and 10; joiners 20
// and 21 enrolled half an hour after the send (both in the live
// recipients, 21 has read). The notice's own round 1, an hour after the
// send, reminds its unread first recipients only, not the joiner, whose
// round 1 is an hour after their own card; that round then reminds the
// joiner only, and the notice's rounds send nothing more.
func TestStandingNoticeOwnRoundLeavesJoinersOut(t *testing.T) {
	f := newFixture(t)
	f.notice("s", []uint32{1, 2, 3, 10, 20, 21}, yidu.Policy{Reminders: []string{"1h"}})
	f.live.markRead("s", 1, 21)
	joined := f.t0.Add(30 * time.Minute)
	for _, uid := range []uint32{20, 21} {
		_, err := f.rounds.DB.Exec(`INSERT INTO standing_enrolments (corp_id, msgid, uid, userid, version, batch, joined_at, deadline, sent_at, status)
			VALUES ('c', 's', ?, ?, 1, 1000000, ?, ?, ?, 'sent')`, uid, fmt.Sprintf("u%d", uid), joined, joined.AddDate(0, 0, 7), joined)
		testenv.Check(t, "enrolment", err)
	}
	standing := &StandingLoop{DB: f.rounds.DB, Tracker: roundsEnroller{send: f.send}, Reads: f.live,
		Log: slog.New(slog.DiscardHandler), Now: f.clock.Now, Owner: "a", TTL: time.Minute, MinGap: time.Second, Zone: f.rounds.Zone}
	both := func(at time.Duration) {
		t.Helper()
		f.tick(at)
		testenv.Check(t, "standing tick", standing.Tick(context.Background()))
	}

	both(time.Hour + time.Second)
	if got := f.send.batches["s@f1-0"]; !slices.Equal(got, []string{"u10", "u2", "u3"}) {
		t.Errorf("the notice's round 1 went to %v; want u10, u2, u3 (its unread first recipients, not joiner u20)", got)
	}
	if len(f.send.calls) != 1 {
		t.Errorf("sends an hour after the first send = %v; want the notice's round 1 only (the joiner's is an hour after their card)", f.send.calls)
	}

	both(90*time.Minute + time.Second)
	if got := f.send.batches["s@j20-1"]; !slices.Equal(got, []string{"u20"}) {
		t.Errorf("joiner 20's round 1 went to %v; want u20", got)
	}
	if len(f.send.calls) != 2 {
		t.Errorf("sends an hour after the joiners' cards = %v; want the joiner's round 1 added only (21 read)", f.send.calls)
	}
	if n := testenv.Column[int](t, f.rounds.DB, "SELECT COUNT(*) FROM follow_up_rounds WHERE msgid = 's'")[0]; n != 1 {
		t.Errorf("the notice's rounds = %d; want 1", n)
	}
	if s := testenv.Column[string](t, f.rounds.DB, "SELECT state FROM standing_rounds WHERE msgid = 's' AND uid = 21")[0]; s != "skipped" {
		t.Errorf("joiner 21's round 1 = %s; want skipped (read)", s)
	}
}
