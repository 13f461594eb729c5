package bitmap

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestMergedPipeline runs one batch of many callers' marks and acks the
// way the queue loop does (Store.run) and checks that calls on the same
// message, signal, agent and decision became one command while every
// caller still gets its own uids' outcomes, in queue order: a uid marked
// twice in the batch is new for the first caller and in flight for the
// second; a missing message, another app's card and another signal stay
// apart.
func TestMergedPipeline(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2, 3, 5)))
	btn := func(msg string, agent int64, us ...uint32) Target {
		return Target{CorpID: testCorp, MsgID: msg, AgentID: agent, Signal: yidu.SignalButton, Counted: true, UIDs: us}
	}
	link := Target{CorpID: testCorp, MsgID: "m", AgentID: 7, Signal: yidu.SignalLink, Counted: false, UIDs: []uint32{2}}
	marks := []struct {
		target Target
		want   []Outcome
	}{
		{btn("m", 7, 1), []Outcome{OutcomeNew}},
		{btn("m", 7, 1), []Outcome{OutcomeInFlight}}, // same uid, later in the batch
		{btn("m", 7, 4, 2), []Outcome{OutcomeNotRecipient, OutcomeNew}},
		{btn("gone", 7, 2), []Outcome{OutcomeMissing}},
		{link, []Outcome{OutcomeNewUncounted}},
		{btn("m", 8, 3), []Outcome{OutcomeOtherApp}},
		{btn("m", 7, 5), []Outcome{OutcomeNew}},
	}
	var batch []*request
	var calls [][]call
	for _, m := range marks {
		c, err := s.markCalls([]Target{m.target})
		testenv.Check(t, "markCalls", err)
		calls = append(calls, c)
		batch = append(batch, &request{ctx: ctx, calls: c, done: make(chan error, 1)})
	}
	if got := len(s.wires(batch)); got != 4 {
		t.Errorf("wires = %d; want 4 (m/button/7 merged from 4 calls, gone, link, agent 8)", got)
	}
	s.run(batch)
	if calls, cmds := meanObserved(t, s.m.batchCalls), meanObserved(t, s.m.batchCmds); calls != 7 || cmds != 4 {
		t.Errorf("pipeline metrics: %v calls, %v commands; want 7, 4", calls, cmds)
	}
	for i, m := range marks {
		testenv.Check(t, "done", <-batch[i].done)
		out, err := markOutcomes([]Target{m.target}, calls[i])
		testenv.Check(t, "markOutcomes", err)
		if !slices.Equal(out[0], m.want) {
			t.Errorf("caller %d (%s uids %v): %v; want %v", i, m.target.MsgID, m.target.UIDs, out[0], m.want)
		}
	}

	// Acks of several callers for one message are one HDEL; each lease
	// is gone afterwards, and the others' are kept.
	var acks []*request
	for _, u := range []uint32{1, 2} {
		c := []call{{keys: []string{s.msgKey(testCorp, "m", "pend")}, args: []any{pendField(u, yidu.SignalButton)},
			merge: mergeKey{op: "ack", msg: msgRef{testCorp, "m"}}}}
		acks = append(acks, &request{ctx: ctx, calls: c, done: make(chan error, 1)})
	}
	if got := len(s.wires(acks)); got != 1 {
		t.Errorf("ack wires = %d; want 1", got)
	}
	s.run(acks)
	for _, r := range acks {
		testenv.Check(t, "ack done", <-r.done)
	}
	if p, _ := s.PendingUIDs(ctx, testCorp, "m"); !slices.Equal(p, []uint32{2, 5}) {
		t.Errorf("PendingUIDs = %v; want [2 5] (uid 2's link lease and uid 5's button lease stay)", p)
	}
	rd, _, _ := s.ReadBitmap(ctx, testCorp, "m")
	if !rd.Equals(uids(1, 2, 5)) {
		t.Errorf("ReadBitmap = %v; want [1 2 5]", rd)
	}
}

