package bitmap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/yidu-io/yidu"
)

// call is one script invocation (script nil: HDEL keys[0] args...); val
// and err hold its reply after the request is done.
//
// Calls of one batch with the same non-empty merge key have the same
// script, keys and first fixed args, and per-item args after them (uids,
// fields): run sends them as one command with the items concatenated, in
// batch order, and hands each call its own items' replies. In the 9:00
// storm every callback marks the same message, so a pipeline of 64
// callers' marks is one script call instead of 64: Redis pays the Lua
// call, the key lookups and the TTL check once.
type call struct {
	// queue, when set, queues a caller's own commands on the batch's
	// pipeline (Store.Pipelined); the call is no wire, and its commands'
	// errors are its caller's to read.
	queue  func(p redis.Pipeliner)
	script *redis.Script
	keys   []string
	args   []any
	merge  mergeKey
	fixed  int

	val any
	err error
}

// mergeKey says which calls of a batch become one command (see call); op
// "" never merges. keyed calls bring a key each: the command's keys are
// theirs in batch order (ScriptMerged).
type mergeKey struct {
	op      string
	msg     msgRef
	agent   int64
	signal  yidu.Signal
	counted bool
	keyed   bool
}

// wire is one command of a pipeline and the calls it carries.
type wire struct {
	c     *call // the first call: script, keys, fixed args
	keys  []string
	args  []any
	parts []part
	cmd   *redis.Cmd
}

// part is a call's items within its wire's reply.
type part struct {
	c      *call
	off, n int
}

// request is one caller's calls, sent together in one pipeline.
type request struct {
	ctx context.Context
	// deadline, when set, is the caller's timeout (do): past it nobody
	// waits for the calls.
	deadline time.Time
	calls    []call
	done     chan error // buffered: the loop never blocks on a gone caller
	// failed, when set, hears of an error too (AckAsync: nobody waits).
	failed func(error)
}

// do queues calls and waits for their replies, ctx or timeout (0: none).
func (s *Store) do(ctx context.Context, calls []call, timeout time.Duration) error {
	// The deadline is the request's before it is queued: the loop reads
	// it from then on.
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	r, err := s.enqueue(ctx, calls, deadline, nil)
	if err != nil {
		return err
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	// The calls may still run after ctx or the timeout: a mark whose
	// caller left keeps its lease, which expires and lets the retry
	// re-emit.
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-expired:
		return context.DeadlineExceeded
	}
}

// Script runs script on keys with args in the store's shared pipeline,
// with the concurrent callers' marks and acks: no round trip of its own
// (the reading page's marks of what a reader did, issue 50). It waits for
// the reply, ctx or the store's round-trip timeout. With the pipeline's
// queue full (or the store closing) it runs in a round trip of its own:
// what the caller marks is not lost to the read path's load.
func (s *Store) Script(ctx context.Context, script *redis.Script, keys []string, args ...any) error {
	calls := []call{{script: script, keys: keys, args: args}}
	err := s.do(ctx, calls, s.opts.RoundTripTimeout)
	if ownRoundTrip(err) {
		return script.Run(ctx, s.rdb, keys, args...).Err()
	}
	if err != nil {
		return err
	}
	return calls[0].err
}

// ScriptMerged is Script for a script that takes any number of keys,
// one per caller: the calls of one batch with the same group run as one
// command, KEYS the callers' keys in batch order and ARGV fixed followed
// by each caller's items in the same order (so every call of a group
// must bring the same fixed args and as many items). Each caller gets
// the whole reply. The group names the script and everything fixed; in
// a Redis cluster its keys must share a hash tag (one message's). The
// page's marks of what each reader did are one script call a batch
// instead of one a reader (issue 50).
func (s *Store) ScriptMerged(ctx context.Context, group string, script *redis.Script, key string, fixed []any, items ...any) error {
	calls := []call{mergedCall(group, script, key, fixed, items)}
	err := s.do(ctx, calls, s.opts.RoundTripTimeout)
	if ownRoundTrip(err) {
		return script.Run(ctx, s.rdb, calls[0].keys, calls[0].args...).Err()
	}
	if err != nil {
		return err
	}
	return calls[0].err
}

