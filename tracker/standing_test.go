package tracker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestEnrolOnce (issue 51): members who joined a standing notice's
// audience are enrolled once each however many replicas try at once, in
// one join batch; they become recipients (rows, recipient_count, the
// Redis bitmap) and a first recipient is never enrolled. The batch's card
// is sent once, task_id "<msgid>@1000000", and finishing it records each
// joiner's sent_at and audit row; a crash before the send leaves the
// batch to UnsentJoinBatches, which a later SendJoiners sends.
func TestEnrolOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const msg = "standing-enrol"
	res, err := e.reg.RegisterAndSend(ctx, e.sendRegistration(msg, 3))
	testenv.Check(t, "register", err)
	m := res.Message
	uids, err := e.ids.Assign(ctx, e.app.CorpID, []string{"new1", "new2"})
	testenv.Check(t, "assign", err)
	first, err := e.ids.Known(ctx, e.app.CorpID, []string{"u0000"})
	testenv.Check(t, "known", err)
	members := map[uint32]string{uids["new1"]: "new1", uids["new2"]: "new2", first["u0000"]: "u0000"}
	joined := time.Now().UTC().Truncate(time.Millisecond)
	deadline := joined.AddDate(0, 0, 7)

	var mu sync.Mutex
	var batches []int
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			n, got, err := e.reg.Enrol(ctx, m, members, 1, joined, deadline)
			if err != nil {
				t.Errorf("Enrol: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if n != 0 {
				batches = append(batches, n)
				if len(got) != 2 {
					t.Errorf("Enrol enrolled %v; want new1 and new2", got)
				}
			}
		})
	}
	wg.Wait()
	if len(batches) != 1 || batches[0] != JoinBatchBase {
		t.Fatalf("enrolling batches = %v; want one, %d", batches, JoinBatchBase)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM standing_enrolments WHERE corp_id = ? AND msgid = ?", e.app.CorpID, msg); n != 2 {
		t.Errorf("enrolments = %d; want 2 (u0000 was a first recipient)", n)
	}
	if got := e.rows(t, msg); len(got) != 5 {
		t.Errorf("recipient rows = %v; want 5", got)
	}
	if n := e.count(t, "SELECT recipient_count FROM messages WHERE corp_id = ? AND msgid = ?", e.app.CorpID, msg); n != 5 {
		t.Errorf("recipient_count = %d; want 5", n)
	}
	rec, _, err := e.store.RecipientBitmap(ctx, e.app.CorpID, msg)
	if err != nil || rec.GetCardinality() != 5 || !rec.Contains(uids["new1"]) {
		t.Errorf("Redis recipients = %v, %v; want 5 with new1", rec, err)
	}

	// Crashed before the send: the batch is left unsent, then sent once.
	unsent, err := e.reg.UnsentJoinBatches(ctx, e.app.CorpID, msg)
	if err != nil || len(unsent) != 1 || unsent[0] != JoinBatchBase {
		t.Fatalf("UnsentJoinBatches = %v, %v; want [%d]", unsent, err, JoinBatchBase)
	}
	before := len(sentCards(e.app.CorpID, msg))
	o, err := e.reg.SendJoiners(ctx, m, JoinBatchBase)
	if err != nil || o.Status != yidu.SendSent {
		t.Fatalf("SendJoiners = %+v, %v; want sent", o, err)
	}
	cards := sentCards(e.app.CorpID, msg)[before:]
	if len(cards) != 1 || taskID(cards[0]) != msg+"@1000000" || cards[0].Body["touser"] != "new1|new2" {
		t.Fatalf("join cards = %d (%v); want one to new1|new2, task_id %s@1000000", len(cards), cards, msg)
	}
	if _, err := e.reg.SendJoiners(ctx, m, JoinBatchBase); err != nil || len(sentCards(e.app.CorpID, msg))-before != 1 {
		t.Errorf("a second SendJoiners: %v, %d cards; want none more", err, len(sentCards(e.app.CorpID, msg))-before)
	}
	if unsent, _ := e.reg.UnsentJoinBatches(ctx, e.app.CorpID, msg); len(unsent) != 0 {
		t.Errorf("unsent after the send = %v; want none", unsent)
	}
	es, err := e.reg.Enrolments(ctx, e.app.CorpID, msg, time.Time{}, 0)
	if err != nil || len(es) != 2 || es[0].SentAt == nil || es[0].Status != "sent" || !es[0].JoinedAt.Equal(joined) || !es[0].Deadline.Equal(deadline) {
		t.Errorf("Enrolments = %+v, %v; want two, sent, joined and deadline kept", es, err)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM audit_events WHERE action = 'enrol' AND corp_id = ? AND msgid = ?", e.app.CorpID, msg); n != 2 {
		t.Errorf("enrol audit rows = %d; want 2", n)
	}
	// The first send's report leaves the joiners' batch out; a resumed
	// first send sends nothing more.
	outs, err := e.reg.SendOutcomes(ctx, e.app.CorpID, msg)
	if err != nil || len(outs) != 1 || outs[0].Batch != 0 {
		t.Errorf("SendOutcomes = %+v, %v; want the first send's batch 0 only", outs, err)
	}
	if rep, err := e.reg.Send(ctx, e.app, m); err != nil || rep.Batches != 0 || len(sentCards(e.app.CorpID, msg))-before != 1 {
		t.Errorf("resumed first send = %+v, %v; want nothing sent", rep, err)
	}
}

