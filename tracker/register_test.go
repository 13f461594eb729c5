package tracker

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// seedDirectory builds the tree 1 ─┬─ 2 ── 3      5 (second root)
//
//	└─ 4
//
// with alice(3) bob(2) carol(4) dave(5) erin(1) and frank(2), who left.
func seedDirectory(t *testing.T, e *env) map[string]uint32 {
	t.Helper()
	e.departments(t, map[int64]int64{1: 0, 2: 1, 3: 2, 4: 1, 5: 0})
	uids := e.users(t, map[string][]int64{
		"alice": {3}, "bob": {2}, "carol": {4}, "dave": {5}, "erin": {1}, "frank": {2},
	})
	testenv.Check(t, "delete frank", e.ids.ContactChanged(context.Background(), e.app.CorpID, idmap.ChangeDeleteUser, "frank", "", nil))
	return uids
}

func TestRegisterAudiences(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	u := seedDirectory(t, e)
	tests := []struct {
		name    string
		au      yidu.Audience
		want    []string // userids; "zed" is unknown to the directory
		unknown []string
	}{
		{"userids with duplicates and an unknown id", yidu.Audience{UserIDs: []string{"bob", "zed", "alice", "bob"}}, []string{"alice", "bob"}, []string{"zed"}},
		{"userids in another case", yidu.Audience{UserIDs: []string{"BOB", "Alice"}}, []string{"alice", "bob"}, nil},
		{"department subtree", yidu.Audience{Departments: []int64{2}}, []string{"alice", "bob"}, nil},
		{"root department recursive", yidu.Audience{Departments: []int64{1}}, []string{"alice", "bob", "carol", "erin"}, nil},
		// zed was never made a member by the first case.
		{"all active members", yidu.Audience{All: true}, []string{"alice", "bob", "carol", "dave", "erin"}, nil},
		{"union of departments and userids", yidu.Audience{Departments: []int64{5}, UserIDs: []string{"carol", "ghost"}}, []string{"carol", "dave"}, []string{"ghost"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgID := fmt.Sprintf("aud-%d", i)
			res, err := e.reg.RegisterAndSend(ctx, e.rawRegistration(msgID, tt.au))
			m, created := res.Message, res.Created
			if err != nil || !created {
				t.Fatalf("Register = %v, created %v; want created", err, created)
			}
			if !slices.Equal(res.UnknownUserIDs, tt.unknown) {
				t.Errorf("UnknownUserIDs = %q; want %q", res.UnknownUserIDs, tt.unknown)
			}
			var want []uint32
			for _, id := range tt.want {
				uid, ok := u[id]
				if !ok {
					t.Fatalf("no uid for %s", id)
				}
				want = append(want, uid)
			}
			slices.Sort(want)
			if got := e.rows(t, msgID); !slices.Equal(got, want) {
				t.Errorf("rows = %v; want %v", got, want)
			}
			if m.Recipients != int64(len(want)) || m.MsgID != msgID || m.CorpID != e.app.CorpID || m.AgentID != e.app.AgentID {
				t.Errorf("message = %+v; want %d recipients", m, len(want))
			}
			if n := e.count(t, "SELECT COUNT(*) FROM messages WHERE corp_id = ? AND msgid = ? AND state = 1 AND recipient_count = ?",
				e.app.CorpID, msgID, len(want)); n != 1 {
				t.Errorf("active messages rows with recipient_count %d = %d; want 1", len(want), n)
			}
			if n := e.count(t, "SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND (is_read <> 0 OR read_time IS NOT NULL OR source <> 0)",
				e.app.CorpID, msgID); n != 0 {
				t.Errorf("%d rows are not fresh unread rows", n)
			}
			rb, found, err := e.store.RecipientBitmap(ctx, e.app.CorpID, msgID)
			if err != nil || !found || !slices.Equal(rb.ToArray(), want) {
				t.Errorf("redis recipients = %v, %v, %v; want %v", rb, found, err, want)
			}
			meta, found, err := e.store.MessageMeta(ctx, e.app.CorpID, msgID)
			if err != nil || !found || meta.Title != m.Title || meta.Recipients != int64(len(want)) {
				t.Errorf("redis meta = %+v, %v, %v", meta, found, err)
			}
		})
	}
}

func TestRegisterGeneratesMsgID(t *testing.T) {
	e := newEnv(t)
	m, created, err := e.reg.Register(context.Background(), e.registration("", yidu.Audience{UserIDs: []string{"amy"}}))
	if err != nil || !created {
		t.Fatalf("Register = %v, %v", err, created)
	}
	if !regexp.MustCompile(`^[0-9A-Za-z_-]{20}$`).MatchString(m.MsgID) {
		t.Errorf("generated msgid %q; want 20 chars of [0-9A-Za-z_-]", m.MsgID)
	}
	if m.SentAt.IsZero() || time.Since(m.SentAt) > time.Minute {
		t.Errorf("SentAt = %v; want now", m.SentAt)
	}
}

