// Package idmap maps WeCom UserIDs to dense per-corp uids (0, 1, 2, …), so a
// message's Redis bitmap costs about employees/8 bytes, and keeps the
// directory (departments, memberships) that audiences are expanded from.
//
// MySQL is the source of truth. Every new uid is handed out inside a
// transaction that holds the corp's uid_seq row lock and re-reads users under
// it, so all receiver and flushd instances agree on the mapping and uids stay
// exactly dense (max(uid)+1 == number of users) however many instances race
// on the same new UserID. A process-wide cache answers hits without the
// database; a miss costs one round trip and concurrent misses for one
// UserID collapse into one query.
//
// UserIDs are compared as WeCom compares them, case-insensitively:
// everything is keyed by yidu.UserID.Fold (users.userid_key in MySQL, the
// cache's keys in memory), so "ZhangSan" in a callback is the member the
// directory lists as "zhangsan". users.userid keeps the spelling first seen.
// A hit folds into a stack buffer and allocates nothing.
package idmap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/jitter"
	"github.com/yidu-io/yidu/internal/opt"
)

// Sentinel errors for input that can never be stored; callers map them to a
// client error, never retry them.
var (
	// ErrInvalidCorpID: not a yidu.CorpID.
	ErrInvalidCorpID = errors.New("idmap: invalid corp id")
	// ErrInvalidUserID: a UserID users.userid cannot hold
	// (yidu.UserID.Storable: empty, longer than 64 bytes, not UTF-8 or
	// ending in a space).
	ErrInvalidUserID = errors.New("idmap: invalid userid")
)

// chunkSize bounds the ids of one statement (and the new ids of one
// transaction), keeping packets small and the uid_seq lock short.
const chunkSize = 1000

// lookupTimeout bounds the shared query of a collapsed cache miss: it runs
// detached from any single caller's context so one caller giving up does not
// fail the others.
const lookupTimeout = 5 * time.Second

// Mapper maps UserIDs to uids for every corp. It is safe for concurrent use.
type Mapper struct {
	db      *sql.DB
	log     *slog.Logger
	metrics *metrics
	seed    maphash.Seed
	corps   sync.Map // corp_id → *corpCache
	sf      singleflight.Group
	indexes indexCache // per corp, the directory Index of the last version read
	rosters sync.Map   // corp_id → *rosterState (roster.go)
	revoker Revoker
	now     func() time.Time
}

// Revoker ends what members who left still hold: their reading page
// sessions (page.Sessions). Declared here, where members leave.
type Revoker interface {
	Revoke(ctx context.Context, corpID string, uids []uint32) error
}

// revoke tells the roster and the Revoker that uids left; a failure is
// logged (the member is left in MySQL: the page asks again at their next
// sign-in).
func (m *Mapper) revoke(ctx context.Context, corpID string, uids []uint32) {
	if len(uids) > 0 {
		m.rosterMoved(corpID, uids)
	}
	if m.revoker == nil || len(uids) == 0 {
		return
	}
	if err := m.revoker.Revoke(ctx, corpID, uids); err != nil {
		m.log.ErrorContext(ctx, "idmap: sessions of members who left not ended", "corp", corpID, "members", len(uids), "err", err)
	}
}

const shardCount = 64

// corpCache is one corp's UserID → uid cache. Sharded read-write locks keep
// hits parallel and never behind a miss: misses do their database work
// without any lock and take a shard's write lock only to store the answer.
type corpCache struct {
	shards [shardCount]shard
	// seqReady records that this corp's uid_seq row is known to exist.
	seqReady atomic.Bool
	seqMu    sync.Mutex

	mu      sync.Mutex
	pending map[string]*call // folded UserIDs being created by some Assign
}

// shard maps folded UserIDs (yidu.UserID.Fold) to uids.
type shard struct {
	mu sync.RWMutex
	m  map[string]uint32
}

// call is one in-flight creation of a UserID; waiters read uid/err after done.
type call struct {
	done chan struct{}
	uid  uint32
	err  error
}

// Options configure a Mapper (and a Syncer).
type Options struct {
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers them nowhere.
	Registerer prometheus.Registerer
	// Revoker, when set, is told of members who leave (sync, delete_user).
	Revoker Revoker
	// Now is the clock of the roster's version checks (time.Now if nil).
	Now func() time.Time
}

// New returns a Mapper over db (the migrated yidu schema).
func New(db *sql.DB, opts Options) (*Mapper, error) {
	if db == nil {
		return nil, errors.New("idmap: a database is required")
	}
	opt.Logger(&opts.Logger)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Mapper{
		db:      db,
		log:     opts.Logger.With("component", "idmap"),
		metrics: met,
		seed:    maphash.MakeSeed(),
		revoker: opts.Revoker,
		now:     opts.Now,
	}, nil
}

func (m *Mapper) corp(corpID string) *corpCache {
	if c, ok := m.corps.Load(corpID); ok {
		return c.(*corpCache)
	}
	c := &corpCache{pending: map[string]*call{}}
	for i := range c.shards {
		c.shards[i].m = map[string]uint32{}
	}
	actual, _ := m.corps.LoadOrStore(strings.Clone(corpID), c)
	return actual.(*corpCache)
}

// fold is the key of userID everywhere in idmap (yidu.UserID.Fold).
func fold(userID string) string { return yidu.UserID(userID).Fold() }

// The cache's methods take a folded UserID (key).

func (m *Mapper) shard(c *corpCache, key string) *shard {
	return &c.shards[maphash.String(m.seed, key)%shardCount]
}

func (m *Mapper) cached(c *corpCache, key string) (uint32, bool) {
	s := m.shard(c, key)
	s.mu.RLock()
	uid, ok := s.m[key]
	s.mu.RUnlock()
	return uid, ok
}

