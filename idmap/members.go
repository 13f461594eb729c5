package idmap

import (
	"context"
	"fmt"
	"slices"

	"github.com/yidu-io/yidu"
)

// storedUser is a users row as the sync reads it.
type storedUser struct {
	uid    uint32
	userID string
	name   string
	status yidu.UserStatus
	depts  string
	bad    bool
}

// writeMembers assigns uids to new members, updates changed ones in bulk,
// marks unlisted ones left (complete) or reports them (partial), and
// rewrites user_departments within the read's scope.
func (m *Mapper) writeMembers(ctx context.Context, corpID string, members map[string]*member, order []string,
	depts []yidu.Department, l yidu.Listing, rep *Report) error {
	w := &memberSync{m: m, corpID: corpID, members: members, order: order, complete: l.Complete,
		listedDept: make(map[int64]bool, len(depts)), rep: rep}
	for _, d := range depts {
		w.listedDept[d.ID] = true
	}
	if err := w.readStored(ctx); err != nil {
		return err
	}
	uids, err := w.assignFresh(ctx)
	if err != nil {
		return err
	}
	changes, memberships, listedUID := w.changes(uids)
	if err := w.update(ctx, changes); err != nil {
		return err
	}
	if err := w.settleAbsent(ctx); err != nil {
		return err
	}
	rep.Memberships = len(memberships)
	var scope []int64
	if !w.complete {
		scope = make([]int64, 0, len(depts))
		for _, d := range depts {
			scope = append(scope, d.ID)
		}
	}
	extra := resolveExtras(l, listedUID, rep)
	return m.writeMemberships(ctx, corpID, scope, memberships, extra)
}

// memberSync is one writeMembers: the read's members (by folded UserID,
// in order) and what users held of the corp before it.
type memberSync struct {
	m        *Mapper
	corpID   string
	members  map[string]*member
	order    []string
	complete bool
	// listedDept: the departments the read listed.
	listedDept map[int64]bool
	stored     map[string]storedUser
	twins      []storedUser // a higher uid whose UserID differs only in case (migrations/00002)
	rep        *Report
}

// inScope says whether the read is the truth about membership of d.
func (w *memberSync) inScope(d int64) bool { return w.complete || w.listedDept[d] }

// memberChange is a listed member's row as the read has it.
type memberChange struct {
	uid        uint32
	id, name   string
	deptString string
	bad        int
}

// readStored reads the corp's users rows by folded UserID.
func (w *memberSync) readStored(ctx context.Context) error {
	w.m.metrics.query(opSync)
	rows, err := w.m.db.QueryContext(ctx,
		"SELECT userid_key, uid, userid, name, status, departments, bad_userid FROM users WHERE corp_id = ? ORDER BY uid", w.corpID)
	if err != nil {
		return fmt.Errorf("idmap: sync users: %w", err)
	}
	defer rows.Close()
	w.stored = map[string]storedUser{}
	for rows.Next() {
		var key string
		var u storedUser
		if err := rows.Scan(&key, &u.uid, &u.userID, &u.name, &u.status, &u.depts, &u.bad); err != nil {
			return fmt.Errorf("idmap: sync users: %w", err)
		}
		if _, dup := w.stored[key]; dup {
			w.twins = append(w.twins, u)
			continue
		}
		w.stored[key] = u
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("idmap: sync users: %w", err)
	}
	return nil
}

// assignFresh assigns uids to the listed members users does not have.
func (w *memberSync) assignFresh(ctx context.Context) (map[string]uint32, error) {
	var fresh []string
	for _, key := range w.order {
		if _, ok := w.stored[key]; !ok {
			fresh = append(fresh, w.members[key].userID)
		}
	}
	uids, err := w.m.Assign(ctx, w.corpID, fresh)
	if err != nil {
		return nil, fmt.Errorf("idmap: sync users: %w", err)
	}
	w.rep.Created = len(fresh)
	return uids, nil
}

