package tracker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// markRead flips rows as flushd would.
func (e *env) markRead(tb testing.TB, msgID string, uid uint32, at time.Time) {
	tb.Helper()
	_, err := e.db.Exec("UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1"+
		" WHERE corp_id = ? AND msgid = ? AND uid = ?", at.UTC(), e.app.CorpID, msgID, uid)
	testenv.Check(tb, "mark read", err)
}

func TestLoadMessage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	m := e.register(t, "load-me", yidu.Audience{UserIDs: []string{"amy", "bo", "cy", "di"}})
	uids := e.rows(t, "load-me")
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	e.markRead(t, "load-me", uids[1], at)
	e.markRead(t, "load-me", uids[3], at)

	got, recipients, read, found, err := e.reg.LoadMessage(ctx, e.app.CorpID, "load-me")
	if err != nil || !found {
		t.Fatalf("LoadMessage = %v, %v", found, err)
	}
	if got != m {
		t.Errorf("message = %+v; want %+v", got, m)
	}
	if !slices.Equal(recipients.ToArray(), uids) {
		t.Errorf("recipients = %v; want %v", recipients.ToArray(), uids)
	}
	if want := []uint32{uids[1], uids[3]}; !slices.Equal(read.ToArray(), want) {
		t.Errorf("read = %v; want %v", read.ToArray(), want)
	}
	for _, id := range []string{"nope", "bad'id", ""} {
		if _, _, _, found, err := e.reg.LoadMessage(ctx, e.app.CorpID, id); found || err != nil {
			t.Errorf("LoadMessage(%q) = %v, %v; want not found", id, found, err)
		}
	}
	if _, _, _, found, _ := e.reg.LoadMessage(ctx, "othercorp", "load-me"); found {
		t.Error("LoadMessage found a message of another corp")
	}
}

// TestLoadReads: each signal's members come back from their first-time
// columns, apart from is_read (enter_agent without a read, a read by
// reconcile without a signal).
func TestLoadReads(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.register(t, "signals", yidu.Audience{UserIDs: []string{"amy", "bo", "cy", "di"}})
	uids := e.rows(t, "signals")
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	set := func(uid uint32, cols string, args ...any) {
		t.Helper()
		_, err := e.db.Exec("UPDATE message_read_record SET "+cols+" WHERE corp_id = ? AND msgid = 'signals' AND uid = ?",
			append(args, e.app.CorpID, uid)...)
		testenv.Check(t, "update", err)
	}
	set(uids[0], "enter_at = ?", at)                                                                // opened the app only
	set(uids[1], "is_read = 1, read_time = ?, source = 1, button_at = ?, enter_at = ?", at, at, at) // and pressed
	set(uids[2], "is_read = 1, read_time = ?, source = 3, link_at = ?", at.Add(time.Minute), at.Add(time.Minute))
	set(uids[3], "is_read = 1, read_time = ?, source = 4", at.Add(time.Hour)) // reconcile

	m, recipients, read, signals, found, err := e.reg.LoadReads(ctx, e.app.CorpID, "signals")
	if err != nil || !found || m.MsgID != "signals" {
		t.Fatalf("LoadReads = %+v, %v, %v", m, found, err)
	}
	if !slices.Equal(recipients.ToArray(), uids) {
		t.Errorf("recipients = %v; want %v", recipients.ToArray(), uids)
	}
	if want := uids[1:]; !slices.Equal(read.ToArray(), want) {
		t.Errorf("read = %v; want %v", read.ToArray(), want)
	}
	want := map[yidu.Signal][]uint32{
		yidu.SignalButton:     {uids[1]},
		yidu.SignalLink:       {uids[2]},
		yidu.SignalEnterAgent: {uids[0], uids[1]},
	}
	for sig, w := range want {
		if got := signals[sig].ToArray(); !slices.Equal(got, w) {
			t.Errorf("%s members = %v; want %v", sig, got, w)
		}
	}
	first, err := e.reg.FirstReads(ctx, e.app.CorpID, "signals", uids)
	testenv.Check(t, "FirstReads", err)
	wantFirst := map[uint32]yidu.FirstRead{
		uids[1]: {At: at, Signal: yidu.SignalButton},
		uids[2]: {At: at.Add(time.Minute), Signal: yidu.SignalLink},
		uids[3]: {At: at.Add(time.Hour)},
	}
	if len(first) != len(wantFirst) {
		t.Errorf("FirstReads = %v; want %v", first, wantFirst)
	}
	for uid, w := range wantFirst {
		if got := first[uid]; !got.At.Equal(w.At) || got.Signal != w.Signal {
			t.Errorf("FirstReads[%d] = %+v; want %+v", uid, got, w)
		}
	}
	if got := first[uids[3]].SignalName(); got != "reconcile" {
		t.Errorf("SignalName of a reconciled read = %q; want reconcile", got)
	}
}