func TestRegisterIdempotentAndConflict(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reg := e.registration("notice-1", yidu.Audience{UserIDs: []string{"amy", "bo", "cy"}})
	first, created, err := e.reg.Register(ctx, reg)
	if err != nil || !created {
		t.Fatalf("first Register = %v, %v", err, created)
	}
	// Same audience in another order, with a duplicate and another send time.
	again := reg
	again.Audience = yidu.Audience{UserIDs: []string{"cy", "amy", "bo", "amy"}}
	again.SentAt = first.SentAt.Add(time.Hour)
	m, created, err := e.reg.Register(ctx, again)
	if err != nil || created || m != first {
		t.Fatalf("second Register = %+v, %v, %v; want the first message, not created", m, created, err)
	}
	if n := len(e.rows(t, "notice-1")); n != 3 {
		t.Errorf("rows after re-registration = %d; want 3", n)
	}

	conflicts := map[string]func(*yidu.Registration){
		"audience": func(r *yidu.Registration) { r.Audience = yidu.Audience{UserIDs: []string{"amy", "bo"}} },
		"all":      func(r *yidu.Registration) { r.Audience.All = true },
		"title":    func(r *yidu.Registration) { r.Title = "another title" },
		"app":      func(r *yidu.Registration) { r.App.Name = "finance" },
		"agent":    func(r *yidu.Registration) { r.App.AgentID = 7 },
	}
	for name, change := range conflicts {
		t.Run(name, func(t *testing.T) {
			r := reg
			change(&r)
			if _, _, err := e.reg.Register(ctx, r); !errors.Is(err, yidu.ErrConflict) {
				t.Errorf("Register with another %s = %v; want yidu.ErrConflict", name, err)
			}
		})
	}
	if got := testutil.ToFloat64(e.reg.met.registrations.WithLabelValues("conflict")); got != float64(len(conflicts)) {
		t.Errorf("conflict metric = %v; want %d", got, len(conflicts))
	}
}

// TestRegisterMsgIDAcrossCorps: a msgid names one message in the whole
// deployment, so a principal seeing several corps never gets the wrong
// corp's message for it (issue: a corp can shadow another's message).
func TestRegisterMsgIDAcrossCorps(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.register(t, "shared", yidu.Audience{UserIDs: []string{"amy"}})
	other := e.registration("shared", yidu.Audience{UserIDs: []string{"amy"}})
	other.App.CorpID = testenv.RandomName("corp")
	_, err := e.ids.Assign(ctx, other.App.CorpID, []string{"amy"})
	testenv.Check(t, "assign", err)
	if _, _, err := e.reg.Register(ctx, other); !errors.Is(err, yidu.ErrConflict) {
		t.Fatalf("another corp's Register(shared) = %v; want yidu.ErrConflict", err)
	}
	m, ok, err := e.reg.GetMessage(ctx, nil, "shared")
	if err != nil || !ok || m.CorpID != e.app.CorpID {
		t.Errorf("GetMessage(all corps, shared) = %+v, %v, %v; want the first corp's", m, ok, err)
	}
	var n int
	testenv.Check(t, "count", e.db.QueryRow("SELECT COUNT(*) FROM messages WHERE msgid = 'shared'").Scan(&n))
	if n != 1 {
		t.Errorf("messages named shared = %d; want 1", n)
	}
}