// TestSendJoinersRefused: a join batch WeCom refuses for good (82001:
// every UserID invalid) is recorded refused with its errcode, once; the
// next SendJoiners neither calls WeCom again nor fails.
func TestSendJoinersRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const msg = "standing-refused"
	res, err := e.reg.RegisterAndSend(ctx, e.sendRegistration(msg, 1))
	testenv.Check(t, "register", err)
	fake.SetCorp(fakewecom.Corp{CorpID: e.app.CorpID, Apps: []fakewecom.App{{AgentID: e.app.AgentID, Secret: e.secret}}, InvalidUsers: []string{"gone1"}})
	uids, err := e.ids.Assign(ctx, e.app.CorpID, []string{"gone1"})
	testenv.Check(t, "assign", err)
	n, _, err := e.reg.Enrol(ctx, res.Message, map[uint32]string{uids["gone1"]: "gone1"}, 0, time.Now(), time.Now().Add(time.Hour))
	testenv.Check(t, "enrol", err)
	if o, err := e.reg.SendJoiners(ctx, res.Message, n); err != nil || o.Status != yidu.SendRefused || o.ErrCode != 82001 {
		t.Fatalf("SendJoiners = %+v, %v; want refused 82001, no error", o, err)
	}
	_, err = e.reg.SendJoiners(ctx, res.Message, n)
	if calls := e.count(t, "SELECT COUNT(*) FROM message_sends WHERE corp_id = ? AND msgid = ? AND batch = ?", e.app.CorpID, msg, n); err != nil || calls != 1 {
		t.Errorf("second SendJoiners: %v, %d attempts recorded; want no second call", err, calls)
	}
	es, err := e.reg.Enrolments(ctx, e.app.CorpID, msg, time.Time{}, 0)
	if err != nil || len(es) != 1 || es[0].Status != "refused" || es[0].SentAt == nil {
		t.Errorf("Enrolments = %+v, %v; want one, refused, finished", es, err)
	}
	if unsent, _ := e.reg.UnsentJoinBatches(ctx, e.app.CorpID, msg); len(unsent) != 0 {
		t.Errorf("unsent = %v; want none (not tried every tick)", unsent)
	}
}

// TestResumedSendLeavesJoinersOut: a first send of 1,000 (one batch)
// replayed after Redis lost the notice, once a joiner was enrolled and
// sent their own card, sends nothing more: its batches are its first
// recipients', not a second batch holding the joiner.
func TestResumedSendLeavesJoinersOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const msg = "standing-resume"
	reg := e.sendRegistration(msg, 1000)
	res, err := e.reg.RegisterAndSend(ctx, reg)
	testenv.Check(t, "register", err)
	uids, err := e.ids.Assign(ctx, e.app.CorpID, []string{"late1"})
	testenv.Check(t, "assign", err)
	n, _, err := e.reg.Enrol(ctx, res.Message, map[uint32]string{uids["late1"]: "late1"}, 0, time.Now(), time.Now().Add(time.Hour))
	testenv.Check(t, "enrol", err)
	_, err = e.reg.SendJoiners(ctx, res.Message, n)
	testenv.Check(t, "send joiners", err)
	keys, err := e.rdb.Keys(ctx, e.prefix+"*").Result()
	testenv.Check(t, "keys", err)
	testenv.Check(t, "lose redis", e.rdb.Del(ctx, keys...).Err())
	before := len(sentCards(e.app.CorpID, msg))
	again, err := e.reg.RegisterAndSend(ctx, reg)
	testenv.Check(t, "replay", err)
	if got := len(sentCards(e.app.CorpID, msg)) - before; got != 0 || again.Send.Batches != 0 {
		t.Errorf("replayed first send: %d cards, report %+v; want none", got, again.Send)
	}
}
