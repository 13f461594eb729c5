package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/ledger"
)

// TestReminderLogClaim: of replicas claiming one notice's act at once
// exactly one holds it; released, the next claims it; a claim never
// released (its replica died) is taken over once its lease ran out.
func TestReminderLogClaim(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := newClock()
	const ttl = 30 * time.Second
	logs := make([]*store.ReminderLog, 4)
	for i := range logs {
		l, err := store.NewReminderLog(db, "replica", ttl, c.now, nil)
		testenv.Check(t, "NewReminderLog", err)
		logs[i] = l
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		releases []func()
	)
	for _, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, ok, err := l.Claim(ctx, "ww1", "m1", "remind")
			if err != nil {
				t.Errorf("Claim: %v", err)
			}
			if ok {
				mu.Lock()
				releases = append(releases, release)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(releases) != 1 {
		t.Fatalf("%d of %d concurrent claims won; want 1", len(releases), len(logs))
	}
	if _, ok, _ := logs[0].Claim(ctx, "ww1", "m1", "recall"); ok {
		t.Fatal("a claim won while another holds the act")
	}
	releases[0]()
	if r := readLease(t, db, "m1"); r.State != "idle" || r.Owner.Valid {
		t.Fatalf("released act row = %+v; want idle, no owner", r)
	}
	if _, ok, err := logs[1].Claim(ctx, "ww1", "m1", "recall"); err != nil || !ok {
		t.Fatalf("Claim after release = %v, %v; want claimed", ok, err)
	}
	if _, ok, _ := logs[2].Claim(ctx, "ww1", "m1", "remind"); ok {
		t.Fatal("a claim won while the lease runs")
	}
	// The holder died without releasing: its lease runs out.
	c.add(ttl)
	release, ok, err := logs[2].Claim(ctx, "ww1", "m1", "remind")
	if err != nil || !ok {
		t.Fatalf("Claim after the lease ran out = %v, %v; want taken over", ok, err)
	}
	release()
	if got := testenv.Column[string](t, db, "SELECT CONCAT(state, '/', act, '/', attempts) FROM notice_acts WHERE msgid = 'm1'"); got[0] != "idle/remind/3" {
		t.Errorf("act row = %s; want idle/remind/3 (three claims won)", got[0])
	}
}

// TestReminderLogRecord: Record writes a row per person (over more than
// one statement) and an evidence entry each, all or nothing; Reminded
// reads the newest reminder of each person since a time, from both
// manual_reminders and the rounds' reminders (not their digests);
// Unrecord takes back one reminder's rows and only those.
func TestReminderLogRecord(t *testing.T) {
	db := testenv.MySQL(t)
	ctx := context.Background()
	c := newClock()
	lg, err := ledger.New(db, ledger.Options{Now: c.now})
	testenv.Check(t, "ledger.New", err)
	rl, err := store.NewReminderLog(db, "", 0, c.now, nil)
	testenv.Check(t, "NewReminderLog", err)
	rl.WithEvidence(lg)
	entries := func() int {
		n := testenv.Column[int](t, db, "SELECT COALESCE(MAX(next_seq), 1) - 1 FROM ledger_heads WHERE corp_id = 'ww1'")
		return n[0]
	}

	many := make([]uint32, store.RowsPerStatement+1)
	for i := range many {
		many[i] = uint32(1000 + i)
	}
	// A person twice in one reminder fails its second statement: the
	// first statement's rows and the evidence are rolled back with it.
	bad := append(append([]uint32{}, many...), many[0])
	if err := rl.Record(ctx, "ww1", "m1", t0, "hr-admin", "all", bad); err == nil {
		t.Fatal("Record of a person twice at one time succeeded")
	}
	if n := count(t, db, "manual_reminders", "1"); n != 0 || entries() != 0 {
		t.Fatalf("a failed Record left %d rows and %d evidence entries; want none", n, entries())
	}
	testenv.Check(t, "Record many", rl.Record(ctx, "ww1", "m1", t0, "hr-admin", "all", many))
	if n := count(t, db, "manual_reminders", "msgid = 'm1' AND reminded_at = ? AND reminded_by = 'hr-admin' AND scope = 'all'", t0); n != len(many) {
		t.Fatalf("Record wrote %d rows; want %d", n, len(many))
	}
	if entries() != len(many) {
		t.Fatalf("Record wrote %d evidence entries; want %d", entries(), len(many))
	}

	later := t0.Add(time.Hour)
	testenv.Check(t, "Record later", rl.Record(ctx, "ww1", "m1", later, "leader", "led", []uint32{1000, 7}))
	testenv.Check(t, "Record other notice", rl.Record(ctx, "ww1", "m2", later.Add(time.Hour), "hr-admin", "all", []uint32{1000}))
	exec(t, db, `INSERT INTO reminder_log (corp_id, msgid, round, kind, uid, userid, batch, reminded_at, outcome) VALUES
		('ww1', 'm1', 1, 'reminder', 8, 'u8', 0, ?, 'sent'), ('ww1', 'm1', 1, 'digest', 9, 'u9', 0, ?, 'sent'),
		('ww1', 'm1', 2, 'reminder', 7, 'u7', 0, ?, 'sent')`, later, later, later.Add(-2*time.Hour))

	tests := []struct {
		name  string
		since time.Time
		want  map[uint32]time.Time
	}{
		{"since after the first", t0, map[uint32]time.Time{1000: later, 7: later, 8: later}},
		{"since the last", later, map[uint32]time.Time{}},
	}
	for _, tt := range tests {
		got, err := rl.Reminded(ctx, "ww1", "m1", tt.since)
		testenv.Check(t, "Reminded", err)
		if len(got) != len(tt.want) {
			t.Errorf("%s: Reminded = %v; want %v", tt.name, got, tt.want)
		}
		for uid, at := range tt.want {
			if !got[uid].Equal(at) {
				t.Errorf("%s: Reminded[%d] = %v; want %v", tt.name, uid, got[uid], at)
			}
		}
	}
	all, err := rl.Reminded(ctx, "ww1", "m1", t0.Add(-time.Second))
	testenv.Check(t, "Reminded", err)
	if len(all) != len(many)+2 || !all[1001].Equal(t0) || !all[1000].Equal(later) || !all[7].Equal(later) {
		t.Errorf("Reminded since before all: %d people, 1001 at %v, 1000 at %v, 7 at %v; want %d, newest each",
			len(all), all[1001], all[1000], all[7], len(many)+2)
	}

	before := entries()
	testenv.Check(t, "Unrecord", rl.Unrecord(ctx, "ww1", "m1", t0))
	if n := count(t, db, "manual_reminders", "msgid = 'm1'"); n != 2 {
		t.Errorf("after Unrecord of the first reminder %d rows of m1 remain; want the later 2", n)
	}
	if n := count(t, db, "manual_reminders", "msgid = 'm2'"); n != 1 {
		t.Errorf("Unrecord of m1 touched m2: %d rows; want 1", n)
	}
	if got := entries() - before; got != len(many) {
		t.Errorf("Unrecord wrote %d withdrawal entries; want %d", got, len(many))
	}
}