func TestRegisterInvalid(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ok := yidu.Audience{UserIDs: []string{"amy"}}
	tooMany := make([]string, yidu.MaxUserIDs+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("u%d", i)
	}
	tests := []struct {
		name   string
		change func(*yidu.Registration)
	}{
		{"quote", func(r *yidu.Registration) { r.MsgID = `abc'; DROP TABLE messages; --` }},
		{"double quote", func(r *yidu.Registration) { r.MsgID = `a"b` }},
		{"percent", func(r *yidu.Registration) { r.MsgID = "100%" }},
		{"sql wildcard", func(r *yidu.Registration) { r.MsgID = "a_%" }},
		{"html", func(r *yidu.Registration) { r.MsgID = "<script>alert(1)</script>" }},
		{"at sign (batch suffix)", func(r *yidu.Registration) { r.MsgID = "abc@1" }},
		{"space", func(r *yidu.Registration) { r.MsgID = "a b" }},
		{"unicode", func(r *yidu.Registration) { r.MsgID = "通知" }},
		{"101 chars", func(r *yidu.Registration) { r.MsgID = strings.Repeat("a", 101) }},
		{"empty title", func(r *yidu.Registration) { r.Title = "" }},
		{"control in title", func(r *yidu.Registration) { r.Title = "a\x00b" }},
		{"long title", func(r *yidu.Registration) { r.Title = strings.Repeat("通", yidu.MaxTitle+1) }},
		{"empty audience", func(r *yidu.Registration) { r.Audience = yidu.Audience{} }},
		{"bad userid", func(r *yidu.Registration) { r.Audience = yidu.Audience{UserIDs: []string{"amy", "x' OR 1=1"}} }},
		{"userid starting with dot", func(r *yidu.Registration) { r.Audience = yidu.Audience{UserIDs: []string{".amy"}} }},
		{"negative department", func(r *yidu.Registration) { r.Audience = yidu.Audience{Departments: []int64{-1}} }},
		{"too many userids", func(r *yidu.Registration) { r.Audience = yidu.Audience{UserIDs: tooMany} }},
		{"unknown department (no members)", func(r *yidu.Registration) { r.Audience = yidu.Audience{Departments: []int64{999}} }},
		{"bad corp", func(r *yidu.Registration) { r.App.CorpID = "ww'1" }},
		{"no agent", func(r *yidu.Registration) { r.App.AgentID = 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.registration("valid-id", ok)
			tt.change(&r)
			if _, _, err := e.reg.Register(ctx, r); !errors.Is(err, yidu.ErrInvalid) {
				t.Errorf("Register = %v; want yidu.ErrInvalid", err)
			}
		})
	}
	for _, table := range []string{"messages", "message_read_record", "message_sends"} {
		if n := e.count(t, "SELECT COUNT(*) FROM "+table); n != 0 {
			t.Errorf("%s has %d rows after invalid registrations; want 0", table, n)
		}
	}
}

func TestRegisterCompletesAfterRedisFailure(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	broken := mustNew(t, e.db, e.ids, failingStore{e.store}, Options{Registerer: prometheus.NewRegistry()})
	reg := e.registration("half-done", yidu.Audience{UserIDs: []string{"amy", "bo", "cy"}})
	if _, _, err := broken.Register(ctx, reg); !errors.Is(err, errRedisDown) {
		t.Fatalf("Register with Redis down = %v; want the Redis error", err)
	}
	// MySQL is complete, Redis has nothing.
	if n := e.count(t, "SELECT COUNT(*) FROM messages WHERE msgid = 'half-done' AND state = 1"); n != 1 {
		t.Fatalf("active messages = %d; want 1 (MySQL written first)", n)
	}
	if _, found, _ := e.store.MessageMeta(ctx, e.app.CorpID, "half-done"); found {
		t.Fatal("Redis has the message although PutMessage failed")
	}
	m, created, err := e.reg.Register(ctx, reg)
	if err != nil || created || m.Recipients != 3 {
		t.Fatalf("repeated Register = %+v, %v, %v; want the existing message", m, created, err)
	}
	rb, found, err := e.store.RecipientBitmap(ctx, e.app.CorpID, "half-done")
	if err != nil || !found || !slices.Equal(rb.ToArray(), e.rows(t, "half-done")) {
		t.Errorf("redis recipients = %v, %v, %v; want the MySQL rows", rb, found, err)
	}
}

func TestRegisterResumesInterruptedRows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reg := e.registration("cut-short", yidu.Audience{UserIDs: []string{"amy", "bo", "cy", "di"}})
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	want := e.rows(t, "cut-short")
	// Make it look like the process died after writing two rows: state 0
	// and nothing in Redis.
	for _, q := range []string{
		"UPDATE messages SET state = 0 WHERE msgid = 'cut-short'",
		"DELETE FROM message_read_record WHERE msgid = 'cut-short' ORDER BY uid LIMIT 2",
	} {
		_, err := e.db.Exec(q)
		testenv.Check(t, q, err)
	}
	if _, _, _, found, err := e.reg.LoadMessage(ctx, e.app.CorpID, "cut-short"); found || err != nil {
		t.Fatalf("LoadMessage of a registering message = %v, %v; want not found", found, err)
	}
	m, created, err := e.reg.Register(ctx, reg)
	if err != nil || created || m.Recipients != 4 {
		t.Fatalf("resumed Register = %+v, %v, %v", m, created, err)
	}
	if got := e.rows(t, "cut-short"); !slices.Equal(got, want) {
		t.Errorf("rows = %v; want %v", got, want)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM messages WHERE msgid = 'cut-short' AND state = 1"); n != 1 {
		t.Errorf("message not active after resume")
	}
}

// seed100k creates 100,000 active members (idmap.Assign, batched).
func seed100k(tb testing.TB, e *env) {
	tb.Helper()
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%06d", i)
	}
	if _, err := e.ids.Assign(context.Background(), e.app.CorpID, ids); err != nil {
		tb.Fatal(err)
	}
}