// TestMarkWithinTimeout: a mark whose caller's timeout passes while it is
// queued returns context.DeadlineExceeded to the caller (the Recorder then
// publishes without Redis), and the loop drops it when it comes to it:
// nobody waits for its outcome, so it must set no bit and take no lease.
func TestMarkWithinTimeout(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := newStore(rdb, Options{Prefix: prefix, Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "newStore", err) // not started: nothing takes the queue
	ctx := context.Background()
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage("m", 7, time.Now()), uids(1, 2)))
	target := Target{CorpID: testCorp, MsgID: "m", AgentID: 7, Signal: yidu.SignalButton, Counted: true, UIDs: []uint32{1}}

	start := time.Now()
	_, err = s.MarkWithin(ctx, []Target{target}, 20*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("MarkWithin with nothing serving the queue: %v; want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("MarkWithin returned after %s; want about its 20ms timeout", d)
	}
	r := <-s.queue
	s.run([]*request{r})
	if err := <-r.done; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the loop's answer to the expired request: %v; want context.DeadlineExceeded", err)
	}
	rd, _, err := s.ReadBitmap(ctx, testCorp, "m")
	testenv.Check(t, "ReadBitmap", err)
	if rd != nil && !rd.IsEmpty() {
		t.Errorf("ReadBitmap = %v after an expired mark; want empty", rd)
	}
	if p, _ := s.PendingUIDs(ctx, testCorp, "m"); len(p) != 0 {
		t.Errorf("PendingUIDs = %v after an expired mark; want none", p)
	}

	// Within its timeout the same mark is made.
	s.start()
	t.Cleanup(s.Close)
	out, err := s.MarkWithin(ctx, []Target{target}, 5*time.Second)
	testenv.Check(t, "MarkWithin", err)
	if !slices.Equal(out[0], []Outcome{OutcomeNew}) {
		t.Errorf("MarkWithin = %v; want [new]", out[0])
	}
}

// TestScriptMerged: callers of ScriptMerged with the same group in one
// batch become one command whose keys are theirs in batch order and whose
// items follow the fixed args in the same order; each caller gets the
// whole reply; another group stays apart. Through the running store the
// callers' writes all land.
func TestScriptMerged(t *testing.T) {
	s, _ := mustStore(t, Options{})
	ctx := context.Background()
	// KEYS: one per caller; ARGV: a prefix, then one value per key.
	script := redis.NewScript(`
for i, k in ipairs(KEYS) do
  redis.call('SET', k, ARGV[1] .. ARGV[1 + i])
end
return #KEYS
`)
	key := func(n string) string { return s.opts.Prefix + "merged:{m}:" + n }
	type caller struct{ group, key, item string }
	callers := []caller{{"a", key("1"), "x"}, {"b", key("2"), "y"}, {"a", key("3"), "z"}, {"a", key("4"), "w"}}
	var batch []*request
	for _, c := range callers {
		prefix := c.group + ":"
		batch = append(batch, &request{ctx: ctx, calls: []call{mergedCall(c.group, script, c.key, []any{prefix}, []any{c.item})}, done: make(chan error, 1)})
	}
	if got := len(s.wires(batch)); got != 2 {
		t.Errorf("wires = %d; want 2 (group a's three callers as one)", got)
	}
	s.run(batch)
	for i, c := range callers {
		testenv.Check(t, "done", <-batch[i].done)
		want := int64(3)
		if c.group == "b" {
			want = 1
		}
		if got := batch[i].calls[0].val; got != want {
			t.Errorf("caller %d's reply = %v; want %d (its group's keys)", i, got, want)
		}
		if got, _ := s.rdb.Get(ctx, c.key).Result(); got != c.group+":"+c.item {
			t.Errorf("%s = %q; want %q", c.key, got, c.group+":"+c.item)
		}
	}

	// Through the store's loop, concurrently.
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			k := key("c" + strconv.Itoa(i))
			if err := s.ScriptMerged(ctx, "c", script, k, []any{"c:"}, strconv.Itoa(i)); err != nil {
				t.Errorf("ScriptMerged %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i := range 50 {
		if got, _ := s.rdb.Get(ctx, key("c"+strconv.Itoa(i))).Result(); got != "c:"+strconv.Itoa(i) {
			t.Errorf("caller %d's key = %q; want %q", i, got, "c:"+strconv.Itoa(i))
		}
	}
}
