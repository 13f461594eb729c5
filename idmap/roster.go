package idmap

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
)

// The reading page asks who a member is at each sign-in: their name and
// whether they are still here (issue 50: a fifth of a storm's readers sign
// in). Member answers it from a roster in memory, the corp's active
// members' names read at one directory version (directory_versions), as
// long as a version check no older than RosterCheck finds the directory
// unmoved. Only "an active member, this name" is ever answered from it:
// a member the roster lacks (left, new since it was read) is read from
// MySQL. So a roster can only be stale in one way, a member who left
// through another process within RosterCheck of the check; this process's
// own leaves take effect at once, and the page closes that window with
// its revocation tombstones (page.Sessions).

// RosterCheck is how long a directory version check holds: the roster
// is used for RosterCheck after MySQL last said its version is current.
const RosterCheck = time.Second

// RosterReload is how often at most a roster is read again (a full read
// of the corp's members): between reads a moved directory sends the
// sign-ins to MySQL, so a burst of directory changes costs point reads,
// not a full read each RosterCheck.
const RosterReload = 10 * time.Second

// roster is one corp's active members' names at one directory version.
type roster struct {
	version uint64
	names   map[uint32]string
}

// rosterState is one corp's roster and its last version check.
type rosterState struct {
	mu sync.Mutex
	r  *roster
	// checked is when MySQL last said the directory is at seen.
	checked time.Time
	seen    uint64
	// read is when the roster was last read (begun): not again within
	// RosterReload; failed when a read last failed: not again within
	// RosterCheck.
	read, failed time.Time
}

// rosterOf returns corpID's roster state.
func (m *Mapper) rosterOf(corpID string) *rosterState {
	if st, ok := m.rosters.Load(corpID); ok {
		return st.(*rosterState)
	}
	st, _ := m.rosters.LoadOrStore(corpID, &rosterState{})
	return st.(*rosterState)
}

// Member returns who userID is in the corp: uid, name and status, found
// false when the directory has no such UserID. Unless fresh, active
// members come from the roster while it is current (no MySQL); anyone
// else, everyone while the roster is being read, and every fresh ask
// from MySQL.
func (m *Mapper) Member(ctx context.Context, corpID, userID string, fresh bool) (uid uint32, name string, active, found bool, err error) {
	uid, ok, err := m.Lookup(ctx, corpID, userID)
	if err != nil || !ok {
		return 0, "", false, false, err
	}
	if !fresh {
		if name, ok := m.rosterName(ctx, corpID, uid); ok {
			m.metrics.roster[rosterHit].Inc()
			return uid, name, true, true, nil
		}
		m.metrics.roster[rosterRead].Inc()
	}
	users, err := m.Users(ctx, corpID, []uint32{uid})
	if err != nil {
		return 0, "", false, false, err
	}
	u, ok := users[uid]
	if !ok {
		return 0, "", false, false, nil
	}
	return uid, u.Name, u.Status != yidu.StatusLeft, true, nil
}

// rosterName is uid's name when the roster is current and holds uid as
// active. A roster that is missing or behind is read again in the
// background; its callers read MySQL meanwhile.
func (m *Mapper) rosterName(ctx context.Context, corpID string, uid uint32) (string, bool) {
	st := m.rosterOf(corpID)
	now := m.now()
	st.mu.Lock()
	r, checked, seen := st.r, st.checked, st.seen
	st.mu.Unlock()
	if now.Sub(checked) >= RosterCheck {
		v, err := m.checkVersion(ctx, corpID)
		if err != nil {
			return "", false
		}
		seen = v
	}
	if r == nil || r.version != seen {
		st.mu.Lock()
		retry := now.Sub(st.failed) >= RosterCheck && (st.read.IsZero() || now.Sub(st.read) >= RosterReload)
		if retry {
			st.read = now
		}
		st.mu.Unlock()
		if retry {
			m.loadRoster(ctx, corpID)
		}
		return "", false
	}
	name, ok := r.names[uid]
	return name, ok
}

// checkVersion reads the directory version, one read per corp at a time
// (concurrent sign-ins share it), and notes when.
func (m *Mapper) checkVersion(ctx context.Context, corpID string) (uint64, error) {
	v, err, _ := m.sf.Do("\x00rosterversion\x00"+corpID, func() (any, error) {
		at := m.now()
		v, err := m.Version(ctx, corpID)
		if err != nil {
			return uint64(0), err
		}
		st := m.rosterOf(corpID)
		st.mu.Lock()
		if at.After(st.checked) {
			st.checked, st.seen = at, v
		}
		st.mu.Unlock()
		return v, nil
	})
	if err != nil {
		return 0, err
	}
	return v.(uint64), nil
}

// loadRoster reads corpID's roster in the background, once at a time.
func (m *Mapper) loadRoster(ctx context.Context, corpID string) {
	m.sf.DoChan("\x00roster\x00"+corpID, func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 6*lookupTimeout)
		defer cancel()
		at := m.now()
		r, err := m.readRoster(ctx, corpID)
		st := m.rosterOf(corpID)
		if err != nil {
			m.log.WarnContext(ctx, "idmap: roster not read; sign-ins read MySQL", "corp", corpID, "err", err)
			st.mu.Lock()
			st.failed = m.now()
			st.mu.Unlock()
			return nil, err
		}
		st.mu.Lock()
		if st.r == nil || st.r.version <= r.version {
			st.r = r
		}
		if at.After(st.checked) {
			st.checked, st.seen = at, r.version
		}
		st.mu.Unlock()
		m.metrics.rosterEntries.Set(float64(len(r.names)))
		return nil, nil
	})
}

// readRoster reads the version and the active members' names in one
// snapshot, so the names are those of the version.
func (m *Mapper) readRoster(ctx context.Context, corpID string) (*roster, error) {
	tx, err := m.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("idmap: roster: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	r := &roster{names: map[uint32]string{}}
	m.metrics.query(opRead)
	err = tx.QueryRowContext(ctx, "SELECT version FROM directory_versions WHERE corp_id = ?", corpID).Scan(&r.version)
	if err != nil && err != sql.ErrNoRows {
		return nil, fmt.Errorf("idmap: roster: version: %w", err)
	}
	m.metrics.query(opRead)
	rows, err := tx.QueryContext(ctx, "SELECT uid, name FROM users WHERE corp_id = ? AND status = 1", corpID)
	if err != nil {
		return nil, fmt.Errorf("idmap: roster: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var uid uint32
		var name string
		if err := rows.Scan(&uid, &name); err != nil {
			return nil, fmt.Errorf("idmap: roster: %w", err)
		}
		r.names[uid] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("idmap: roster: %w", err)
	}
	return r, nil
}

// rosterMoved is told that this process wrote corpID's directory: the
// next Member checks the version again; uids that left are out at once.
func (m *Mapper) rosterMoved(corpID string, left []uint32) {
	st := m.rosterOf(corpID)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.checked = time.Time{}
	if len(left) > 0 {
		st.r = nil // read again: members leave seldom
	}
}