// cachedBytes is cached for a key in a caller's buffer: maphash.Bytes
// hashes as maphash.String does, and a map index by string(key) does not
// allocate.
func (m *Mapper) cachedBytes(c *corpCache, key []byte) (uint32, bool) {
	s := &c.shards[maphash.Bytes(m.seed, key)%shardCount]
	s.mu.RLock()
	uid, ok := s.m[string(key)]
	s.mu.RUnlock()
	return uid, ok
}

func (m *Mapper) store(c *corpCache, key string, uid uint32) {
	s := m.shard(c, key)
	s.mu.Lock()
	if _, ok := s.m[key]; !ok {
		m.metrics.cacheEntries.Inc()
	}
	// Clone: the caller's string may point into a large request body.
	s.m[strings.Clone(key)] = uid
	s.mu.Unlock()
}

func (m *Mapper) forget(c *corpCache, key string) {
	s := m.shard(c, key)
	s.mu.Lock()
	if _, ok := s.m[key]; ok {
		delete(s.m, key)
		m.metrics.cacheEntries.Dec()
	}
	s.mu.Unlock()
}

func checkCorpID(corpID string) error {
	if !yidu.CorpID(corpID).Valid() {
		return ErrInvalidCorpID
	}
	return nil
}

// checkUserID accepts what the users.userid column can hold
// (yidu.UserID.Storable; 64 bytes also fits the VARCHAR(64) column, as
// characters ≥ bytes). It is not WeCom's rule (yidu.UserID.Valid): a
// member WeCom lists is kept whatever their UserID, so their reads count,
// and flagged (users.bad_userid, yidu.User.BadUserID); sending skips them.
func checkUserID(userID string) error {
	if !yidu.UserID(userID).Storable() {
		return ErrInvalidUserID
	}
	return nil
}

// badFlag is users.bad_userid for userID: 1 when it breaks WeCom's rule.
func badFlag(userID string) int {
	if yidu.UserID(userID).Valid() {
		return 0
	}
	return 1
}

// Cached returns the uid of userID when the cache holds it, without the
// database and without a context: the read path's hit needs no deadline.
// ok=false: not cached (ask Lookup), or an id that can never be stored.
func (m *Mapper) Cached(corpID, userID string) (uid uint32, ok bool) {
	if checkCorpID(corpID) != nil || checkUserID(userID) != nil {
		return 0, false
	}
	var buf [yidu.MaxUserID]byte
	if uid, ok = m.cachedBytes(m.corp(corpID), yidu.UserID(userID).AppendFold(buf[:0])); ok {
		m.metrics.lookupHit.Inc()
	}
	return uid, ok
}

// Lookup returns the uid of an existing user (any status), matching the
// UserID case-insensitively as WeCom does. ok=false: unknown. An id that can
// never be stored (invalid corp or userid) is unknown without asking the
// database.
func (m *Mapper) Lookup(ctx context.Context, corpID, userID string) (uid uint32, ok bool, err error) {
	if checkCorpID(corpID) != nil || checkUserID(userID) != nil {
		m.metrics.lookupInvalid.Inc()
		return 0, false, nil
	}
	c := m.corp(corpID)
	// checkUserID bounds userID to MaxUserID bytes: the fold fits buf.
	var buf [yidu.MaxUserID]byte
	if uid, ok := m.cachedBytes(c, yidu.UserID(userID).AppendFold(buf[:0])); ok {
		m.metrics.lookupHit.Inc()
		return uid, true, nil
	}
	key := fold(userID)
	ch := m.sf.DoChan(corpID+"\x00"+key, func() (any, error) {
		if uid, ok := m.cached(c, key); ok {
			return uid, nil
		}
		qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupTimeout)
		defer cancel()
		m.metrics.query(opLookup)
		var uid uint32
		// The lowest uid: rows from before migration 00002 may differ in
		// case only (twins), and every instance must pick the same one.
		err := m.db.QueryRowContext(qctx,
			"SELECT uid FROM users WHERE corp_id = ? AND userid_key = ? ORDER BY uid LIMIT 1", corpID, key).Scan(&uid)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		m.store(c, key, uid)
		return uid, nil
	})
	select {
	case <-ctx.Done():
		return 0, false, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return 0, false, fmt.Errorf("idmap: lookup: %w", r.Err)
		}
		if r.Val == nil {
			m.metrics.lookupUnknown.Inc()
			return 0, false, nil
		}
		m.metrics.lookupMiss.Inc()
		return r.Val.(uint32), true, nil
	}
}

type querier = Querier

// retry runs fn again after an InnoDB deadlock or lock wait timeout, which
// roll the transaction back and are safe to repeat; backoff is capped.
// inTx runs fn in one transaction and commits it, the whole retried
// (retry) on a deadlock or lost connection; the transaction's statements
// are counted under op.
func (m *Mapper) inTx(ctx context.Context, op int, fn func(tx *sql.Tx) error) error {
	return retry(ctx, func() error {
		m.metrics.query(op)
		tx, err := m.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if err := fn(tx); err != nil {
			return err
		}
		m.metrics.query(op)
		return tx.Commit()
	})
}

func retry(ctx context.Context, fn func() error) error {
	// Enough attempts for every instance initialising one corp at once to
	// get through (TestConcurrentInstances: 8 of them), about 2 s at most.
	const attempts = 8
	var err error
	for i := range attempts {
		err = fn()
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || (me.Number != 1213 && me.Number != 1205) {
			return err
		}
		// Jittered: the transactions that deadlocked together must not
		// retry together.
		t := time.NewTimer(jitter.Apply(min(time.Duration(10<<i)*time.Millisecond, 500*time.Millisecond)))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	return err
}
