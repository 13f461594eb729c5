package bitmap

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
)

// Outcome is what Mark did with one (message, signal, uid).
type Outcome uint8

// Outcomes of Mark. Only OutcomeNew and OutcomeNewUncounted oblige the
// caller to publish a delta and then Ack (or Release on failure).
const (
	// OutcomeMissing: the message is not in Redis; restore it and retry.
	OutcomeMissing Outcome = iota
	// OutcomeNew: the signal bit was set now, or an earlier attempt's
	// lease expired before its delta was acknowledged; the signal counts
	// as read (the read bit is set too): publish a counted delta.
	OutcomeNew
	// OutcomeDuplicate: the member gave this signal before and its delta
	// was acknowledged.
	OutcomeDuplicate
	// OutcomeInFlight: the member gave this signal before; another
	// attempt holds the lease and owns the delta.
	OutcomeInFlight
	// OutcomeNotRecipient: the uid is not a recipient of the message.
	OutcomeNotRecipient
	// OutcomeOtherApp: the message was sent by another agent.
	OutcomeOtherApp
	// OutcomeNewUncounted: like OutcomeNew for a signal that does not
	// count as read (the read bit is left alone): publish a delta that is
	// not counted.
	OutcomeNewUncounted
)

// New reports whether o obliges the caller to publish a delta.
func (o Outcome) New() bool { return o == OutcomeNew || o == OutcomeNewUncounted }