func TestActiveMessages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, app := range []int64{e.app.AgentID, e.app.AgentID, 9, e.app.AgentID} {
		r := e.registration(fmt.Sprintf("act-%d", i), yidu.Audience{UserIDs: []string{"amy"}})
		r.App.AgentID = app
		r.SentAt = base.Add(time.Duration(i) * time.Hour)
		_, _, err := e.reg.Register(ctx, r)
		testenv.Check(t, "register", err)
	}
	_, err := e.db.Exec("UPDATE messages SET state = 0 WHERE msgid = 'act-3'")
	testenv.Check(t, "unfinish", err)
	msgs, err := e.reg.ActiveMessages(ctx, e.app.CorpID, e.app.AgentID, base.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].MsgID != "act-1" || !msgs[0].SentAt.Equal(base.Add(time.Hour)) {
		t.Errorf("ActiveMessages = %+v; want act-1 only", msgs)
	}
}

// TestRecipientOf: of the msgids asked, those the member received, in the
// order asked; another member's, another corp's and unknown msgids are not.
func TestRecipientOf(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.register(t, "rcp-1", yidu.Audience{UserIDs: []string{"amy", "bob"}})
	e.register(t, "rcp-2", yidu.Audience{UserIDs: []string{"bob"}})
	e.register(t, "rcp-3", yidu.Audience{UserIDs: []string{"amy"}})
	uids, err := e.ids.Assign(ctx, e.app.CorpID, []string{"amy", "bob"})
	testenv.Check(t, "assign", err)
	tests := []struct {
		name   string
		corp   string
		uid    uint32
		msgIDs []string
		want   []string
	}{
		{"amy", e.app.CorpID, uids["amy"], []string{"rcp-3", "rcp-2", "rcp-1", "nope"}, []string{"rcp-3", "rcp-1"}},
		{"bob", e.app.CorpID, uids["bob"], []string{"rcp-1", "rcp-2", "rcp-3"}, []string{"rcp-1", "rcp-2"}},
		{"another corp", "wwother", uids["amy"], []string{"rcp-1", "rcp-3"}, nil},
		{"nobody", e.app.CorpID, 999999, []string{"rcp-1"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.reg.RecipientOf(ctx, tt.corp, tt.uid, tt.msgIDs)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("RecipientOf(%s, %d, %v) = %v, %v; want %v", tt.corp, tt.uid, tt.msgIDs, got, err, tt.want)
			}
		})
	}
	// More msgids than one query takes.
	many := make([]string, 0, recipientChunk+5)
	for i := range recipientChunk + 4 {
		many = append(many, fmt.Sprintf("none-%d", i))
	}
	many = append(many, "rcp-1")
	if got, err := e.reg.RecipientOf(ctx, e.app.CorpID, uids["amy"], many); err != nil || !slices.Equal(got, []string{"rcp-1"}) {
		t.Errorf("RecipientOf over %d msgids = %v, %v; want [rcp-1]", len(many), got, err)
	}
}

