package faulttest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestReceiverKill9: the receiver process is killed with SIGKILL three
// times while WeCom delivers a burst, and started again at once on the same
// address. Requests in flight get a reset, WeCom retries them; a retry
// that lands while the killed attempt's pending lease is live waits for
// the lease or answers 503, never 200 without a delta (see
// TestRetryWhileDeadAttemptHoldsLease).
func TestReceiverKill9(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, envOptions{Notices: 2, Members: 1500})
	rcv := e.receivers[0]
	done := e.wecom.goPlay(context.Background(), e.reads, 16)
	const kills = 3
	for i := 1; i <= kills; i++ {
		e.wecom.waitSent(int64(len(e.reads)*i/(kills+1)), done)
		rcv.kill9(t)
		rcv = e.startReceiver(fmt.Sprintf("receiver-%d", i), rcv.addr)
	}
	<-done
	e.verify("1. receiver kill -9", fmt.Sprintf("%d× kill -9 of the receiver mid-burst, restarted at once", kills))
}

// TestFlushdKill9: flushd (its own process) is killed with SIGKILL six
// times while it works, and started again at once: three times as soon as
// MySQL's is_read count moves (it has just run an UPDATE and is about to
// run the next of the flush or commit its offsets), three times at a
// random moment.
func TestFlushdKill9(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, envOptions{Notices: 4, Members: 800, Flushd: []string{"flushd-0"}})
	fl := e.flushd[0]
	done := e.wecom.goPlay(context.Background(), e.reads, 8)
	const kills = 6
	afterUpdate, allWritten, uncommitted := 0, 0, 0
	for i := 1; i <= kills; i++ {
		if i%2 == 1 {
			// 30 s: a restarted member rejoins the group first, and the
			// CI machine is loaded.
			switch {
			case e.waitRowsMove(30 * time.Second):
				afterUpdate++
			case e.readRows() >= len(e.reads):
				// Every read is in MySQL already (a fast storm): nothing
				// is left for an UPDATE to move.
				allWritten++
			}
		} else {
			time.Sleep(time.Duration(100+mrand.IntN(400)) * time.Millisecond)
		}
		fl.kill9(t)
		// Rows written but not covered by a committed offset: the kill
		// fell between an UPDATE and the offset commit.
		if rows, off := int64(e.readRows()), e.committed(); rows > off {
			uncommitted++
			t.Logf("kill %d: %d rows written, offsets committed for %d reads", i, rows, off)
		}
		e.expire(fl)
		fl = e.startMember(fmt.Sprintf("flushd-%d", i), "")
	}
	<-done
	// The odd kills must have hit flushd mid-flush, else the scenario
	// proves nothing about a crash between an UPDATE and its commit.
	if afterUpdate == 0 || afterUpdate+allWritten != (kills+1)/2 {
		t.Errorf("%d of %d kills landed right after an UPDATE (%d after every read was written); want each, at least one: MySQL's rows did not move within 30 s",
			afterUpdate, (kills+1)/2, allWritten)
	}
	e.verify("2. flushd kill -9",
		fmt.Sprintf("%d× kill -9 of flushd (%d right after an UPDATE landed; %d with rows written beyond the committed offsets), restarted at once",
			kills, afterUpdate, uncommitted))
}

