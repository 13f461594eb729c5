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
	"github.com/yidu-io/yidu/internal/metric"
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
}

// New returns a Mapper over db (the migrated yidu schema).
func New(db *sql.DB, opts Options) (*Mapper, error) {
	if db == nil {
		return nil, errors.New("idmap: a database is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
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

// Assign returns uids for userIDs, creating the missing ones (dense,
// race-safe across processes), keyed by the UserIDs as given. UserIDs that
// differ only in case are one member (yidu.UserID.Fold); a new member's
// row keeps the first spelling. Batch-friendly: the new ids of up to 1000
// at a time are created in one transaction. Concurrent Assigns in this
// process never create one UserID twice: the second waits for the first.
func (m *Mapper) Assign(ctx context.Context, corpID string, userIDs []string) (map[string]uint32, error) {
	if err := checkCorpID(corpID); err != nil {
		return nil, fmt.Errorf("idmap: assign: %w", err)
	}
	c := m.corp(corpID)
	byKey := make(map[string]uint32, len(userIDs))
	var todo []string // one spelling per key
	seen := make(map[string]struct{})
	for _, id := range userIDs {
		if err := checkUserID(id); err != nil {
			return nil, fmt.Errorf("idmap: assign %q: %w", id, err)
		}
		key := fold(id)
		if uid, ok := m.cached(c, key); ok {
			byKey[key] = uid
			continue
		}
		if _, dup := seen[key]; !dup {
			seen[key] = struct{}{}
			todo = append(todo, id)
		}
	}
	for len(todo) > 0 {
		owned, waits := m.claim(c, byKey, todo)
		var err error
		if len(owned) > 0 {
			var got map[string]uint32
			got, err = m.create(ctx, corpID, c, owned)
			m.release(c, owned, got, err)
			for key, uid := range got {
				byKey[key] = uid
			}
		}
		todo = todo[:0]
		for id, cl := range waits {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-cl.done:
			}
			if cl.err != nil {
				// The owner failed (maybe its context ended): try ourselves.
				todo = append(todo, id)
				continue
			}
			byKey[fold(id)] = cl.uid
		}
		if err != nil {
			return nil, err
		}
	}
	out := make(map[string]uint32, len(userIDs))
	for _, id := range userIDs {
		out[id] = byKey[fold(id)]
	}
	return out, nil
}

// claim splits ids into those this caller creates (registered as pending)
// and those another caller is already creating (waits, by the id given).
func (m *Mapper) claim(c *corpCache, byKey map[string]uint32, ids []string) (owned []string, waits map[string]*call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		key := fold(id)
		if uid, ok := m.cached(c, key); ok {
			byKey[key] = uid
			continue
		}
		if cl, ok := c.pending[key]; ok {
			if waits == nil {
				waits = map[string]*call{}
			}
			waits[id] = cl
			continue
		}
		c.pending[key] = &call{done: make(chan struct{})}
		owned = append(owned, id)
	}
	return owned, waits
}

// release ends the pending creation of owned; got is by folded UserID.
func (m *Mapper) release(c *corpCache, owned []string, got map[string]uint32, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range owned {
		key := fold(id)
		cl := c.pending[key]
		delete(c.pending, key)
		if uid, ok := got[key]; ok {
			cl.uid = uid
		} else if err != nil {
			cl.err = err
		} else {
			cl.err = errors.New("idmap: assign: no uid")
		}
		close(cl.done)
	}
}

// create finds or creates ids (one spelling per key) in the database,
// chunkSize per transaction, caches the answers and returns them by folded
// UserID.
func (m *Mapper) create(ctx context.Context, corpID string, c *corpCache, ids []string) (map[string]uint32, error) {
	if err := m.ensureSeq(ctx, corpID, c); err != nil {
		return nil, err
	}
	got := make(map[string]uint32, len(ids))
	for start := 0; start < len(ids); start += chunkSize {
		chunk := ids[start:min(start+chunkSize, len(ids))]
		err := retry(ctx, func() error {
			return m.assignChunk(ctx, corpID, chunk, got)
		})
		if err != nil {
			return got, fmt.Errorf("idmap: assign %d ids: %w", len(chunk), err)
		}
		for _, id := range chunk {
			key := fold(id)
			m.store(c, key, got[key])
		}
	}
	return got, nil
}

// ensureSeq creates the corp's uid_seq row once, outside any transaction:
// two transactions creating it together would deadlock on the gap lock.
// Starting from MAX(uid)+1 keeps a corp whose users were loaded without
// uid_seq from colliding. The INSERT … SELECT locks users and can deadlock
// with running assigners, so it runs only when a plain read finds no row,
// and is retried.
func (m *Mapper) ensureSeq(ctx context.Context, corpID string, c *corpCache) error {
	if c.seqReady.Load() {
		return nil
	}
	c.seqMu.Lock()
	defer c.seqMu.Unlock()
	if c.seqReady.Load() {
		return nil
	}
	m.metrics.query(opAssign)
	var one int
	err := m.db.QueryRowContext(ctx, "SELECT 1 FROM uid_seq WHERE corp_id = ?", corpID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		err = retry(ctx, func() error {
			m.metrics.query(opAssign)
			_, err := m.db.ExecContext(ctx,
				`INSERT IGNORE INTO uid_seq (corp_id, next_uid)
				 SELECT ?, COALESCE(MAX(uid) + 1, 0) FROM users WHERE corp_id = ?`, corpID, corpID)
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("idmap: init uid_seq: %w", err)
	}
	c.seqReady.Store(true)
	return nil
}

// lockSeq takes the corp's uid_seq row lock and returns the next free uid.
// Every writer of users.userid takes it first, so under it no other instance
// can insert or rename a UserID: existence checks made under it are final.
func (m *Mapper) lockSeq(ctx context.Context, tx *sql.Tx, corpID string, op int) (uint32, error) {
	m.metrics.query(op)
	var next uint32
	err := tx.QueryRowContext(ctx,
		"SELECT next_uid FROM uid_seq WHERE corp_id = ? FOR UPDATE", corpID).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("lock uid_seq: %w", err)
	}
	return next, nil
}

// assignChunk is one transaction: lock uid_seq, read which ids exist by
// folded UserID (a locking read sees every commit made before we got the
// lock), insert the rest with consecutive uids, advance uid_seq; got is
// filled by folded UserID. INSERT IGNORE plus a re-read is a safety net for
// a writer that bypassed the lock with the same spelling: the UserID keeps
// the uid it got first and ours is wasted.
func (m *Mapper) assignChunk(ctx context.Context, corpID string, ids []string, got map[string]uint32) error {
	begun := time.Now()
	defer func() { m.metrics.assignSeconds.Observe(time.Since(begun).Seconds()) }()
	m.metrics.query(opAssign)
	tx, err := m.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	next, err := m.lockSeq(ctx, tx, corpID, opAssign)
	if err != nil {
		return err
	}
	found, err := m.readUIDs(ctx, tx, corpID, ids, true)
	if err != nil {
		return err
	}
	var fresh []string
	for _, id := range ids {
		if uid, ok := found[fold(id)]; ok {
			got[fold(id)] = uid
		} else {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		return tx.Commit()
	}
	if uint64(next)+uint64(len(fresh)) > 1<<32-1 {
		return errors.New("uid space exhausted")
	}
	args := make([]any, 0, 4*len(fresh))
	for i, id := range fresh {
		args = append(args, corpID, next+uint32(i), id, badFlag(id))
	}
	m.metrics.query(opAssign)
	res, err := tx.ExecContext(ctx,
		"INSERT IGNORE INTO users (corp_id, uid, userid, bad_userid, status) VALUES "+rowMarks("(?,?,?,?,1)", len(fresh)), args...)
	if err != nil {
		return fmt.Errorf("insert users: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if int(n) != len(fresh) {
		m.log.Warn("uid lost a race outside the uid_seq lock", "corp", corpID, "ignored", len(fresh)-int(n))
		winners, err := m.readUIDs(ctx, tx, corpID, fresh, false)
		if err != nil {
			return err
		}
		for _, id := range fresh {
			uid, ok := winners[fold(id)]
			if !ok {
				return fmt.Errorf("userid %q neither inserted nor found", id)
			}
			got[fold(id)] = uid
		}
	} else {
		for i, id := range fresh {
			got[fold(id)] = next + uint32(i)
		}
	}
	m.metrics.query(opAssign)
	if _, err := tx.ExecContext(ctx, "UPDATE uid_seq SET next_uid = ? WHERE corp_id = ?",
		next+uint32(len(fresh)), corpID); err != nil {
		return fmt.Errorf("advance uid_seq: %w", err)
	}
	m.metrics.query(opAssign)
	if err := tx.Commit(); err != nil {
		return err
	}
	m.metrics.assigned.Add(float64(n))
	return nil
}

// readUIDs returns the uids of the ids (≤ chunkSize) that exist, by folded
// UserID; of twins (see migrations/00002) the lowest uid.
func (m *Mapper) readUIDs(ctx context.Context, q querier, corpID string, ids []string, lock bool) (map[string]uint32, error) {
	var b strings.Builder
	b.WriteString("SELECT userid_key, uid FROM users WHERE corp_id = ? AND userid_key IN (")
	args := make([]any, 0, len(ids)+1)
	args = append(args, corpID)
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args = append(args, fold(id))
	}
	b.WriteByte(')')
	if lock {
		b.WriteString(" LOCK IN SHARE MODE")
	}
	m.metrics.query(opAssign)
	rows, err := q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("read users: %w", err)
	}
	defer rows.Close()
	found := make(map[string]uint32, len(ids))
	for rows.Next() {
		var key string
		var uid uint32
		if err := rows.Scan(&key, &uid); err != nil {
			return nil, err
		}
		if old, ok := found[key]; !ok || uid < old {
			found[key] = uid
		}
	}
	return found, rows.Err()
}

// Warm loads every user of a corp into the cache with one query, so a
// receiver starting under load does not pay one miss per employee.
func (m *Mapper) Warm(ctx context.Context, corpID string) (int, error) {
	if err := checkCorpID(corpID); err != nil {
		return 0, fmt.Errorf("idmap: warm: %w", err)
	}
	c := m.corp(corpID)
	m.metrics.query(opRead)
	// Highest uid first: of twins (see migrations/00002) the lowest is
	// stored last and stays, as Lookup would answer.
	rows, err := m.db.QueryContext(ctx, "SELECT userid_key, uid FROM users WHERE corp_id = ? ORDER BY uid DESC", corpID)
	if err != nil {
		return 0, fmt.Errorf("idmap: warm: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var key string
		var uid uint32
		if err := rows.Scan(&key, &uid); err != nil {
			return n, fmt.Errorf("idmap: warm: %w", err)
		}
		m.store(c, key, uid)
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("idmap: warm: %w", err)
	}
	return n, nil
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

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

// Operation labels of yidu_idmap_db_queries_total.
const (
	opLookup = iota
	opAssign
	opContact
	opRead
	opSync
	opCount
)

var opNames = [opCount]string{"lookup", "assign", "contact", "read", "sync"}

type metrics struct {
	queries       [opCount]prometheus.Counter
	lookupHit     prometheus.Counter
	lookupMiss    prometheus.Counter
	lookupUnknown prometheus.Counter
	lookupInvalid prometheus.Counter
	assigned      prometheus.Counter
	assignSeconds prometheus.Histogram
	cacheEntries  prometheus.Gauge
	contact       *prometheus.CounterVec
}

func (m *metrics) query(op int) { m.queries[op].Inc() }

// contactResults are the label values of yidu_idmap_contact_changes_total.
var contactResults = []string{"created", "updated", "renamed", "rename_conflict", "deleted", "ignored"}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	f := metric.New(reg)
	queries := f.CounterVec("yidu_idmap_db_queries_total", "Statements sent to MySQL, by operation (cache hits send none).", "op")
	lookups := f.CounterVec("yidu_idmap_lookups_total", "Lookups by result: hit (cache), miss (found in MySQL), unknown, invalid.", "result")
	mt := &metrics{
		lookupHit:     lookups.WithLabelValues("hit"),
		lookupMiss:    lookups.WithLabelValues("miss"),
		lookupUnknown: lookups.WithLabelValues("unknown"),
		lookupInvalid: lookups.WithLabelValues("invalid"),
		assigned:      f.Counter("yidu_idmap_assigned_total", "New uids created."),
		assignSeconds: f.Histogram("yidu_idmap_assign_seconds", "Duration of one uid assignment transaction (≤1000 ids).",
			prometheus.ExponentialBuckets(0.0005, 2, 14)),
		cacheEntries: f.Gauge("yidu_idmap_cache_entries", "UserIDs held in the in-memory cache, all corps."),
		contact:      f.CounterVec("yidu_idmap_contact_changes_total", "change_contact callbacks applied, by result.", "result"),
	}
	for i, name := range opNames {
		mt.queries[i] = queries.WithLabelValues(name)
	}
	metric.Preset(mt.contact.MetricVec, contactResults)
	return mt, f.Err("idmap")
}