// changes are the listed members whose row differs from the read, their
// memberships (dept, uid), and the uid of every listed member by folded
// UserID.
func (w *memberSync) changes(uids map[string]uint32) ([]memberChange, [][2]int64, map[string]uint32) {
	var changes []memberChange
	var memberships [][2]int64                         // dept, uid
	listedUID := make(map[string]uint32, len(w.order)) // folded UserID → uid of every listed member
	for _, key := range w.order {
		mb := w.members[key]
		u, known := w.stored[key]
		if !known {
			u = storedUser{uid: uids[mb.userID], userID: mb.userID, status: yidu.StatusActive}
		}
		listedUID[key] = u.uid
		// Outside a partial read's scope the stored departments stand.
		all := slices.Clone(mb.depts)
		if !w.complete {
			for _, d := range w.m.storedDepartments(w.corpID, u.depts) {
				if !w.inScope(d) && !slices.Contains(all, d) {
					all = append(all, d)
				}
			}
		}
		deptString, err := FormatDepartments(all)
		if err != nil {
			w.m.log.Warn("member's department list does not fit; stored in user_departments only", "corp", w.corpID)
			deptString = ""
		}
		for _, d := range mb.depts {
			memberships = append(memberships, [2]int64{d, int64(u.uid)})
		}
		bad := !yidu.UserID(u.userID).Valid()
		if known && u.status == yidu.StatusActive && u.depts == deptString && u.bad == bad && (mb.name == "" || mb.name == u.name) {
			continue
		}
		if known {
			w.rep.Updated++
		}
		changes = append(changes, memberChange{uid: u.uid, id: u.userID, name: mb.name, deptString: deptString, bad: badFlag(u.userID)})
	}
	return changes, memberships, listedUID
}

// update writes changes in bulk.
func (w *memberSync) update(ctx context.Context, changes []memberChange) error {
	for start := 0; start < len(changes); start += chunkSize {
		chunk := changes[start:min(start+chunkSize, len(changes))]
		args := make([]any, 0, 6*len(chunk))
		for _, c := range chunk {
			args = append(args, w.corpID, c.uid, c.id, c.name, c.deptString, c.bad)
		}
		// Rows exist (assigned above, with their stored spelling), so this
		// only updates; an empty name (names unavailable) keeps the stored
		// one.
		w.m.metrics.query(opSync)
		if _, err := w.m.db.ExecContext(ctx,
			`INSERT INTO users (corp_id, uid, userid, name, departments, bad_userid) VALUES `+rowMarks("(?,?,?,?,?,?)", len(chunk))+`
			 ON DUPLICATE KEY UPDATE status = 1, departments = VALUES(departments), bad_userid = VALUES(bad_userid),
			   name = IF(VALUES(name) = '', name, VALUES(name))`, args...); err != nil {
			return fmt.Errorf("idmap: sync users: %w", err)
		}
	}
	return nil
}

// settleAbsent handles the members the read did not list: a complete
// read marks them left (and revokes their reads' caches); a partial one
// reports them unseen and drops from their row only the departments it
// is the truth about.
func (w *memberSync) settleAbsent(ctx context.Context) error {
	var left []uint32
	var unseen []string
	type deptChange struct {
		uid   uint32
		depts string
	}
	var unseenDepts []deptChange
	absent := w.twins
	for key, u := range w.stored {
		if _, listed := w.members[key]; !listed {
			absent = append(absent, u)
		}
	}
	for _, u := range absent {
		if u.status == yidu.StatusLeft {
			continue
		}
		if w.complete {
			left = append(left, u.uid)
			continue
		}
		unseen = append(unseen, u.userID)
		var keep []int64
		for _, d := range w.m.storedDepartments(w.corpID, u.depts) {
			if !w.inScope(d) {
				keep = append(keep, d)
			}
		}
		if ds, err := FormatDepartments(keep); err == nil && ds != u.depts {
			unseenDepts = append(unseenDepts, deptChange{u.uid, ds})
		}
	}
	w.rep.Left = len(left)
	w.rep.Unseen, w.rep.UnseenSample = len(unseen), sample(unseen)
	err := eachChunk(w.corpID, left, func(marks string, args []any) error {
		w.m.metrics.query(opSync)
		_, err := w.m.db.ExecContext(ctx, "UPDATE users SET status = 2 WHERE corp_id = ? AND uid IN ("+marks+")", args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("idmap: sync users: mark left: %w", err)
	}
	w.m.revoke(ctx, w.corpID, left)
	for _, c := range unseenDepts {
		w.m.metrics.query(opSync)
		if _, err := w.m.db.ExecContext(ctx, "UPDATE users SET departments = ? WHERE corp_id = ? AND uid = ?", c.depts, w.corpID, c.uid); err != nil {
			return fmt.Errorf("idmap: sync users: departments of unseen members: %w", err)
		}
	}
	return nil
}
