package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func startRedis(tb testing.TB) (*Servers, *redis.Client) {
	tb.Helper()
	s, err := Start(context.Background(), Options{})
	if err != nil {
		tb.Fatalf("Start: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	c := redis.NewClient(&redis.Options{Addr: s.RedisAddr})
	tb.Cleanup(func() { c.Close() })
	return s, c
}

// markRead is the shape of the read path's script: set the read bit only for
// a recipient, and index the message by time.
var markRead = redis.NewScript(`
local rcpt = redis.call('GETBIT', KEYS[1], ARGV[1])
if rcpt == 0 then return {0, redis.call('BITCOUNT', KEYS[2])} end
local old = redis.call('SETBIT', KEYS[2], ARGV[1], 1)
redis.call('HSET', KEYS[3], 'last_read', ARGV[2], 'title', ARGV[3])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[2], ARGV[5])
return {1 - old, redis.call('BITCOUNT', KEYS[2])}
`)

func TestRedisLuaAndBitmaps(t *testing.T) {
	s, c := startRedis(t)
	ctx := context.Background()
	keys := []string{"p:rcpt", "p:read", "p:meta", "p:byapp"}
	for _, uid := range []int64{0, 9, 100000} {
		if err := c.SetBit(ctx, keys[0], uid, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Redis bit order: offset 0 is the high bit of byte 0 (bitmap.Store relies on it).
	if got, err := c.GetRange(ctx, keys[0], 0, 1).Result(); err != nil || got != "\x80\x40" {
		t.Errorf("GETRANGE of bits 0 and 9 = %q, %v; want %q", got, err, "\x80\x40")
	}

	tests := []struct {
		name      string
		uid       int64
		wantNew   int64
		wantCount int64
	}{
		{"recipient", 9, 1, 1},
		{"repeat", 9, 0, 1},
		{"not a recipient", 5, 0, 1},
		{"far uid", 100000, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Run uses EVALSHA and falls back to EVAL on NOSCRIPT.
			res, err := markRead.Run(ctx, c, keys, tt.uid, 1700000000+tt.uid, "通知", "m1", 3600).Int64Slice()
			if err != nil {
				t.Fatalf("script: %v", err)
			}
			if res[0] != tt.wantNew || res[1] != tt.wantCount {
				t.Errorf("markRead(%d) = %v; want [%d %d]", tt.uid, res, tt.wantNew, tt.wantCount)
			}
		})
	}
	if ok, err := markRead.Exists(ctx, c).Result(); err != nil || !ok[0] {
		t.Errorf("SCRIPT EXISTS after Run = %v, %v; want true", ok, err)
	}

	// GET of the whole bitmap string.
	b, err := c.Get(ctx, keys[1]).Bytes()
	if err != nil || len(b) != 100000/8+1 || b[1] != 0x40 || b[100000/8] != 0x80 {
		t.Errorf("GET read bitmap: len %d, err %v; want %d bytes with bits 9 and 100000", len(b), err, 100000/8+1)
	}
	if n, err := c.BitCount(ctx, keys[1], nil).Result(); err != nil || n != 2 {
		t.Errorf("BITCOUNT = %d, %v; want 2", n, err)
	}
	// BITOP OR merges a restored read bitmap without clearing bits.
	c.SetBit(ctx, "p:restored", 3, 1)
	if err := c.BitOpOr(ctx, keys[1], keys[1], "p:restored").Err(); err != nil {
		t.Fatalf("BITOP OR: %v", err)
	}
	if n, _ := c.BitCount(ctx, keys[1], nil).Result(); n != 3 {
		t.Errorf("BITCOUNT after BITOP OR = %d; want 3", n)
	}
	if got, err := c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: keys[3], Start: "1700000000", Stop: "+inf", ByScore: true}).Result(); err != nil || len(got) != 1 || got[0] != "m1" {
		t.Errorf("ZRANGEBYSCORE = %v, %v; want [m1]", got, err)
	}
	if got, err := c.HGetAll(ctx, keys[2]).Result(); err != nil || got["title"] != "通知" || got["last_read"] != "1700100000" {
		t.Errorf("HGETALL = %v, %v", got, err)
	}
	// TTLs move only with miniredis's clock: tests fast-forward it.
	if ttl := s.Redis.TTL(keys[1]); ttl != time.Hour {
		t.Errorf("TTL after EXPIRE = %v; want 1h", ttl)
	}
	s.Redis.FastForward(time.Hour + time.Second)
	if n, _ := c.Exists(ctx, keys[1]).Result(); n != 0 {
		t.Errorf("read bitmap exists after its TTL")
	}
}

func TestRedisPipelineAndDedupe(t *testing.T) {
	_, c := startRedis(t)
	ctx := context.Background()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 100 {
			p.SetBit(ctx, "p:bits", int64(i*3), 1)
		}
		p.BitCount(ctx, "p:bits", nil)
		p.SetNX(ctx, "p:seen:a", 1, time.Minute)
		p.SetNX(ctx, "p:seen:a", 1, time.Minute)
		return nil
	})
	if err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if n := cmds[100].(*redis.IntCmd).Val(); n != 100 {
		t.Errorf("BITCOUNT in pipeline = %d; want 100", n)
	}
	if a, b := cmds[101].(*redis.BoolCmd).Val(), cmds[102].(*redis.BoolCmd).Val(); !a || b {
		t.Errorf("SET NX twice = %v, %v; want true, false", a, b)
	}
	// A MULTI/EXEC transaction pipeline too.
	if _, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, "p:h", "a", 1, "b", 2)
		p.Expire(ctx, "p:h", time.Minute)
		return nil
	}); err != nil {
		t.Fatalf("TxPipelined: %v", err)
	}
	if n, _ := c.HLen(ctx, "p:h").Result(); n != 2 {
		t.Errorf("HLEN after MULTI = %d; want 2", n)
	}
}
