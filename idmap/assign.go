package idmap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

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
	return scanUIDs(rows, len(ids))
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