// mergedCall is ScriptMerged's call.
func mergedCall(group string, script *redis.Script, key string, fixed, items []any) call {
	args := append(append(make([]any, 0, len(fixed)+len(items)), fixed...), items...)
	return call{script: script, keys: []string{key}, args: args, fixed: len(fixed), merge: mergeKey{op: "merged:" + group, keyed: true}}
}

// Pipelined queues fn's commands on the store's shared pipeline, with
// the concurrent callers' marks and acks: no round trip of its own (the
// reading page's reads of a reader's marks, issue 50). It returns once they ran,
// each command's error in its own result, or with ctx's or the store's
// round-trip timeout's error, when fn's commands are not to be read.
// With the pipeline's queue full (or the store closing) they run in a
// round trip of their own. fn runs on another goroutine.
func (s *Store) Pipelined(ctx context.Context, fn func(p redis.Pipeliner)) error {
	err := s.do(ctx, []call{{queue: fn}}, s.opts.RoundTripTimeout)
	if ownRoundTrip(err) {
		p := s.rdb.Pipeline()
		fn(p)
		_, _ = p.Exec(ctx) // each command's error is its own
		return nil
	}
	return err
}

// ownRoundTrip reports whether a caller's commands go in a round trip
// of their own: the shared pipeline takes no more requests (its queue
// full, the store closing).
func ownRoundTrip(err error) bool {
	return errors.Is(err, ErrQueueFull) || errors.Is(err, ErrClosed)
}

// enqueue queues calls for a loop; the request's done says when they ran.
func (s *Store) enqueue(ctx context.Context, calls []call, deadline time.Time, failed func(error)) (*request, error) {
	r := &request{ctx: ctx, calls: calls, deadline: deadline, done: make(chan error, 1), failed: failed}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	select {
	case s.queue <- r:
		return r, nil
	default:
		s.m.queueFull.Inc()
		return nil, ErrQueueFull
	}
}

// loop collects requests into pipelines until the queue is closed and
// empty. It waits for nothing but the first request: what else is queued
// goes with it, and the next batch gathers while that pipeline is in
// flight, so batches grow with the load by themselves. A fixed linger for
// more callers (1.5 ms, and two loops) made fewer pipelines but was
// latency every callback waited: without it the 9:00 storm benchmark ran
// 18 % faster (12,800 → 15,200 callbacks/s) at the same CPU per callback
// (docs/benchmarks.md, issue 16).
func (s *Store) loop() {
	defer s.wg.Done()
	var batch []*request
	for {
		r, ok := <-s.queue
		if !ok {
			return
		}
		batch = append(batch[:0], r)
		n := len(r.calls)
	more:
		for n < s.opts.MaxBatch {
			select {
			case r, ok := <-s.queue:
				if !ok {
					break more
				}
				batch = append(batch, r)
				n += len(r.calls)
			default:
				break more
			}
		}
		s.runGuarded(batch)
		clear(batch)
	}
}

// runGuarded is run under a recover (issue 46): a panic in one pipeline
// answers its callers not answered yet with the *loop.PanicError (the
// receiver answers 503 and WeCom retries), calls their failed, and the
// loop goes on.
func (s *Store) runGuarded(batch []*request) {
	err := s.guard.Recover("redis pipeline", func() error { s.run(batch); return nil })
	if err == nil {
		return
	}
	for _, r := range batch {
		select {
		case r.done <- err:
			if r.failed != nil {
				r.failed(err)
			}
		default: // answered before the panic (done holds one answer)
		}
	}
}

