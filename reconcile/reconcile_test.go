package reconcile_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/reconcile"
	"github.com/yidu-io/yidu/tracker"
)

const corp = "wwreconcile"

type fixture struct {
	db       *sql.DB
	rdb      *redis.Client
	prefix   string
	store    *bitmap.Store
	registry *tracker.Registry
	ids      *idmap.Mapper
	producer *delta.Producer
	brokers  []string
	topic    string
	rec      *reconcile.Reconciler
	now      time.Time
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	brokers, topic := testenv.Topic(t, "yidu.reads", 1)
	store, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix})
	testenv.Check(t, "bitmap.New", err)
	t.Cleanup(store.Close)
	ids, err := idmap.New(db, idmap.Options{})
	testenv.Check(t, "idmap.New", err)
	reg, err := tracker.New(db, ids, store, tracker.Options{})
	testenv.Check(t, "tracker.New", err)
	p, err := delta.NewProducer(brokers, topic, delta.ProducerOptions{})
	testenv.Check(t, "producer", err)
	t.Cleanup(p.Close)
	now := time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)
	rec, err := reconcile.New(reg, store, p, reconcile.Options{Now: func() time.Time { return now }})
	testenv.Check(t, "reconcile.New", err)
	return &fixture{db: db, rdb: rdb, prefix: prefix, store: store, registry: reg, ids: ids, producer: p, brokers: brokers, topic: topic, now: now, rec: rec}
}

// register registers msgID to n members user0..user{n-1} (uids 0..n-1).
func (f *fixture) register(t *testing.T, msgID string, n int) yidu.Message {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("user%d", i)
	}
	// The directory knows them (a sync's work).
	_, err := f.ids.Assign(context.Background(), corp, ids)
	testenv.Check(t, "assign", err)
	m, _, err := f.registry.Register(context.Background(), yidu.Registration{
		MsgID: msgID, Title: "t", SentAt: f.now.Add(-time.Hour),
		App:      yidu.App{Name: "hr", CorpID: corp, AgentID: 1000002},
		Audience: yidu.Audience{UserIDs: ids},
	})
	testenv.Check(t, "register", err)
	return m
}

// recipients is m's audience as MySQL has it.
func (f *fixture) recipients(t *testing.T, m yidu.Message) *roaring.Bitmap {
	t.Helper()
	_, rcpt, _, _, err := f.registry.LoadMessage(context.Background(), corp, m.MsgID)
	testenv.Check(t, "load", err)
	return rcpt
}

func (f *fixture) consume(t *testing.T, want int) []delta.Delta {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...), kgo.ConsumeTopics(f.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	testenv.Check(t, "consumer", err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []delta.Delta
	for len(out) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			d, err := delta.Unmarshal(r.Value)
			testenv.Check(t, "unmarshal", err)
			out = append(out, d)
		})
	}
	return out
}

func TestRebuildsLostRedisFromMySQL(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := f.register(t, "rebuild-1", 100)
	// MySQL has 10 reads (as flushd would have written them); Redis is then
	// emptied, as after a restart without persistence.
	mysqlRead := roaring.New()
	for u := uint32(0); u < 100; u += 10 {
		mysqlRead.Add(u)
	}
	rcpt := f.recipients(t, m)
	if err := f.store.RestoreMessage(ctx, m, rcpt, roaring.New()); err != nil {
		t.Fatal(err)
	}
	markMySQL(t, f, m.MsgID, mysqlRead)
	deleteRedis(t, f, m)

	rep, err := f.rec.Message(ctx, corp, m.MsgID)
	testenv.Check(t, "reconcile", err)
	if !rep.Found || !rep.RedisMissing || rep.RestoredBits != 10 || rep.EmittedDeltas != 0 {
		t.Errorf("report = %+v; want found, redis rebuilt, 10 restored, 0 emitted", rep)
	}
	recipients, read, found, err := f.store.Counts(ctx, corp, m.MsgID)
	testenv.Check(t, "counts", err)
	if !found || recipients != 100 || read != 10 {
		t.Errorf("after rebuild Counts = %d recipients, %d read, found %t; want 100, 10, true", recipients, read, found)
	}
	got, _, err := f.store.ReadBitmap(ctx, corp, m.MsgID)
	testenv.Check(t, "read bitmap", err)
	if !got.Equals(mysqlRead) {
		t.Errorf("read bitmap = %v; want %v", got.ToArray(), mysqlRead.ToArray())
	}
	// A second run finds nothing to do.
	rep, err = f.rec.Message(ctx, corp, m.MsgID)
	testenv.Check(t, "reconcile again", err)
	if rep.RedisMissing || rep.RestoredBits != 0 || rep.EmittedDeltas != 0 {
		t.Errorf("second report = %+v; want no changes", rep)
	}
}

