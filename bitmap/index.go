package bitmap

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/yidu-io/yidu"
)

// indexSentinel is the app index member that says the index holds every
// active message of the app: after Redis lost data, a PutMessage alone
// must not make the index look complete.
const indexSentinel = ""

// sentScore is the app index score of a message: its send time rounded up
// to the second, so an enter_agent at CreateTime T (whole seconds) never
// claims a message sent later within that second.
func sentScore(t time.Time) int64 { return (t.UnixMilli() + 999) / 1000 }

// IndexApp adds msgs to the index of app (corpID, agentID) and drops
// entries older than TTL. complete says msgs are all the app's active
// messages (a rebuild from MySQL), which marks the index complete.
func (s *Store) IndexApp(ctx context.Context, corpID string, agentID int64, msgs []yidu.Message, complete bool) error {
	key := s.appKey(corpID, agentID, "msgs")
	members := make([]redis.Z, 0, len(msgs)+1)
	for _, m := range msgs {
		members = append(members, redis.Z{Score: float64(sentScore(m.SentAt)), Member: m.MsgID})
	}
	if complete {
		members = append(members, redis.Z{Score: 0, Member: indexSentinel})
	}
	horizon := time.Now().Add(-s.opts.TTL).Unix()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(members) > 0 {
			p.ZAdd(ctx, key, members...)
		}
		p.ZRemRangeByScore(ctx, key, "(0", strconv.FormatInt(horizon, 10))
		p.PExpire(ctx, key, s.opts.TTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("bitmap: index app %s/%d: %w", corpID, agentID, err)
	}
	return nil
}

// sinceScript returns whether the app index is complete, then the msgids
// sent in (cursor - slack, at] for the member.
var sinceScript = redis.NewScript(`
-- KEYS: app index, cursor hash; ARGV: uid, at (unix s), slack (s)
if not redis.call('ZSCORE', KEYS[1], '') then
  return {0}
end
local c = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local from = c - tonumber(ARGV[3])
if from < 0 then from = 0 end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', from), ARGV[2])
table.insert(ids, 1, 1)
return ids
`)

// MessagesSinceCursor returns the app's messages sent after the member's
// cursor (less slack, for messages indexed late) and at or before at.
// complete=false means the app index is not known to be complete (Redis
// lost it): rebuild it with IndexApp(..., true) and ask again.
func (s *Store) MessagesSinceCursor(ctx context.Context, corpID string, agentID int64, uid uint32, at time.Time, slack time.Duration) (msgIDs []string, complete bool, err error) {
	keys := []string{s.appKey(corpID, agentID, "msgs"), s.appKey(corpID, agentID, "cur")}
	v, err := sinceScript.Run(ctx, s.rdb, keys, uid, at.Unix(), int64(slack/time.Second)).Slice()
	if err != nil {
		return nil, false, fmt.Errorf("bitmap: messages since cursor %s/%d: %w", corpID, agentID, err)
	}
	if len(v) == 0 || v[0] != int64(1) {
		return nil, false, nil
	}
	msgIDs = make([]string, 0, len(v)-1)
	for _, x := range v[1:] {
		if id, ok := x.(string); ok && id != indexSentinel {
			msgIDs = append(msgIDs, id)
		}
	}
	return msgIDs, true, nil
}

// advanceScript moves a member's cursor forward only and refreshes the TTL.
var advanceScript = redis.NewScript(`
-- KEYS: cursor hash; ARGV: uid, at (unix s), ttl_ms
local c = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) > c then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return c
`)

// AdvanceCursor moves the member's enter_agent cursor to at unless it is
// already later.
func (s *Store) AdvanceCursor(ctx context.Context, corpID string, agentID int64, uid uint32, at time.Time) error {
	keys := []string{s.appKey(corpID, agentID, "cur")}
	if err := advanceScript.Run(ctx, s.rdb, keys, uid, at.Unix(), s.ttlMillis()).Err(); err != nil {
		return fmt.Errorf("bitmap: advance cursor %s/%d: %w", corpID, agentID, err)
	}
	return nil
}

// Cursor returns the member's enter_agent cursor (zero time when unset).
func (s *Store) Cursor(ctx context.Context, corpID string, agentID int64, uid uint32) (time.Time, error) {
	v, err := s.rdb.HGet(ctx, s.appKey(corpID, agentID, "cur"), strconv.FormatUint(uint64(uid), 10)).Int64()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("bitmap: cursor %s/%d: %w", corpID, agentID, err)
	}
	return time.Unix(v, 0), nil
}