func TestReadModel(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	other := e.app
	other.CorpID = testenv.RandomName("corp")
	var want []string // newest first
	for i := range 7 {
		r := e.registration(fmt.Sprintf("list-%d", i), yidu.Audience{UserIDs: []string{"amy", "bo"}})
		if i%3 == 1 {
			r.App = other
			r.App.Name = "ops"
			_, err := e.ids.Assign(ctx, other.CorpID, r.Audience.UserIDs)
			testenv.Check(t, "assign", err)
		}
		r.Title = []string{"Holiday policy 假期", "Attendance 100% done", "1000 items", "holiday rota"}[i%4]
		// Two messages share a send time: the cursor must still split them.
		r.SentAt = base.Add(time.Duration(min(i, 5)) * time.Minute)
		_, _, err := e.reg.Register(ctx, r)
		testenv.Check(t, "register", err)
		want = append([]string{r.MsgID}, want...)
	}
	// Same sent_at: msgid descending breaks the tie.
	want[0], want[1] = "list-6", "list-5"

	t.Run("paging", func(t *testing.T) {
		var got []string
		cur := ""
		for page := 0; ; page++ {
			msgs, next, err := e.reg.ListMessages(ctx, nil, cur, 3)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				got = append(got, m.MsgID)
			}
			if next == "" {
				break
			}
			if page > 5 {
				t.Fatal("paging does not end")
			}
			cur = next
		}
		if !slices.Equal(got, want) {
			t.Errorf("pages = %v; want %v", got, want)
		}
	})
	t.Run("search", func(t *testing.T) {
		// Titles by i: 0 4 Holiday policy, 1 5 Attendance 100%, 2 6 1000
		// items, 3 holiday rota; apps: 1 4 ops, the rest the test app.
		tests := []struct {
			name, title, app string
			want             []string
		}{
			{"title, any case", "HOLIDAY", "", []string{"list-4", "list-3", "list-0"}},
			{"chinese", "假期", "", []string{"list-4", "list-0"}},
			{"wildcards are literal", "100%", "", []string{"list-5", "list-1"}},
			{"underscore is literal", "_", "", nil},
			{"app", "", "ops", []string{"list-4", "list-1"}},
			{"title and app", "holiday", "ops", []string{"list-4"}},
			{"nothing", "no such notice", "", nil},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				var got []string
				cur := ""
				for page := 0; page < 5; page++ {
					msgs, next, err := e.reg.SearchMessages(ctx, nil, tt.title, tt.app, cur, 1)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range msgs {
						got = append(got, m.MsgID)
					}
					if cur = next; cur == "" {
						break
					}
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("SearchMessages(%q, %q) = %v; want %v", tt.title, tt.app, got, tt.want)
				}
			})
		}
	})
	t.Run("corp filter", func(t *testing.T) {
		msgs, next, err := e.reg.ListMessages(ctx, []string{other.CorpID}, "", 0)
		if err != nil || next != "" {
			t.Fatal(err, next)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.MsgID)
		}
		if !slices.Equal(got, []string{"list-4", "list-1"}) {
			t.Errorf("other corp = %v", got)
		}
		if msgs, _, _ := e.reg.ListMessages(ctx, []string{}, "", 0); len(msgs) != 0 {
			t.Errorf("no granted corp listed %d messages", len(msgs))
		}
	})
	t.Run("bad cursor", func(t *testing.T) {
		far := cursor{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), e.app.CorpID, "m"}.String()
		early := cursor{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), e.app.CorpID, "m"}.String()
		for _, c := range []string{"!!", "bm90IGEgY3Vyc29y", "MXwnOyBEUk9QfHg", far, early} {
			if _, _, err := e.reg.ListMessages(ctx, nil, c, 10); !errors.Is(err, yidu.ErrInvalid) {
				t.Errorf("ListMessages(cursor %q) = %v; want yidu.ErrInvalid", c, err)
			}
		}
	})
	t.Run("get", func(t *testing.T) {
		tests := []struct {
			corps []string
			msgID string
			found bool
		}{
			{nil, "list-1", true},
			{[]string{other.CorpID}, "list-1", true},
			{[]string{e.app.CorpID}, "list-1", false},
			{[]string{e.app.CorpID, other.CorpID}, "list-2", true},
			{[]string{}, "list-1", false},
			{nil, "missing", false},
			{nil, "x' OR '1'='1", false},
		}
		for _, tt := range tests {
			m, found, err := e.reg.GetMessage(ctx, tt.corps, tt.msgID)
			if err != nil || found != tt.found || found && m.MsgID != tt.msgID {
				t.Errorf("GetMessage(%v, %q) = %+v, %v, %v; want found %v", tt.corps, tt.msgID, m, found, err, tt.found)
			}
		}
	})
	t.Run("read times and per minute", func(t *testing.T) {
		r := e.registration("reads", yidu.Audience{UserIDs: []string{"amy", "bo", "cy", "di"}})
		_, _, err := e.reg.Register(ctx, r)
		testenv.Check(t, "register", err)
		uids := e.rows(t, "reads")
		times := []time.Time{base.Add(10 * time.Second), base.Add(50 * time.Second), base.Add(3*time.Minute + 5*time.Second)}
		for i, at := range times {
			e.markRead(t, "reads", uids[i], at)
		}
		got, err := e.reg.ReadTimes(ctx, e.app.CorpID, "reads", uids)
		if err != nil || len(got) != 3 {
			t.Fatalf("ReadTimes = %v, %v", got, err)
		}
		for i, at := range times {
			if !got[uids[i]].Equal(at) {
				t.Errorf("read time of %d = %v; want %v", uids[i], got[uids[i]], at)
			}
		}
		// The second read counted by its link, the third was re-emitted
		// by reconcile (source 4): in Reads, not by signal.
		for i, src := range map[int]int{1: 3, 2: 4} {
			_, err := e.db.Exec("UPDATE message_read_record SET source = ? WHERE corp_id = ? AND msgid = 'reads' AND uid = ?", src, e.app.CorpID, uids[i])
			testenv.Check(t, "set source", err)
		}
		pm, err := e.reg.ReadsPerMinute(ctx, e.app.CorpID, "reads")
		if err != nil {
			t.Fatal(err)
		}
		wantPM := []yidu.MinuteCount{{Minute: base, Reads: 2, BySignal: yidu.SignalCounts{Button: 1, Link: 1}}, {Minute: base.Add(3 * time.Minute), Reads: 1}}
		if !slices.Equal(pm, wantPM) {
			t.Errorf("ReadsPerMinute = %v; want %v", pm, wantPM)
		}
	})
}