func TestEmitsDeltasMySQLLacks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := f.register(t, "behind-1", 50)
	rcpt := f.recipients(t, m)
	// Redis shows uids 1..5 read; MySQL has only 1 and 2.
	redisRead := roaring.BitmapOf(1, 2, 3, 4, 5)
	testenv.Check(t, "restore", f.store.RestoreMessage(ctx, m, rcpt, redisRead))
	markMySQL(t, f, m.MsgID, roaring.BitmapOf(1, 2))

	rep, err := f.rec.Message(ctx, corp, m.MsgID)
	testenv.Check(t, "reconcile", err)
	if rep.EmittedDeltas != 3 || rep.RestoredBits != 0 || rep.RedisRead != 5 || rep.MySQLRead != 2 {
		t.Errorf("report = %+v; want 3 emitted, 0 restored, redis 5, mysql 2", rep)
	}
	ds := f.consume(t, 3)
	got := roaring.New()
	for _, d := range ds {
		if d.CorpID != corp || d.MsgID != m.MsgID || d.Source != delta.SourceReconcile || !d.Counted || d.ReadTime != f.now.Unix() {
			t.Errorf("delta %+v; want corp %s msg %s source reconcile at %d", d, corp, m.MsgID, f.now.Unix())
		}
		got.Add(d.UID)
	}
	if !got.Equals(roaring.BitmapOf(3, 4, 5)) || len(ds) != 3 {
		t.Errorf("emitted uids %v (%d deltas); want [3 4 5]", got.ToArray(), len(ds))
	}
}

