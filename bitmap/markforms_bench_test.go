package bitmap

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/testenv"
)

// markBitfieldScript is markScript with the bit commands batched: one
// BITFIELD per key for all of a call's uids instead of a GETBIT/SETBIT per
// uid, the leases read with one HMGET and written with one HSET. It gives
// the same replies (BenchmarkMarkScriptForms checks every call). It is not
// used: in Redis it costs more than markScript (see the benchmark and
// docs/benchmarks.md), because a BITFIELD operation costs Redis about what
// a GETBIT/SETBIT call does, and its arguments are built in Lua.
var markBitfieldScript = redis.NewScript(markBitfieldSrc)

const markBitfieldSrc = `
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
local mode = ARGV[5] == '1' and 'c' or 'u'
-- Commands over many uids go in chunks that unpack can take; the bit
-- commands are one BITFIELD a chunk (on a server without it, one
-- GETBIT/SETBIT a uid). Each returns the bits' values before the call.
local bitfield = true
local function bits(key, op, uids)
  local out, i = {}, 1
  while bitfield and i <= #uids do
    local a = {}
    for j = i, math.min(i + 999, #uids) do
      a[#a + 1] = op
      a[#a + 1] = 'u1'
      a[#a + 1] = uids[j]
      if op == 'SET' then a[#a + 1] = 1 end
    end
    local r = redis.pcall('BITFIELD', key, unpack(a))
    if r.err then
      if not string.find(string.lower(r.err), 'unknown', 1, true) then
        error(r)
      end
      bitfield = false
    else
      for _, v in ipairs(r) do out[#out + 1] = v end
      i = i + 1000
    end
  end
  for j = i, #uids do
    if op == 'SET' then
      out[#out + 1] = redis.call('SETBIT', key, uids[j], 1)
    else
      out[#out + 1] = redis.call('GETBIT', key, uids[j])
    end
  end
  return out
end
local function chunked(cmd, key, args, step)
  local out = {}
  for i = 1, #args, step do
    local r = redis.call(cmd, key, unpack(args, i, math.min(i + step - 1, #args)))
    if type(r) == 'table' then
      for _, v in ipairs(r) do out[#out + 1] = v end
    end
  end
  return out
end
local uids = {}
for i = 6, #ARGV do uids[#uids + 1] = ARGV[i] end
local isr = bits(rcpt, 'GET', uids)
local rc = {}
for j = 1, #uids do
  if isr[j] == 1 then rc[#rc + 1] = uids[j] end
end
local old = bits(sig, 'SET', rc)
-- The leases of signals given before, read before this call takes any.
local seen = {}
for k = 1, #rc do
  if old[k] == 1 then seen[#seen + 1] = rc[k] .. field end
end
local held = {}
if #seen > 0 then held = chunked('HMGET', pend, seen, 1000) end
local out, taken, reads, leases = {}, {}, {}, {}
local k, s = 0, 0
for j = 1, #uids do
  local uid, r = uids[j], 4
  if isr[j] == 1 then
    k = k + 1
    local m
    if old[k] == 1 then
      s = s + 1
      local d = held[s]
      if taken[uid] then
        r = 3 -- taken earlier in this call
      elseif not d then
        r = 2
      elseif tonumber(string.sub(d, 1, -2)) <= now then
        m = string.sub(d, -1)
      else
        r = 3
      end
    else
      m = mode
    end
    if m then
      taken[uid] = true
      leases[#leases + 1] = uid .. field
      leases[#leases + 1] = lease .. m
      if m == 'c' then
        reads[#reads + 1] = uid
        r = 1
      else
        r = 6
      end
    end
  end
  out[j] = r
end
if #leases > 0 then
  bits(read, 'SET', reads)
  chunked('HSET', pend, leases, 1000)
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

// markNumberArgsScript is markScript as it was before its bit values were
// passed as strings: a Lua number argument to redis.call is formatted by
// Redis as a double ("%.17g"): vfprintf and its callees were ~4 % of
// Redis's CPU in the 9:00 storm (perf, 2026-12-02).
var markNumberArgsScript = redis.NewScript(strings.ReplaceAll(markScriptSrc, "uid, '1')", "uid, 1)"))

// markBitfieldStringScript is markBitfieldScript with its SET values and
// bit commands' values passed as strings.
var markBitfieldStringScript = redis.NewScript(strings.ReplaceAll(strings.ReplaceAll(markBitfieldSrc,
	"a[#a + 1] = 1 end", "a[#a + 1] = '1' end"), "uids[j], 1)", "uids[j], '1')"))

// BenchmarkMarkScriptForms runs markScript, markBitfieldScript and their
// variants (markNumberArgsScript, markBitfieldStringScript) on four
// messages alike, a block of calls of 8 new recipients' uids each per form
// and iteration, and reports what Redis spent in each (INFO commandstats,
// EVALSHA time per uid) and each form's time as a share of markScript's
// (%bitfield, %numbers, %bitfield-strings). The calls go straight to
// Redis, one at a time, so the figures are Redis's work alone.
func BenchmarkMarkScriptForms(b *testing.B) {
	s, rdb := mustStore(b, Options{})
	ctx := context.Background()
	const perCall, block = 8, 50
	forms := []struct {
		name   string
		script *redis.Script
		msg    string
		usec   float64
	}{
		{name: "getbit", script: markScript, msg: "fa"},
		{name: "bitfield", script: markBitfieldScript, msg: "fb"},
		{name: "getbit-numbers", script: markNumberArgsScript, msg: "fc"},
		{name: "bitfield-strings", script: markBitfieldStringScript, msg: "fd"},
	}
	const members = 1 << 22
	for i := range forms {
		testenv.Check(b, "PutMessage", s.PutMessage(ctx, testMessage(forms[i].msg, 7, time.Now()), rangeBitmap(0, members)))
		testenv.Check(b, "Load", forms[i].script.Load(ctx, rdb).Err())
	}
	evalsha := regexp.MustCompile(`cmdstat_evalsha:calls=\d+,usec=(\d+)`)
	usec := func() float64 {
		info, err := rdb.Info(ctx, "commandstats").Result()
		testenv.Check(b, "INFO", err)
		m := evalsha.FindStringSubmatch(info)
		if m == nil {
			b.Fatal("INFO commandstats has no evalsha line")
		}
		v, err := strconv.ParseFloat(m[1], 64)
		testenv.Check(b, "usec", err)
		return v
	}
	next, uidsDone := uint32(0), 0
	b.ResetTimer()
	for b.Loop() {
		if next+perCall*block > members {
			b.Fatal("benchmark ran out of recipients; raise members")
		}
		first := next
		for i := range forms {
			f := &forms[i]
			keys := s.hotKeys(testCorp, f.msg).mark[yidu.SignalButton.Index()]
			u := first
			before := usec()
			for range block {
				args := []any{s.ttlMillis(), s.opts.Lease.Milliseconds(), "7", int(yidu.SignalButton), "1"}
				for range perCall {
					args = append(args, u)
					u++
				}
				v, err := f.script.EvalSha(ctx, rdb, keys, args...).Result()
				testenv.Check(b, f.name, err)
				out, err := parseMark(v, perCall)
				testenv.Check(b, f.name+" reply", err)
				if want := slices.Repeat([]Outcome{OutcomeNew}, perCall); !slices.Equal(out, want) {
					b.Fatalf("%s: %v; want %v", f.name, out, want)
				}
			}
			f.usec += usec() - before
			next = u
		}
		uidsDone += perCall * block
	}
	for _, f := range forms {
		b.ReportMetric(f.usec/float64(uidsDone), f.name+"-redis-µs/uid")
	}
	b.ReportMetric(100*forms[1].usec/forms[0].usec, "%bitfield")
	b.ReportMetric(100*forms[2].usec/forms[0].usec, "%numbers")
	b.ReportMetric(100*forms[3].usec/forms[0].usec, "%bitfield-strings")
}