// TestKafkaUnavailable: the Kafka cluster stops for 10 s and comes back on
// the same port with its log. Reads delivered meanwhile must be answered
// 503 (their deltas cannot be acknowledged), never 200; after the restart
// the receiver answers 200 again without a restart of its own, and flushd
// resumes.
func TestKafkaUnavailable(t *testing.T) {
	testenv.Long(t)
	t.Parallel() // mostly waiting out the outage
	// Without a spool (spool_dir: off): what a Kafka outage does then.
	e := newEnvWith(t, envOptions{Notices: 2, Members: 1200}, map[string]any{"spool_dir": "off"})
	w := e.wecom
	before, outage, after := e.reads[:1000], e.reads[1000:1060], e.reads[1060:]
	w.setPhase("before")
	w.play(context.Background(), before, 16)

	e.kafka.stop()
	down := time.Now()
	w.setPhase("outage")
	// Each try waits out the producer's 2 s delivery timeout: 60 reads by
	// 60 senders keep all three tries inside the outage.
	w.play(context.Background(), outage, len(outage))
	time.Sleep(time.Until(down.Add(10 * time.Second)))
	e.kafka.start(t)
	up := time.Now()

	// WeCom does not wait for yidu: it sends at once; its retries carry
	// the reads over the producer's reconnect.
	w.setPhase("after")
	w.play(context.Background(), after, 16)
	recovered := time.Since(up)

	res, statuses := w.snapshot()
	var outage200, after200 int
	for _, r := range res {
		switch {
		case r.During == "outage" && r.OK:
			outage200++
		case r.During == "after" && r.OK:
			after200++
		}
	}
	if outage200 != 0 {
		t.Errorf("%d reads delivered while Kafka was down were answered 200; want 0 (503)", outage200)
	}
	if after200 != len(after) {
		t.Errorf("after Kafka came back %d of %d reads were answered 200; want all", after200, len(after))
	}
	t.Logf("statuses %v; the after-phase took %s", statuses, recovered.Round(time.Millisecond))
	e.verify("3. Kafka unavailable 10 s",
		fmt.Sprintf("kfake stopped %.0f s and restarted on its port with its log; %d reads during the outage: %d answered 200 (want 0)",
			up.Sub(down).Seconds(), len(outage), outage200))
}

