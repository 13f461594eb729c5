package progress_test

import (
	"context"
	"testing"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/progress"
	"github.com/yidu-io/yidu/tracker"
)

// TestRealRedisLoss: on the real tracker (MySQL) and bitmaps (Redis), a
// notice whose keys Redis lost is counted again from MySQL, each signal
// included (issue 37: by_signal must not undercount after the loss), the
// keys are back for the next reader, and the notice is found and
// located for a caller of its corp only.
func TestRealRedisLoss(t *testing.T) {
	ctx := context.Background()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	app := yidu.App{Name: "hr", CorpID: testenv.RandomName("corp"), AgentID: 1000002}
	ids, err := idmap.New(db, idmap.Options{})
	testenv.Check(t, "idmap.New", err)
	people := []string{"amy", "bo", "cy", "di"}
	for _, id := range people {
		testenv.Check(t, "create user", ids.ContactChanged(ctx, app.CorpID, idmap.ChangeCreateUser, id, "", []int64{1}))
	}
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix})
	testenv.Check(t, "bitmap.New", err)
	t.Cleanup(store.Close)
	reg, err := tracker.New(db, ids, store, tracker.Options{Apps: []yidu.App{app}})
	testenv.Check(t, "tracker.New", err)
	m, _, err := reg.Register(ctx, yidu.Registration{MsgID: "n1", App: app, Title: "t", Audience: yidu.Audience{UserIDs: people}})
	testenv.Check(t, "Register", err)
	uids, err := ids.Assign(ctx, app.CorpID, people)
	testenv.Check(t, "Assign", err)
	// bo pressed the button, cy opened the link, di opened the app only:
	// flushed to MySQL as flushd would.
	for _, u := range []struct {
		id, set string
	}{
		{"bo", "is_read = 1, source = 1, read_time = NOW(), button_at = NOW()"},
		{"cy", "is_read = 1, source = 3, read_time = NOW(), link_at = NOW()"},
		{"di", "enter_at = NOW()"},
	} {
		_, err := db.Exec("UPDATE message_read_record SET "+u.set+" WHERE corp_id = ? AND msgid = 'n1' AND uid = ?", app.CorpID, uids[u.id])
		testenv.Check(t, "flush "+u.id, err)
	}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	testenv.Check(t, "keys", err)
	if len(keys) == 0 {
		t.Fatal("registration wrote no Redis keys")
	}
	testenv.Check(t, "lose the keys", rdb.Del(ctx, keys...).Err())

	p, err := progress.New(reg, store, progress.Options{Directory: ids, History: reg})
	testenv.Check(t, "progress.New", err)
	want := progress.Counts{Recipients: 4, Read: 2, BySignal: yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 1}}
	for _, when := range []string{"after the loss", "from the restored keys"} {
		c, err := p.Counts(ctx, m, access.Everyone)
		if err != nil || c != want {
			t.Errorf("Counts %s = %+v, %v; want %+v", when, c, err, want)
		}
	}
	if _, _, _, found, err := store.CountsBySignal(ctx, app.CorpID, "n1"); err != nil || !found {
		t.Errorf("keys after the restore: found %v, %v; want back", found, err)
	}

	admin := access.NewPrincipal("a", access.KindToken, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: app.CorpID}}})
	stranger := access.NewPrincipal("s", access.KindToken, false, []access.Grant{{Role: yidu.RoleAdmin, Scope: yidu.Scope{Corp: "elsewhere"}}})
	if got, v, err := p.Find(ctx, admin, "n1"); err != nil || got.MsgID != "n1" || !v.All() {
		t.Errorf("Find by an admin of the corp = %+v, %v; want n1 seen whole", got, err)
	}
	if _, _, err := p.Find(ctx, stranger, "n1"); err == nil {
		t.Error("Find by an admin of another corp found n1; want ErrNotFound")
	}
	if _, ok, err := p.Locate(ctx, []string{"elsewhere"}, "n1"); err != nil || ok {
		t.Errorf("Locate within another corp = %v, %v; want none", ok, err)
	}
	if outs, err := p.Outcomes(ctx, m); err != nil || len(outs) != 0 {
		t.Errorf("Outcomes of a notice registered without sending = %v, %v; want none", outs, err)
	}
}