// run sends the batch as one pipeline of EVALSHA, retrying with EVAL the
// calls Redis answered NOSCRIPT (a restarted or failed-over server).
func (s *Store) run(batch []*request) {
	live := batch[:0:0]
	now := time.Now()
	for _, r := range batch {
		err := r.ctx.Err()
		if err == nil && !r.deadline.IsZero() && now.After(r.deadline) {
			err = context.DeadlineExceeded
		}
		if err != nil {
			r.done <- err // the caller is gone or going: do not mark for it
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.RoundTripTimeout)
	defer cancel()
	start := time.Now()
	wires := s.wires(live)
	p := s.rdb.Pipeline()
	for _, w := range wires {
		w.cmd = w.send(ctx, p, false)
	}
	for _, r := range live {
		for i := range r.calls {
			if q := r.calls[i].queue; q != nil {
				q(p)
			}
		}
	}
	_, _ = p.Exec(ctx) // errors are read per command below
	var retry []*wire
	for _, w := range wires {
		if err := w.cmd.Err(); err != nil && w.c.script != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			retry = append(retry, w)
		}
	}
	if len(retry) > 0 {
		p := s.rdb.Pipeline()
		for _, w := range retry {
			w.cmd = w.send(ctx, p, true)
		}
		_, _ = p.Exec(ctx)
	}
	s.m.roundTrip.Observe(time.Since(start).Seconds())
	calls := 0
	for _, r := range live {
		calls += len(r.calls)
	}
	s.m.batchCalls.Observe(float64(calls))
	s.m.batchCmds.Observe(float64(len(wires)))
	for _, w := range wires {
		w.split()
	}
	for _, r := range live {
		var err error
		for i := range r.calls {
			if err = r.calls[i].err; err != nil {
				break
			}
		}
		if err != nil {
			s.m.redisErrors.Inc()
			s.logErr.Do(func() { s.log.Warn("redis pipeline failed", "err", err, "commands", len(wires)) })
			if r.failed != nil {
				r.failed(err)
			}
		}
		r.done <- err
	}
}

// wires turns the batch's calls into commands, merging calls with the
// same merge key (see call) in the order they were queued.
func (s *Store) wires(live []*request) []*wire {
	var wires []*wire
	byKey := map[mergeKey]*wire{}
	for _, r := range live {
		for i := range r.calls {
			c := &r.calls[i]
			if c.queue != nil {
				continue
			}
			if w := byKey[c.merge]; w != nil && c.merge.op != "" {
				w.parts = append(w.parts, part{c: c, off: len(w.args) - c.fixed, n: len(c.args) - c.fixed})
				w.args = append(w.args, c.args[c.fixed:]...)
				if c.merge.keyed {
					w.keys = append(w.keys, c.keys...)
				}
				continue
			}
			w := &wire{c: c, keys: c.keys, args: c.args, parts: []part{{c: c, n: len(c.args) - c.fixed}}}
			if c.merge.op != "" {
				w.args = slices.Clip(c.args) // appending must not write into the caller's slice
				w.keys = slices.Clip(c.keys)
				byKey[c.merge] = w
			}
			wires = append(wires, w)
		}
	}
	return wires
}

// send queues the wire's command on p: EVALSHA, EVAL (full) or HDEL.
func (w *wire) send(ctx context.Context, p redis.Pipeliner, full bool) *redis.Cmd {
	switch {
	case w.c.script == nil:
		return p.Do(ctx, append([]any{"HDEL", w.keys[0]}, w.args...)...)
	case full:
		return w.c.script.Eval(ctx, p, w.keys, w.args...)
	}
	return w.c.script.EvalSha(ctx, p, w.keys, w.args...)
}

// split hands each call of the wire its share of the reply: an array
// reply is cut into the calls' items, any other reply (a mark's 0 or -1
// for the whole message, HDEL's count) goes to each call whole.
func (w *wire) split() {
	v, err := w.cmd.Result()
	if len(w.parts) == 1 {
		w.parts[0].c.val, w.parts[0].c.err = v, err
		return
	}
	arr, isArr := v.([]any)
	for _, pt := range w.parts {
		pt.c.err = err
		switch {
		case err != nil:
		case isArr && pt.off+pt.n <= len(arr):
			pt.c.val = arr[pt.off : pt.off+pt.n]
		case isArr:
			pt.c.err = fmt.Errorf("bitmap: merged reply of %d items, call wants %d from %d", len(arr), pt.n, pt.off)
		default:
			pt.c.val = v
		}
	}
}
