package faulttest

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// TestReceiverKill9: the receiver process is killed with SIGKILL three
// times while WeCom delivers a burst, and started again at once on the same
// address. Requests in flight get a reset, WeCom retries them.
func TestReceiverKill9(t *testing.T) {
	start := time.Now()
	e := newEnv(t, envOptions{})
	msgs := messages(2, 1500)
	e.register(msgs)
	e.startFlushd("flushd", "")
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	rcv := e.startReceiver("receiver-0", addr)

	w := newWeCom(t, addr)
	reads := readsOf(msgs)
	done := w.goPlay(context.Background(), reads, 16)
	const kills = 3
	for i := 1; i <= kills; i++ {
		w.waitSent(int64(len(reads)*i/(kills+1)), done)
		rcv.kill9(t)
		rcv = e.startReceiver(fmt.Sprintf("receiver-%d", i), addr)
	}
	<-done
	e.verify("1. receiver kill -9", w, start, fmt.Sprintf("%d× kill -9 of the receiver mid-burst, restarted at once", kills))
}

// TestFlushdKill9: flushd (its own process) is killed with SIGKILL six
// times while it works, and started again at once: three times as soon as
// MySQL's is_read count moves (it has just run an UPDATE and is about to
// run the next of the flush or commit its offsets), three times at a
// random moment.
func TestFlushdKill9(t *testing.T) {
	start := time.Now()
	e := newEnv(t, envOptions{})
	msgs := messages(4, 800)
	e.register(msgs)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	e.startReceiver("receiver", addr)
	fl := e.startMember("flushd-0", "")

	w := newWeCom(t, addr)
	reads := readsOf(msgs)
	done := w.goPlay(context.Background(), reads, 8)
	const kills = 6
	afterUpdate, uncommitted := 0, 0
	for i := 1; i <= kills; i++ {
		if i%2 == 1 {
			if e.waitRowsMove(10 * time.Second) {
				afterUpdate++
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
	e.verify("2. flushd kill -9", w, start,
		fmt.Sprintf("%d× kill -9 of flushd (%d right after an UPDATE landed; %d with rows written beyond the committed offsets), restarted at once",
			kills, afterUpdate, uncommitted))
}
