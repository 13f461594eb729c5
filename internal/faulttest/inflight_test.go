package faulttest

import (
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestRetryWhileDeadAttemptHoldsLease is TestReceiverKill9's loss made
// deterministic. A receiver marks a read (read bit + pending lease, step 1
// of the read path) and is killed before its delta reaches Kafka. WeCom
// sees the connection reset and retries at once; the retry reaches a new
// receiver while the dead attempt's lease (3 s) is still live.
//
// The retry must not answer 200 while only the dead attempt could publish
// the delta: bitmap.Recorder.record waits, within the callback deadline,
// for the lease to expire and then re-emits the read, or answers 503 so
// that WeCom tries again. WeCom's three tries outlast the lease, so the
// read must end up answered 200 and in MySQL with its CreateTime.
func TestRetryWhileDeadAttemptHoldsLease(t *testing.T) {
	testenv.Long(t)
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
		t.Fatalf("the read was not answered 200 in %d tries (statuses %v); want the retry after the 3 s lease to re-emit it", w.maxTries, statuses)
	}
	deadline := time.Now().Add(30 * time.Second) // flushd's interval is 300 ms; the CI machine is loaded
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
	t.Errorf("the retry of a read whose first attempt died holding the pending lease was answered 200 (statuses %v), "+
		"but the read is not in MySQL 30 s later: a 200 must mean the delta is acknowledged by Kafka", statuses)
}