// TestSignalsBothWays: each signal is repaired like the reads. MySQL's
// signals Redis lacks (keys written before signals were kept apart) are
// ORed in; Redis's signals MySQL lacks are emitted as deltas that do not
// count, so they never make a row read.
func TestSignalsBothWays(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := f.register(t, "signals-1", 20)
	rcpt := f.recipients(t, m)
	// MySQL: uid 1 pressed the button (read); uid 2 only opened the app.
	markMySQL(t, f, m.MsgID, roaring.BitmapOf(1))
	if _, err := f.db.Exec("UPDATE message_read_record SET button_at = read_time WHERE corp_id = ? AND msgid = ? AND uid = 1", corp, m.MsgID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec("UPDATE message_read_record SET enter_at = ? WHERE corp_id = ? AND msgid = ? AND uid = 2", f.now.Add(-time.Minute), corp, m.MsgID); err != nil {
		t.Fatal(err)
	}
	// Redis: uid 1's read without its signal; uid 3 opened the app and uid 4
	// pressed the button, neither flushed.
	testenv.Check(t, "restore", f.store.RestoreMessage(ctx, m, rcpt, roaring.BitmapOf(1)))
	_, err := f.store.Mark(ctx, []bitmap.Target{
		{CorpID: corp, MsgID: m.MsgID, Signal: yidu.SignalEnterAgent, UIDs: []uint32{3}},
		{CorpID: corp, MsgID: m.MsgID, Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{4}},
	})
	testenv.Check(t, "mark", err)

	rep, err := f.rec.Message(ctx, corp, m.MsgID)
	testenv.Check(t, "reconcile", err)
	if rep.RestoredBits != 0 || rep.RestoredSignals != 2 || rep.EmittedDeltas != 1 || rep.EmittedSignals != 2 {
		t.Errorf("report = %+v; want 0 restored bits, 2 restored signals, 1 emitted read, 2 emitted signals", rep)
	}
	_, rd, by, found, err := f.store.CountsBySignal(ctx, corp, m.MsgID)
	if err != nil || !found || rd != 2 || by != (yidu.SignalCounts{Button: 2, EnterAgent: 2}) {
		t.Errorf("CountsBySignal = read %d, %+v, %v, %v; want 2, {button 2, enter_agent 2}", rd, by, found, err)
	}
	ds := f.consume(t, 3)
	testenv.SortDeltas(ds)
	at := f.now.Unix()
	want := []delta.Delta{
		{CorpID: corp, MsgID: m.MsgID, UID: 3, ReadTime: at, Source: delta.SourceEnterAgent},
		{CorpID: corp, MsgID: m.MsgID, UID: 4, ReadTime: at, Source: delta.SourceCard},
		{CorpID: corp, MsgID: m.MsgID, UID: 4, ReadTime: at, Source: delta.SourceReconcile, Counted: true},
	}
	if !slices.Equal(ds, want) {
		t.Errorf("deltas = %+v; want %+v", ds, want)
	}
	// Once MySQL has them all, nothing is left to do.
	if _, err := f.db.Exec("UPDATE message_read_record SET enter_at = ? WHERE corp_id = ? AND msgid = ? AND uid = 3", f.now, corp, m.MsgID); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec("UPDATE message_read_record SET is_read = 1, read_time = ?, source = 4, button_at = ? WHERE corp_id = ? AND msgid = ? AND uid = 4", f.now, f.now, corp, m.MsgID); err != nil {
		t.Fatal(err)
	}
	rep, err = f.rec.Message(ctx, corp, m.MsgID)
	testenv.Check(t, "reconcile again", err)
	if rep.RestoredBits != 0 || rep.RestoredSignals != 0 || rep.EmittedDeltas != 0 || rep.EmittedSignals != 0 {
		t.Errorf("second report = %+v; want no changes", rep)
	}
}

func TestUnknownMessage(t *testing.T) {
	f := newFixture(t)
	rep, err := f.rec.Message(context.Background(), corp, "nosuch")
	testenv.Check(t, "reconcile", err)
	if rep.Found {
		t.Errorf("report = %+v; want not found", rep)
	}
}

func markMySQL(t *testing.T, f *fixture, msgID string, uids *roaring.Bitmap) {
	t.Helper()
	db := f.db
	for _, u := range uids.ToArray() {
		if _, err := db.Exec(`UPDATE message_read_record SET is_read = 1, read_time = ?, source = 1 WHERE corp_id = ? AND msgid = ? AND uid = ?`,
			f.now.Add(-30*time.Minute), corp, msgID, u); err != nil {
			t.Fatal(err)
		}
	}
}

func deleteRedis(t *testing.T, f *fixture, m yidu.Message) {
	t.Helper()
	// Every key of the test's namespace goes, as when Redis restarts empty.
	ctx := context.Background()
	keys, err := f.rdb.Keys(ctx, f.prefix+"*").Result()
	testenv.Check(t, "keys", err)
	if len(keys) == 0 {
		t.Fatalf("no keys under %s", f.prefix)
	}
	testenv.Check(t, "del", f.rdb.Del(ctx, keys...).Err())
	if _, _, found, _ := f.store.Counts(context.Background(), m.CorpID, m.MsgID); found {
		t.Fatalf("message still in Redis after ForgetMessage")
	}
}
