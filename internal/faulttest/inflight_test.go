package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
)

// TestRetryWhileDeadAttemptHoldsLease is TestReceiverKill9's loss made
// deterministic. A receiver marks a read (read bit + pending lease, step 1
// of the read path) and is killed before its delta reaches Kafka. WeCom
// sees the connection reset and retries at once; the retry reaches a new
// receiver while the dead attempt's lease (3 s) is still live.
//
// Today the retry gets OutcomeInFlight, bitmap.Recorder.record counts it
// and returns (0, nil), and the receiver answers 200: WeCom stops, no
// attempt publishes the delta, and the read never reaches MySQL (only a
// later signal of the same member for the same message, or `yidu
// reconcile`, would re-emit it, with another read_time). Answering 200
// here breaks "every read answered 200 is in Kafka". This test fails
// until the Recorder either waits for the lease to be acked or to expire
// (and then re-emits), or answers 503 for an in-flight read.
func TestRetryWhileDeadAttemptHoldsLease(t *testing.T) {
	e := newEnv(t, envOptions{Notices: 1, Members: 10})
	msgs := e.msgs

	ctx := context.Background()
	const user = "user-0003"
	var uid uint32
	if err := e.db.QueryRow(`SELECT uid FROM users WHERE corp_id = ? AND userid = ?`, app.CorpID, user).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	// The attempt that died: step 1 done (a card press, which counts),
	// nothing published.
	outs, err := e.store.Mark(ctx, []bitmap.Target{{CorpID: app.CorpID, MsgID: msgs[0].ID, AgentID: app.AgentID,
		Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{uid}}})
	if err != nil || outs[0][0] != bitmap.OutcomeNew {
		t.Fatalf("Mark = %v, %v; want new", outs, err)
	}

	w := e.wecom
	read := readEvent{MsgID: msgs[0].ID, User: user, At: msgs[0].SentAt.Unix() + 7}
	w.play(ctx, []readEvent{read}, 1)
	res, statuses := w.snapshot()
	if !res[read.key()].OK {
		// Not answered 200: WeCom was not told we have it. No promise broken.
		t.Logf("retries answered %v", statuses)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var at int64
		err := e.db.QueryRow(`SELECT UNIX_TIMESTAMP(read_time) FROM message_read_record
			WHERE corp_id = ? AND msgid = ? AND uid = ? AND is_read = 1`, app.CorpID, msgs[0].ID, uid).Scan(&at)
		if err == nil {
			if at != read.At {
				t.Errorf("read_time = %d; want the CreateTime %d", at, read.At)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("BUG (bitmap.Recorder, OutcomeInFlight): the retry of a read whose first attempt died holding the pending lease "+
		"was answered 200 (statuses %v), but no delta was published: the read is not in MySQL 10 s later. "+
		"A 200 must mean the delta is acknowledged by Kafka.", statuses)
}