func TestRegister100k(t *testing.T) {
	if testing.Short() {
		t.Skip("100k rows")
	}
	e := newEnv(t)
	seed100k(t, e)
	start := time.Now()
	m, created, err := e.reg.Register(context.Background(), e.registration("big", yidu.Audience{All: true}))
	took := time.Since(start)
	if err != nil || !created || m.Recipients != 100_000 {
		t.Fatalf("Register = %+v, %v, %v", m, created, err)
	}
	t.Logf("registered 100,000 recipients in %v", took)
	if n := testutil.ToFloat64(e.reg.met.insertStatements); n > 20 {
		t.Errorf("INSERT statements = %v; want ≤ 20 (5000 rows each)", n)
	}
	if n := e.count(t, "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'big'"); n != 100_000 {
		t.Errorf("rows = %d; want 100000", n)
	}
	if recipients, _, found, err := e.store.Counts(context.Background(), e.app.CorpID, "big"); err != nil || !found || recipients != 100_000 {
		t.Errorf("redis recipients = %d, %v, %v; want 100000", recipients, found, err)
	}
}

func BenchmarkRegister100k(b *testing.B) {
	e := newEnv(b)
	seed100k(b, e)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		i++
		if _, _, err := e.reg.Register(ctx, e.registration(fmt.Sprintf("bench-%d", i), yidu.Audience{All: true})); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(testutil.ToFloat64(e.reg.met.insertStatements)/float64(i), "inserts/op")
}

func TestRegisterAppliesOrphans(t *testing.T) {
	var db *sql.DB
	var applied int
	e := newEnv(t, func(o *Options, e *env) {
		db = e.db
		o.OrphanApplier = orphanFunc(func(ctx context.Context, corpID, msgID string) (int, error) {
			n, err := flushd.ApplyOrphans(ctx, db, corpID, msgID)
			applied += n
			return n, err
		})
	})
	ctx := context.Background()
	uids, err := e.ids.Assign(ctx, e.app.CorpID, []string{"amy", "bo"})
	testenv.Check(t, "assign", err)
	// A read of bo arrived before the message's rows existed.
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	_, err = e.db.Exec("INSERT INTO read_orphans (corp_id, msgid, uid, read_time, source) VALUES (?, 'early', ?, ?, 1)",
		e.app.CorpID, uids["bo"], at)
	testenv.Check(t, "park orphan", err)
	e.register(t, "early", yidu.Audience{UserIDs: []string{"amy", "bo"}})
	times, err := e.reg.ReadTimes(ctx, e.app.CorpID, "early", []uint32{uids["amy"], uids["bo"]})
	if err != nil || len(times) != 1 || !times[uids["bo"]].Equal(at) || applied != 1 {
		t.Errorf("read times after registration = %v, %v (applied %d); want bo read at %v", times, err, applied, at)
	}
}

// TestRegisterReadRule: a message's read rule is kept (messages.read_rule)
// and comes back from MySQL with it; a message without one has the app's.
func TestRegisterReadRule(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	reg := e.registration("ack-1", yidu.Audience{UserIDs: []string{"amy"}})
	reg.ReadRule = yidu.ReadRuleAcknowledged
	if _, _, err := e.reg.Register(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.reg.Register(ctx, e.registration("app-1", yidu.Audience{UserIDs: []string{"amy"}})); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]yidu.ReadRule{"ack-1": yidu.ReadRuleAcknowledged, "app-1": ""} {
		m, _, _, _, found, err := e.reg.LoadReads(ctx, reg.App.CorpID, id)
		if err != nil || !found || m.ReadRule != want {
			t.Errorf("LoadReads(%s).ReadRule = %q, %v, %v; want %q", id, m.ReadRule, found, err, want)
		}
	}
	if got, _ := e.rdb.HGet(ctx, e.prefix+":m:{"+reg.App.CorpID+"/ack-1}:meta", "rule").Result(); got != "6" {
		t.Errorf("Redis meta rule = %q; want 6", got)
	}
}

// TestRegisterRetention: a notice's own retention is kept in
// messages.retention (issue 40); none is NULL (its app's default).
func TestRegisterRetention(t *testing.T) {
	e := newEnv(t)
	reg := e.registration("ret-1", yidu.Audience{UserIDs: []string{"amy"}})
	reg.Retention = yidu.Retention{N: 3, Unit: 'y'}
	if _, _, err := e.reg.Register(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.reg.Register(context.Background(), e.registration("ret-2", yidu.Audience{UserIDs: []string{"amy"}})); err != nil {
		t.Fatal(err)
	}
	got := testenv.Column[sql.NullString](t, e.db, "SELECT retention FROM messages WHERE msgid IN ('ret-1', 'ret-2') ORDER BY msgid")
	if len(got) != 2 || got[0].String != "3y" || got[1].Valid {
		t.Errorf("retention = %v; want 3y and NULL", got)
	}
}