// String returns the outcome's name.
func (o Outcome) String() string {
	switch o {
	case OutcomeMissing:
		return "missing"
	case OutcomeNew:
		return "new"
	case OutcomeDuplicate:
		return "duplicate"
	case OutcomeInFlight:
		return "in_flight"
	case OutcomeNotRecipient:
		return "not_recipient"
	case OutcomeOtherApp:
		return "other_app"
	case OutcomeNewUncounted:
		return "new_uncounted"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Target names uids of one message and the signal they gave. AgentID,
// when not zero, must be the message's agent (a card event of another app
// never marks it). Counted says the signal makes the message read for its
// app (yidu.App.CountsAsRead).
type Target struct {
	CorpID  string
	MsgID   string
	AgentID int64
	Signal  yidu.Signal
	Counted bool
	UIDs    []uint32
}

// markScript is step 1 of the read path (see the package doc): per uid, a
// recipient's first signal of its kind sets the signal bit, with a counted
// signal the read bit, and a lease in the pending hash under
// "<uid>:<signal>" whose value is the deadline (unix ms) followed by 'c'
// (counted) or 'u', so a re-emission carries what the first attempt
// decided. The reply is 0 (message missing), -1 (other app) or one Outcome
// code per uid. Bit values are passed as the string '1': Redis formats a
// Lua number argument as a double, which made the script 4-10 % dearer
// (BenchmarkMarkScriptForms, %numbers).
var markScript = redis.NewScript(markScriptSrc)

const markScriptSrc = `
-- KEYS: rcpt, read, pend, meta, the signal's bitmap, the other signals' bitmaps
-- ARGV: ttl_ms, lease_ms, agent_id or '', signal code, counted ('1' or '0'), uid...
local rcpt, read, pend, meta, sig = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if redis.call('EXISTS', rcpt) == 0 then
  return 0
end
if ARGV[3] ~= '' and redis.call('HGET', meta, 'agent_id') ~= ARGV[3] then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = string.format('%d', now + tonumber(ARGV[2]))
local field = ':' .. ARGV[4]
local counted = ARGV[5] == '1'
-- The message's read rule (issue 39), when not the app's: only its one
-- signal counts.
local rule = redis.call('HGET', meta, 'rule')
if rule and rule ~= '0' then
  counted = rule == ARGV[4]
end
local mode = counted and 'c' or 'u'
local out = {}
local touched = false
for i = 6, #ARGV do
  local uid = ARGV[i]
  local r
  if redis.call('GETBIT', rcpt, uid) == 0 then
    r = 4
  elseif redis.call('SETBIT', sig, uid, '1') == 0 then
    if counted then
      redis.call('SETBIT', read, uid, '1')
      r = 1
    else
      r = 6
    end
    redis.call('HSET', pend, uid .. field, lease .. mode)
    touched = true
  else
    local d = redis.call('HGET', pend, uid .. field)
    if not d then
      r = 2
    elseif tonumber(string.sub(d, 1, -2)) <= now then
      local m = string.sub(d, -1)
      redis.call('HSET', pend, uid .. field, lease .. m)
      if m == 'c' then
        redis.call('SETBIT', read, uid, '1')
        r = 1
      else
        r = 6
      end
      touched = true
    else
      r = 3
    end
  end
  out[#out + 1] = r
end
if touched then
  -- Refresh every key's TTL at most once a minute (TTL/100 if shorter):
  -- PEXPIRE, replicated, is most of a mark's cost. Between refreshes only
  -- a key this call created (no TTL yet) gets one.
  local ttl = tonumber(ARGV[1])
  if redis.call('PTTL', rcpt) < ttl - math.min(ttl / 100, 60000) then
    for _, k in ipairs(KEYS) do
      redis.call('PEXPIRE', k, ARGV[1])
    end
  else
    for _, k in ipairs({sig, read, pend}) do
      if redis.call('PTTL', k) == -1 then
        redis.call('PEXPIRE', k, ARGV[1])
      end
    end
  end
end
return out
`

// releaseScript expires the leases of an attempt that failed to publish,
// so a WeCom retry re-emits at once instead of waiting for the lease; the
// lease keeps its counted mark.
var releaseScript = redis.NewScript(`
-- KEYS: pend; ARGV: field ("<uid>:<signal>")...
for i = 1, #ARGV do
  local d = redis.call('HGET', KEYS[1], ARGV[i])
  if d then
    redis.call('HSET', KEYS[1], ARGV[i], '0' .. string.sub(d, -1))
  end
end
return 1
`)

func uidArgs(prefix []any, uids []uint32) []any {
	args := make([]any, 0, len(prefix)+len(uids))
	args = append(args, prefix...)
	for _, u := range uids {
		args = append(args, u)
	}
	return args
}

// pendField is the pending hash field of uid's signal sig.
func pendField(uid uint32, sig yidu.Signal) string {
	return strconv.FormatUint(uint64(uid), 10) + ":" + strconv.Itoa(int(sig))
}

// Mark sets the signal bits of targets, and the read bits of counted
// signals, in one pipelined round trip shared with concurrent callers: one
// script call per target. out[i][j] is the outcome of targets[i].UIDs[j].
// Every new outcome (Outcome.New) must be published and then passed to Ack,
// or to Release when publishing failed.
func (s *Store) Mark(ctx context.Context, targets []Target) ([][]Outcome, error) {
	return s.MarkWithin(ctx, targets, 0)
}

// MarkWithin is Mark bounded by timeout as well (0: by ctx alone); past
// it the error is context.DeadlineExceeded. It is a
// context.WithTimeout without the context: the read path's mark, once per
// callback, spent a sixth of its allocations on one.
func (s *Store) MarkWithin(ctx context.Context, targets []Target, timeout time.Duration) ([][]Outcome, error) {
	calls, err := s.markCalls(targets)
	if err != nil {
		return nil, err
	}
	if err := s.do(ctx, calls, timeout); err != nil {
		return nil, fmt.Errorf("bitmap: mark: %w", err)
	}
	return markOutcomes(targets, calls)
}

// markCalls returns the script calls that mark targets, one per target.
func (s *Store) markCalls(targets []Target) ([]call, error) {
	calls := make([]call, len(targets))
	for i, t := range targets {
		if !t.Signal.Valid() {
			return nil, fmt.Errorf("bitmap: mark %s/%s: invalid signal %d", t.CorpID, t.MsgID, t.Signal)
		}
		calls[i] = call{
			script: markScript,
			keys:   s.hotKeys(t.CorpID, t.MsgID).mark[t.Signal.Index()],
			args:   uidArgs([]any{s.markTTL, s.markLease, agentArg(t.AgentID), int(t.Signal), countedArg(t.Counted)}, t.UIDs),
			// Marks of one message, signal, agent and decision share
			// one script call in a pipeline (see run).
			merge: mergeKey{op: opMark, msg: msgRef{t.CorpID, t.MsgID}, agent: t.AgentID, signal: t.Signal, counted: t.Counted},
			fixed: 5,
		}
	}
	return calls, nil
}

// markOutcomes reads the replies of markCalls(targets).
func markOutcomes(targets []Target, calls []call) ([][]Outcome, error) {
	out := make([][]Outcome, len(targets))
	for i, t := range targets {
		o, err := parseMark(calls[i].val, len(t.UIDs))
		if err != nil {
			return nil, fmt.Errorf("bitmap: mark %s/%s: %w", t.CorpID, t.MsgID, err)
		}
		out[i] = o
	}
	return out, nil
}

func parseMark(v any, n int) ([]Outcome, error) {
	out := make([]Outcome, n)
	switch v := v.(type) {
	case int64:
		all := OutcomeMissing
		if v == -1 {
			all = OutcomeOtherApp
		} else if v != 0 {
			return nil, fmt.Errorf("unexpected reply %d", v)
		}
		for j := range out {
			out[j] = all
		}
		return out, nil
	case []any:
		if len(v) != n {
			return nil, fmt.Errorf("%d replies for %d uids", len(v), n)
		}
		for j, x := range v {
			c, ok := x.(int64)
			if !ok || c < int64(OutcomeNew) || c > int64(OutcomeNewUncounted) || c == int64(OutcomeOtherApp) {
				return nil, fmt.Errorf("unexpected reply %v", x)
			}
			out[j] = Outcome(c)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %T", v)
}

// Ack clears the pending entries of signals whose deltas Kafka
// acknowledged (each target's Signal and UIDs): a plain HDEL, one per
// message in a pipeline however many callers ack at once.
func (s *Store) Ack(ctx context.Context, targets []Target) error {
	return s.pendingOp(ctx, "ack", nil, targets)
}

// Release gives up the leases of signals whose deltas could not be
// published, so the next attempt re-emits them without waiting.
func (s *Store) Release(ctx context.Context, targets []Target) error {
	return s.pendingOp(ctx, "release", releaseScript, targets)
}

// AckAsync is Ack without waiting for Redis: it queues the HDELs, to
// share the next pipeline with other callers' marks, and returns. The
// read path calls it once Kafka acknowledged the deltas, so the 200 does
// not wait for a round trip that only tidies up: an ack that is lost (the
// queue full or closed, a Redis error, the process gone) leaves leases that
// expire by themselves (Options.Lease), after which a repeated signal is
// re-emitted once and flushd ignores it. The error says it was not queued.
// failed, when not nil, is called from the queue loop if Redis fails them.
func (s *Store) AckAsync(targets []Target, failed func(error)) error {
	calls := s.pendingCalls("ack", nil, targets)
	if len(calls) == 0 {
		return nil
	}
	if _, err := s.enqueue(context.Background(), calls, time.Time{}, failed); err != nil {
		return fmt.Errorf("bitmap: ack: %w", err)
	}
	return nil
}

// pendingOp runs script (nil: HDEL) on the pending fields of targets.
func (s *Store) pendingOp(ctx context.Context, what string, script *redis.Script, targets []Target) error {
	calls := s.pendingCalls(what, script, targets)
	if len(calls) == 0 {
		return nil
	}
	if err := s.do(ctx, calls, 0); err != nil {
		return fmt.Errorf("bitmap: %s: %w", what, err)
	}
	return nil
}

// pendingCalls returns the calls of pendingOp.
func (s *Store) pendingCalls(what string, script *redis.Script, targets []Target) []call {
	calls := make([]call, 0, len(targets))
	for _, t := range targets {
		if len(t.UIDs) == 0 {
			continue
		}
		fields := make([]any, len(t.UIDs))
		for j, u := range t.UIDs {
			fields[j] = pendField(u, t.Signal)
		}
		calls = append(calls, call{
			script: script,
			keys:   []string{s.hotKeys(t.CorpID, t.MsgID).pend},
			args:   fields,
			merge:  mergeKey{op: what, msg: msgRef{t.CorpID, t.MsgID}},
		})
	}
	return calls
}

const opMark = "mark"

// agentArg and countedArg are the mark script's ARGV of an agent (""
// for none) and of the counted decision.
func agentArg(agentID int64) string {
	if agentID == 0 {
		return ""
	}
	return strconv.FormatInt(agentID, 10)
}

func countedArg(counted bool) any {
	if counted {
		return argOne
	}
	return argZero
}

// argOne and argZero are boxed once: a string made an interface value
// allocates.
var argOne, argZero any = "1", "0"