// TestMySQLUnavailableAndSlow: flushd reaches MySQL through a TCP proxy.
// First the proxy is cut for 10 s while WeCom keeps delivering (the
// receiver keeps its own connection); flushd must retry, not drop or
// skip. Then a
// transaction holds row locks (SELECT … FOR UPDATE) on 200 recipients'
// rows for 4 s while their reads arrive: flushd's UPDATE waits on the
// lock and completes once it is released.
func TestMySQLUnavailableAndSlow(t *testing.T) {
	testenv.Long(t)
	t.Parallel() // mostly waiting out the outage and the lock
	e := newEnv(t, envOptions{Notices: 2, Members: 1000, MySQLProxy: true})
	w, msgs := e.wecom, e.msgs
	// The reads of 200 members of notice-0 are kept for the lock phase.
	locked := map[string]bool{}
	for _, u := range msgs[0].Users[:200] {
		locked[u] = true
	}
	var phase1, phase2 []readEvent
	for _, r := range e.reads {
		if r.MsgID == msgs[0].ID && locked[r.User] {
			phase2 = append(phase2, r)
		} else if len(phase1) < 1000 {
			phase1 = append(phase1, r)
		} else {
			phase2 = append(phase2, r)
		}
	}

	// Phase 1: MySQL gone for 10 s in the middle of a burst.
	done := w.goPlay(context.Background(), phase1, 8)
	w.waitSent(300, done)
	e.proxy.cut()
	down := time.Now()
	// A flush statement the server had received before the cut still
	// commits (the server finishes it though its client is gone): count
	// from a second later, when it has.
	time.Sleep(time.Second)
	rowsAtCut := e.readRows()
	<-done
	time.Sleep(time.Until(down.Add(10 * time.Second)))
	rowsDuring := e.readRows() - rowsAtCut
	e.proxy.restore()
	if rowsDuring != 0 {
		t.Errorf("%d rows changed while flushd's MySQL was cut; want 0 (is the proxy in the way?)", rowsDuring)
	}

	// Phase 2: a lock wait. The test's own connection, not the proxy.
	tx, err := e.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	rows, err := tx.Query(`SELECT r.uid FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid = ? AND u.userid BETWEEN ? AND ? FOR UPDATE`,
		app.CorpID, msgs[0].ID, msgs[0].Users[0], msgs[0].Users[199])
	if err != nil {
		t.Fatal(err)
	}
	nLocked := 0
	for rows.Next() {
		nLocked++
	}
	rows.Close()
	lockedAt := time.Now()
	w.play(context.Background(), phase2, 16)
	time.Sleep(time.Until(lockedAt.Add(4 * time.Second)))
	var readWhileLocked int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid = ? AND u.userid BETWEEN ? AND ? AND r.is_read = 1`,
		app.CorpID, msgs[0].ID, msgs[0].Users[0], msgs[0].Users[199]).Scan(&readWhileLocked); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if readWhileLocked != 0 {
		t.Errorf("%d locked rows read while the lock was held; want 0", readWhileLocked)
	}
	e.verify("4. MySQL unavailable 10 s, then lock wait 4 s",
		fmt.Sprintf("proxy to MySQL cut %.0f s mid-burst (0 rows written meanwhile); %d rows held FOR UPDATE 4 s while their reads arrived",
			10.0, nLocked))
}

// TestRedisDataLost: Redis "restarts empty" twice during the burst: every
// key under the scenario's prefix is deleted (the shared Redis cannot be
// restarted). The receiver rebuilds each message from MySQL on its next
// read (the automatic restore); reads that were still in Kafka at that
// moment are put back by `yidu reconcile --all-active` once flushd has
// written them.
func TestRedisDataLost(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, envOptions{Notices: 2, Members: 1500})
	done := e.wecom.goPlay(context.Background(), e.reads, 16)
	deleted := 0
	for i := 1; i <= 2; i++ {
		e.wecom.waitSent(int64(len(e.reads)*i/3), done)
		deleted += e.wipeRedis()
	}
	<-done

	// Before the repair: what the automatic restore alone achieved.
	ctx := context.Background()
	res, _ := e.wecom.snapshot()
	e.waitFlushed(res)
	st, err := e.load(ctx, e.msgs)
	if err != nil {
		t.Fatal(err)
	}
	var onlyMySQL int
	for k := range st.mysql {
		if !st.redis[k] {
			onlyMySQL++
		}
	}
	t.Logf("before reconcile: MySQL %d reads, Redis %d, %d in MySQL only", len(st.mysql), len(st.redis), onlyMySQL)
	e.verify("5. Redis data lost",
		fmt.Sprintf("every key under the prefix deleted twice mid-burst (%d keys); %d reads were in MySQL only before reconcile", deleted, onlyMySQL))
}

// wipeRedis deletes every key under the scenario's prefix and returns how
// many it deleted.
func (e *env) wipeRedis() int {
	e.t.Helper()
	n, err := rig.DeleteKeys(context.Background(), e.rdb, e.prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// TestTwoOfEach: two receivers behind WeCom's retries (each try may go to
// either) and two flushd in one consumer group over 4 partitions. Mid-burst
// one flushd is killed with SIGKILL and a third joins: the partitions are
// rebalanced while deltas flow, the dead member's unwritten reads are
// replayed by their new owner.
func TestTwoOfEach(t *testing.T) {
	testenv.Long(t)
	e := newEnv(t, envOptions{Notices: 8, Members: 400, Receivers: 2, Flushd: []string{"flushd-a", "flushd-b"}, Partitions: 4})
	fa, w := e.flushd[0], e.wecom
	done := w.goPlay(context.Background(), e.reads, 8)
	w.waitSent(int64(len(e.reads)/3), done)
	e.waitRowsMove(5 * time.Second)
	fa.kill9(t)
	t.Logf("at the kill: %d of %d reads delivered, %d rows written, offsets committed for %d",
		w.sent.Load(), len(e.reads), e.readRows(), e.committed())
	e.expire(fa)
	e.startMember("flushd-c", "")
	<-done
	e.verify("6. 2 receivers, 2 flushd, rebalance",
		"2 receivers (tries spread over both), 2 flushd on 4 partitions; mid-burst kill -9 of one flushd and a third joins")
}
