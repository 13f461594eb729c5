package faulttest

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/yidu-io/yidu/delta"
)

// mysqlRead is one is_read row.
type mysqlRead struct {
	At     int64
	Source int
}

// state is what Redis and MySQL hold for the scenario's messages.
type state struct {
	mysql map[readKey]mysqlRead
	redis map[readKey]bool
	// pending is reads with an entry in the pending hash: a bit whose
	// delta no attempt has seen acknowledged.
	pending map[readKey]bool
	// dupes is rows minus distinct (msgid, uid) pairs among is_read rows;
	// orphans the rows parked in read_orphans.
	dupes, orphans int
}

// load reads both stores.
func (e *env) load(ctx context.Context, msgs []message) (state, error) {
	st := state{mysql: map[readKey]mysqlRead{}, redis: map[readKey]bool{}, pending: map[readKey]bool{}}
	users := map[uint32]string{}
	rows, err := e.db.QueryContext(ctx, `SELECT uid, userid FROM users WHERE corp_id = ?`, app.CorpID)
	if err != nil {
		return st, err
	}
	for rows.Next() {
		var uid uint32
		var u string
		if err := rows.Scan(&uid, &u); err != nil {
			rows.Close()
			return st, err
		}
		users[uid] = u
	}
	rows.Close()
	for _, m := range msgs {
		rows, err := e.db.QueryContext(ctx, `SELECT uid, UNIX_TIMESTAMP(read_time), source FROM message_read_record
			WHERE corp_id = ? AND msgid = ? AND is_read = 1`, app.CorpID, m.ID)
		if err != nil {
			return st, err
		}
		n := 0
		for rows.Next() {
			var uid uint32
			var at float64
			var src int
			if err := rows.Scan(&uid, &at, &src); err != nil {
				rows.Close()
				return st, err
			}
			st.mysql[readKey{m.ID, users[uid]}] = mysqlRead{At: int64(at), Source: src}
			n++
		}
		rows.Close()
		var distinct int
		if err := e.db.QueryRowContext(ctx, `SELECT COUNT(DISTINCT uid) FROM message_read_record
			WHERE corp_id = ? AND msgid = ? AND is_read = 1`, app.CorpID, m.ID).Scan(&distinct); err != nil {
			return st, err
		}
		st.dupes += n - distinct
		bm, ok, err := e.store.ReadBitmap(ctx, app.CorpID, m.ID)
		if err != nil {
			return st, err
		}
		if ok {
			it := bm.Iterator()
			for it.HasNext() {
				st.redis[readKey{m.ID, users[it.Next()]}] = true
			}
		}
		pend, err := e.store.PendingUIDs(ctx, app.CorpID, m.ID)
		if err != nil {
			return st, err
		}
		for _, uid := range pend {
			st.pending[readKey{m.ID, users[uid]}] = true
		}
	}
	if err := e.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM read_orphans WHERE corp_id = ?`, app.CorpID).Scan(&st.orphans); err != nil {
		return st, err
	}
	return st, nil
}

// missing200 returns the reads answered 200 that MySQL does not hold.
func missing200(res map[readKey]result, st state) []readKey {
	var out []readKey
	for k, r := range res {
		if _, ok := st.mysql[k]; r.OK && !ok {
			out = append(out, k)
		}
	}
	return out
}

// newReport is the scenario's report of WeCom's tries, res.
func newReport(name, faults string, res map[readKey]result) report {
	rep := report{Scenario: name, Reads: len(res), Faults: faults}
	for _, r := range res {
		rep.Tries += r.Tries
		rep.Retries += r.Tries - 1
		if r.OK {
			rep.OK++
		} else {
			rep.GaveUp++
		}
	}
	return rep
}

// atRest records the scenario at rest: its time since e started, the
// rows read in MySQL and those counted twice.
func (rep *report) atRest(e *env, st state) {
	rep.Elapsed = time.Since(e.started)
	rep.Landed = len(st.mysql)
	rep.Dupes = st.dupes
}

// leftovers are the invariant's problems st shows whatever the reads:
// rows counted twice, rows left in read_orphans.
func (st state) leftovers() []string {
	var problems []string
	if st.dupes != 0 {
		problems = append(problems, fmt.Sprintf("%d is_read rows counted twice", st.dupes))
	}
	if st.orphans != 0 {
		problems = append(problems, fmt.Sprintf("%d rows left in read_orphans", st.orphans))
	}
	return problems
}

// verify brings the scenario to rest and checks the invariant:
//
//  1. every read answered 200 reaches MySQL through flushd alone, with
//     read_time = its CreateTime (waited for up to 15 s);
//  2. then `yidu reconcile --all-active` repairs what WeCom gave up on (a
//     bit set, its delta never acknowledged) and what Redis lost;
//  3. after which Redis read bits == MySQL is_read rows, both ⊇ the 200s,
//     ⊆ the reads delivered, no row twice, no orphan, and every read
//     answered 200 still carries its own CreateTime.
//
// It records and returns the scenario's report.
func (e *env) verify(name, faults string) report {
	e.t.Helper()
	ctx := context.Background()
	w := e.wecom
	res, statuses := w.snapshot()
	rep := newReport(name, faults, res)

	// 1. flushd alone, no repair.
	var st state
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for {
		if st, err = e.load(ctx, e.msgsOf(res)); err != nil {
			e.t.Fatalf("load: %v", err)
		}
		if len(missing200(res, st)) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	lost := map[readKey]string{}
	for _, k := range missing200(res, st) {
		lost[k] = fmt.Sprintf("answered 200 (try %d of %d), not in MySQL 15 s later, before reconcile; read bit set: %t, pending lease left in Redis: %t",
			res[k].Tries, w.maxTries, st.redis[k], st.pending[k])
	}

	// 2. the documented repair.
	out := e.reconcile()
	e.t.Logf("yidu reconcile --all-active:\n%s", strings.TrimSpace(out))

	// 3. rest: Redis == MySQL.
	deadline = time.Now().Add(20 * time.Second)
	for {
		if st, err = e.load(ctx, e.msgsOf(res)); err != nil {
			e.t.Fatalf("load: %v", err)
		}
		if maps.EqualFunc(st.mysql, st.redis, func(_ mysqlRead, set bool) bool { return set }) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep.atRest(e, st)

	var problems []string
	for k, r := range res {
		if _, known := lost[k]; !r.OK || known {
			continue
		}
		row, inMySQL := st.mysql[k]
		switch {
		case !st.redis[k]:
			lost[k] = "answered 200, read bit not set in Redis"
		case !inMySQL:
			lost[k] = "answered 200, not in MySQL"
		case row.At != r.At:
			lost[k] = fmt.Sprintf("answered 200 with CreateTime %d, MySQL read_time %d (source %d)", r.At, row.At, row.Source)
		}
	}
	for k, row := range st.mysql {
		r, delivered := res[k]
		switch {
		case !delivered:
			problems = append(problems, fmt.Sprintf("%v: read in MySQL but never delivered", k))
		case !st.redis[k]:
			problems = append(problems, fmt.Sprintf("%v: in MySQL, not in Redis", k))
		case r.OK:
		case row.At == r.At:
		case row.Source == int(delta.SourceReconcile) && row.At > r.At:
			rep.Repaired++
		default:
			problems = append(problems, fmt.Sprintf("%v: never answered 200; read_time %d source %d, CreateTime %d", k, row.At, row.Source, r.At))
		}
	}
	for k := range st.redis {
		if _, ok := st.mysql[k]; !ok {
			problems = append(problems, fmt.Sprintf("%v: read bit in Redis, not in MySQL after reconcile", k))
		}
	}
	problems = append(problems, st.leftovers()...)
	rep.Lost = len(lost)
	addReport(rep)
	e.t.Logf("%s: reads=%d tries=%d retries=%d 200s=%d gave_up=%d lost=%d dupes=%d in_mysql=%d repaired=%d elapsed=%s statuses=%v",
		name, rep.Reads, rep.Tries, rep.Retries, rep.OK, rep.GaveUp, rep.Lost, rep.Dupes, rep.Landed, rep.Repaired,
		rep.Elapsed.Round(100*time.Millisecond), statuses)
	report := func(kind string, m []string) {
		sort.Strings(m)
		if len(m) > 20 {
			m = append(m[:20], fmt.Sprintf("... and %d more", len(m)-20))
		}
		e.t.Errorf("%s:\n  %s", kind, strings.Join(m, "\n  "))
	}
	if len(lost) > 0 {
		var m []string
		for k, why := range lost {
			m = append(m, fmt.Sprintf("%v: %s", k, why))
		}
		report(fmt.Sprintf("LOST %d read(s) answered 200", len(lost)), m)
	}
	if len(problems) > 0 {
		report("invariant broken", problems)
	}
	if rep.OK == 0 {
		e.t.Errorf("no read was answered 200: the scenario proved nothing")
	}
	return rep
}

// msgsOf returns the messages the results name.
func (e *env) msgsOf(res map[readKey]result) []message {
	seen := map[string]bool{}
	var ms []message
	for k := range res {
		if !seen[k.MsgID] {
			seen[k.MsgID] = true
			ms = append(ms, message{ID: k.MsgID})
		}
	}
	return ms
}

// readRows counts is_read rows of the corp.
func (e *env) readRows() int {
	e.t.Helper()
	var n int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND is_read = 1`, app.CorpID).Scan(&n); err != nil {
		e.t.Fatalf("count reads: %v", err)
	}
	return n
}

// waitRowsMove polls the is_read count every 2 ms and returns true as soon
// as it changes: flushd has just committed an UPDATE. False after timeout.
func (e *env) waitRowsMove(timeout time.Duration) bool {
	e.t.Helper()
	before := e.readRows()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if e.readRows() != before {
			return true
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// waitFlushed waits up to 15 s until every read answered 200 is in MySQL.
func (e *env) waitFlushed(res map[readKey]result) {
	e.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		st, err := e.load(context.Background(), e.msgsOf(res))
		if err != nil {
			e.t.Fatal(err)
		}
		if len(missing200(res, st)) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
