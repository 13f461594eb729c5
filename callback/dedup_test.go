package callback

import (
	"context"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/testenv"
)

func TestRedisDedup(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	d := NewRedisDedup(rdb, prefix)
	ctx := context.Background()
	key := "zhangsan:1700000000:change_contact"
	if seen, err := d.Seen(ctx, key); err != nil || seen {
		t.Fatalf("Seen before Remember = %v, %v", seen, err)
	}
	testenv.Check(t, "Remember", d.Remember(ctx, key, time.Minute))
	if seen, err := d.Seen(ctx, key); err != nil || !seen {
		t.Errorf("Seen after Remember = %v, %v; want true", seen, err)
	}
	if seen, _ := d.Seen(ctx, key+"x"); seen {
		t.Errorf("Seen(other key) = true")
	}
	keys, err := rdb.Keys(ctx, prefix+":dd:*").Result()
	testenv.Check(t, "KEYS", err)
	if len(keys) != 1 {
		t.Fatalf("dedup keys under the prefix = %v; want one", keys)
	}
	if ttl := rdb.TTL(ctx, keys[0]).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("TTL = %v; want (0, 1m]", ttl)
	}
}