// TestRepeatedRegistrationRestoresSignals: Redis lost a message's keys and
// the same registration comes again (a campaign send resumed, a client's
// retry): the tracker puts the message back from MySQL with each signal's
// members, so by_signal counts what MySQL holds. Before, it restored the
// recipients and readers only, and the keys being back kept every other
// reader's restore-on-miss from filling the signals in: by_signal stayed
// short of the reads until each member pressed again.
func TestRepeatedRegistrationRestoresSignals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reg := e.registration("lost", yidu.Audience{UserIDs: []string{"amy", "bo", "cy"}})
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	uids := e.rows(t, "lost")
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	_, err := e.db.Exec("UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1, button_at = ?, enter_at = ?"+
		" WHERE corp_id = ? AND msgid = 'lost' AND uid = ?", at, at, at, e.app.CorpID, uids[0])
	testenv.Check(t, "flushd's row", err)
	_, err = e.db.Exec("UPDATE message_read_record SET is_read = 1, read_time = ?, source = 3, link_at = ?"+
		" WHERE corp_id = ? AND msgid = 'lost' AND uid = ?", at, at, e.app.CorpID, uids[1])
	testenv.Check(t, "flushd's row", err)

	keys, err := e.rdb.Keys(ctx, e.prefix+"*").Result()
	testenv.Check(t, "keys", err)
	if len(keys) == 0 {
		t.Fatal("no keys to lose")
	}
	testenv.Check(t, "lose redis", e.rdb.Del(ctx, keys...).Err())

	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatalf("repeated Register: %v", err)
	}
	rec, read, by, found, err := e.store.CountsBySignal(ctx, e.app.CorpID, "lost")
	if err != nil || !found {
		t.Fatalf("CountsBySignal = found %v, %v", found, err)
	}
	want := yidu.SignalCounts{Button: 1, Link: 1, EnterAgent: 1}
	if rec != 3 || read != 2 || by != want {
		t.Errorf("after the restore: recipients %d, read %d, by_signal %v; want 3, 2, %v (MySQL's)", rec, read, by, want)
	}
}
