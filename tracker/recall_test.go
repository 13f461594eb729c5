package tracker

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// wecomMsgIDs returns the msgids the fake answered for msgID's cards.
func wecomMsgIDs(corpID, msgID string) []string {
	var out []string
	for _, s := range sentCards(corpID, msgID) {
		out = append(out, s.MsgID)
	}
	return out
}

// recalledOf returns which of ids the fake recalled.
func recalledOf(ids []string) []string {
	var out []string
	for _, id := range fake.Recalled() {
		if slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestRecall(t *testing.T) {
	now := time.Now().UTC()
	e := newEnv(t, func(o *Options, _ *env) { o.Now = func() time.Time { return now } })
	ctx := context.Background()
	reg := e.sendRegistration("recall-1", 2500)
	m, _, err := e.reg.Register(ctx, reg)
	testenv.Check(t, "register", err)
	now = now.Add(time.Hour)
	if _, err := e.reg.Remind(ctx, m, userIDs(10)); err != nil {
		t.Fatal(err)
	}
	ids := wecomMsgIDs(e.app.CorpID, "recall-1")
	if len(ids) != 4 {
		t.Fatalf("cards = %d; want 3 batches and a reminder", len(ids))
	}

	now = now.Add(20 * time.Hour) // the first send is 21 h old: inside the window
	rep, err := e.reg.Recall(ctx, m, 7)
	if err != nil || rep.Recalled != 4 || len(rep.Failed) != 0 || !rep.RecalledAt.Equal(now.Truncate(time.Millisecond)) {
		t.Fatalf("Recall = %+v, %v; want 4 batches recalled now", rep, err)
	}
	if got := recalledOf(ids); !slices.Equal(got, ids) {
		t.Errorf("message/recall called with %v; want every batch's WeCom msgid %v", got, ids)
	}
	got, ok, err := e.reg.GetMessage(ctx, nil, "recall-1")
	if err != nil || !ok || !got.RecalledAt.Equal(rep.RecalledAt) || got.ReadAtRecall != 7 {
		t.Errorf("GetMessage after recall = %+v, %v, %v; want recalled with 7 reads frozen", got, ok, err)
	}
	outs, err := e.reg.SendOutcomes(ctx, e.app.CorpID, "recall-1")
	if err != nil || len(outs) != 3 || !outs[0].Recalled {
		t.Errorf("SendOutcomes = %+v, %v; want 3 recalled batches", outs, err)
	}

	// Idempotent: nothing is called again, the report says when.
	before := len(fake.Recalled())
	rep, err = e.reg.Recall(ctx, got, 99)
	if err != nil || rep.Already != 4 || rep.Recalled != 0 || !rep.RecalledAt.Equal(got.RecalledAt) || len(fake.Recalled()) != before {
		t.Errorf("second Recall = %+v, %v; want the first recall's report, no call", rep, err)
	}
	if _, err := e.reg.Remind(ctx, got, userIDs(3)); !errors.Is(err, yidu.ErrRecalled) {
		t.Errorf("Remind after recall = %v; want ErrRecalled", err)
	}
	if _, err := e.reg.Send(ctx, e.app, got); !errors.Is(err, yidu.ErrRecalled) {
		t.Errorf("Send after recall = %v; want ErrRecalled", err)
	}
}

func TestRecallRefused(t *testing.T) {
	ctx := context.Background()
	t.Run("past the 24 h window: nothing recalled", func(t *testing.T) {
		now := time.Now().UTC()
		e := newEnv(t, func(o *Options, _ *env) { o.Now = func() time.Time { return now } })
		reg := e.sendRegistration("recall-late", 3)
		m, _, err := e.reg.Register(ctx, reg)
		testenv.Check(t, "register", err)
		now = now.Add(RecallWindow)
		before := len(fake.Recalled())
		_, err = e.reg.Recall(ctx, m, 0)
		if !errors.Is(err, yidu.ErrNotRecallable) || !strings.Contains(err.Error(), "24 hours") {
			t.Errorf("Recall = %v; want ErrNotRecallable explaining the 24 h window", err)
		}
		if len(fake.Recalled()) != before {
			t.Error("message/recall was called")
		}
		if got, _, _ := e.reg.GetMessage(ctx, nil, "recall-late"); got.Recalled() {
			t.Error("message marked recalled")
		}
	})
	t.Run("never sent through yidu", func(t *testing.T) {
		e := newEnv(t)
		m := e.register(t, "recall-unsent", yidu.Audience{UserIDs: userIDs(3)})
		if _, err := e.reg.Recall(ctx, m, 0); !errors.Is(err, yidu.ErrNotRecallable) {
			t.Errorf("Recall = %v; want ErrNotRecallable", err)
		}
	})
	t.Run("WeCom refuses one batch: the rest stays recalled, recalling again finishes", func(t *testing.T) {
		e := newEnv(t)
		reg := e.sendRegistration("recall-part", 1500)
		m, _, err := e.reg.Register(ctx, reg)
		testenv.Check(t, "register", err)
		ids := wecomMsgIDs(e.app.CorpID, "recall-part")
		fake.FailNext("/cgi-bin/message/recall", fakewecom.ErrCannotRecall, 1)
		rep, err := e.reg.Recall(ctx, m, 3)
		if !errors.Is(err, yidu.ErrRecallIncomplete) || rep.Recalled != 1 || len(rep.Failed) != 1 || rep.Failed[0].ErrCode != fakewecom.ErrCannotRecall {
			t.Fatalf("Recall = %+v, %v; want one recalled, one refused with its errcode", rep, err)
		}
		if got, _, _ := e.reg.GetMessage(ctx, nil, "recall-part"); got.Recalled() {
			t.Error("message marked recalled with a batch left")
		}
		rep, err = e.reg.Recall(ctx, m, 3)
		if err != nil || rep.Recalled != 1 || rep.Already != 1 {
			t.Fatalf("second Recall = %+v, %v; want the refused batch recalled", rep, err)
		}
		if got := recalledOf(ids); len(got) != 2 {
			t.Errorf("recalled %v; want both of %v", got, ids)
		}
	})
	t.Run("outcome unknown: no msgid to recall", func(t *testing.T) {
		e := newEnv(t)
		m := e.register(t, "recall-unknown", yidu.Audience{UserIDs: userIDs(3)})
		_, err := e.db.Exec("INSERT INTO message_sends (corp_id, msgid, kind, batch, status, sent_at, users, resent) VALUES (?, ?, 'send', 0, 'unknown', ?, 3, 1)",
			e.app.CorpID, "recall-unknown", time.Now().UTC().Truncate(time.Millisecond))
		testenv.Check(t, "insert", err)
		if _, err := e.reg.Recall(ctx, m, 0); !errors.Is(err, yidu.ErrNotRecallable) || !strings.Contains(err.Error(), "no msgid") {
			t.Errorf("Recall = %v; want ErrNotRecallable saying WeCom gave no msgid", err)
		}
	})
}
