package page

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/yidu-io/yidu/notice"
)

// What is current (issues 46 and 50). An event is decided against the
// notice as it is when the event arrives, not when the page was served:
// the latest version and the material one (an acknowledgement of a
// version older than the material one is stale, 409 stale_version).
// Every receiver must see a new version at once, and the page must cost
// no MySQL, so the numbers are one Redis key per notice,
// page:current:{corp/msgid} = "latest:material", written by whoever
// publishes a version (CurrentVersions.Published, wired around
// notice.Store in cmd) and read on every request. The key lives
// currentTTL: a write that failed is healed from MySQL within it. A fill
// from MySQL and a publication may race; the key only ever moves
// forward (the larger latest wins), so the fill never hides a version.
//
// A version itself never changes (notice: "No version is ever changed"),
// so each receiver keeps the versions it served in memory, and the page
// of each (version, latest, what the reader did) rendered once.

// currentTTL is how long the current-version key lives between writes.
const currentTTL = time.Minute

// CurrentVersions keeps each notice's current version numbers in Redis.
type CurrentVersions struct {
	rdb    redis.UniversalClient
	prefix string
}

// NewCurrentVersions returns the current version numbers in rdb under
// prefix (redis.prefix).
func NewCurrentVersions(rdb redis.UniversalClient, prefix string) *CurrentVersions {
	return &CurrentVersions{rdb: rdb, prefix: prefix}
}

func (c *CurrentVersions) key(corp, msgid string) string {
	return c.prefix + "page:current:{" + corp + "/" + msgid + "}"
}

// forward sets the key unless it holds a later version.
var forward = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local l = tonumber(string.match(cur, '^(%d+):'))
  if l and l > tonumber(ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
return 1`)

// Published records that corp's msgid now has latest versions, material
// the latest one that asked to be acknowledged again (notice.Material).
// Every receiver's page decides by it from its next request on.
func (c *CurrentVersions) Published(ctx context.Context, corp, msgid string, latest, material int) error {
	if latest < 1 || material < 1 || material > latest {
		return fmt.Errorf("page: current version of %s: %d, material %d", msgid, latest, material)
	}
	err := forward.Run(ctx, c.rdb, []string{c.key(corp, msgid)}, latest, material, currentTTL.Milliseconds()).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("page: current version of %s: %w", msgid, err)
	}
	return nil
}

// current is a notice's version numbers as they are now.
type current struct{ Latest, Material int }

// parseCurrent reads a GET of the key: found false when it is missing
// (or not ours: filled again).
func parseCurrent(v string, err error, msgid string) (current, bool, error) {
	if errors.Is(err, redis.Nil) {
		return current{}, false, nil
	}
	if err != nil {
		return current{}, false, fmt.Errorf("page: current version of %s: %w", msgid, err)
	}
	l, m, ok := strings.Cut(v, ":")
	latest, err1 := strconv.Atoi(l)
	material, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || latest < 1 || material < 1 {
		return current{}, false, nil
	}
	return current{latest, material}, true, nil
}

// memo keeps what never changes: versions, notices' apps and rendered
// pages, each bounded (emptied when full: a receiver serves a few
// notices at a time).
type memo[K comparable, V any] struct {
	mu  sync.RWMutex
	max int
	m   map[K]V
}

func newMemo[K comparable, V any](max int) *memo[K, V] {
	return &memo[K, V]{max: max, m: map[K]V{}}
}

func (c *memo[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memo[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[k] = v
}

type versionKey struct {
	corp, msgid string
	n           int
}

// versions answers a notice's versions from memory, Redis's current
// numbers and, once per version and receiver, MySQL.
type versions struct {
	notices Notices
	cur     *CurrentVersions
	byN     *memo[versionKey, notice.Version]
	fill    singleflight.Group
}

// currentOr returns msgid's version numbers now, given the GET of its
// key (c, ok, err; read in a round trip of the caller's): the key's, else
// (missing or Redis failing) MySQL's versions, written back to the key.
func (v *versions) currentOr(ctx context.Context, corp, msgid string, c current, ok bool, err error) (current, error) {
	if ok {
		return c, nil
	}
	redisDown := err != nil
	got, err, _ := v.fill.Do(corp+"/"+msgid, func() (any, error) {
		all, err := v.notices.List(ctx, corp, msgid)
		if err != nil {
			return current{}, err
		}
		if len(all) == 0 {
			return current{}, fmt.Errorf("notice %s: %w", msgid, notice.ErrNotFound)
		}
		for _, x := range all {
			v.byN.put(versionKey{corp, msgid, x.N}, x)
		}
		c := current{Latest: all[len(all)-1].N, Material: notice.Material(all)}
		if !redisDown {
			_ = v.cur.Published(ctx, corp, msgid, c.Latest, c.Material) // a failure is filled again next time
		}
		return c, nil
	})
	if err != nil {
		return current{}, err
	}
	return got.(current), nil
}

// get returns version n of msgid (n ≥ 1).
func (v *versions) get(ctx context.Context, corp, msgid string, n int) (notice.Version, error) {
	k := versionKey{corp, msgid, n}
	if x, ok := v.byN.get(k); ok {
		return x, nil
	}
	x, err := v.notices.Get(ctx, corp, msgid, n)
	if err != nil {
		return notice.Version{}, err
	}
	v.byN.put(k, x)
	return x, nil
}
