package idmap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/metric"
)

// Directory is what Syncer reads from WeCom's address list
// (shared/wecom-protocol.md, Directory). idmap/wecomdir implements it over
// HTTP. An API refusal (errcode ≠ 0) is returned as *APIError.
type Directory interface {
	// Departments lists department/simplelist: the whole visible tree,
	// without names.
	Departments(ctx context.Context) ([]yidu.Department, error)
	// DepartmentNames lists department/list's names by id; apps created
	// recently may be refused (an *APIError), names are then kept as stored.
	DepartmentNames(ctx context.Context) (map[int64]string, error)
	// UserIDs pages user/list_id: member-department pairs from cursor ("" to
	// start), at most limit (≤ 10000) of them, and the next cursor ("" at
	// the end).
	UserIDs(ctx context.Context, cursor string, limit int) (pairs []DeptUser, next string, err error)
	// DepartmentUsers lists user/simplelist: a department's direct members
	// with names.
	DepartmentUsers(ctx context.Context, deptID int64) ([]NamedUser, error)
}

// DeptUser is one row of user/list_id: a member in a department.
type DeptUser struct {
	UserID     string
	Department int64
}

// NamedUser is one row of user/simplelist.
type NamedUser struct {
	UserID string
	Name   string
}

// APIError is WeCom answering a call with errcode ≠ 0 (document/path/90313).
type APIError struct {
	API  string
	Code int64
	Msg  string
}

// Error names the API and WeCom's errcode and errmsg.
func (e *APIError) Error() string {
	return fmt.Sprintf("wecom %s: errcode %d: %s", e.API, e.Code, e.Msg)
}

// ErrEmptyDirectory: WeCom listed no department or no member. Sync refuses
// to apply it, since it would mark every member as left; a wrong secret or
// an app with an empty visible scope looks exactly like this.
var ErrEmptyDirectory = errors.New("idmap: sync: WeCom listed an empty directory")

// listLimit is user/list_id's largest page (shared/wecom-protocol.md).
const listLimit = 10000

// Syncer copies a corp's WeCom directory into MySQL through a Mapper.
type Syncer struct {
	m       *Mapper
	dirs    map[string]Directory
	log     *slog.Logger
	runs    *prometheus.CounterVec
	seconds prometheus.Histogram
}

// Report counts what one Sync saw and changed.
type Report struct {
	Departments int // departments listed
	Users       int // members listed
	Created     int // members given a new uid
	Updated     int // existing members whose name, departments or status changed
	Left        int // members no longer listed, now status 2
	Memberships int // user_departments rows written
	// Names reports whether member names came from user/simplelist;
	// DepartmentNames whether department names came from department/list.
	Names, DepartmentNames bool
}

// NewSyncer returns a Syncer using dirs (by corp_id) to read WeCom.
func NewSyncer(m *Mapper, dirs map[string]Directory, opts Options) (*Syncer, error) {
	if m == nil {
		return nil, errors.New("idmap: sync: a Mapper is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := metric.New(opts.Registerer)
	s := &Syncer{
		m:       m,
		dirs:    dirs,
		log:     opts.Logger.With("component", "idmap.sync"),
		runs:    f.CounterVec("yidu_idmap_sync_total", "Directory syncs by result.", "result"),
		seconds: f.Histogram("yidu_idmap_sync_seconds", "Duration of a directory sync.", prometheus.ExponentialBuckets(0.1, 2, 12)),
	}
	metric.Preset(s.runs.MetricVec, []string{"ok", "error"})
	return s, f.Err("idmap: sync")
}

type member struct {
	userID string
	name   string
	depts  []int64
}

// Sync reads the corp's departments and members from WeCom and writes them:
// departments and user_departments are replaced per corp in one transaction
// each; listed members get uids (bulk Assign), names, departments and status
// active; members no longer listed get status 2 and keep their uid. A
// renamed member cannot be told from a new one here (only change_contact
// says so): the new UserID gets a new uid and the old one leaves.

func (s *Syncer) Sync(ctx context.Context, corpID string) (Report, error) {
	begun := time.Now()
	rep, err := s.sync(ctx, corpID)
	s.seconds.Observe(time.Since(begun).Seconds())
	if err != nil {
		s.runs.WithLabelValues("error").Inc()
		return rep, err
	}
	s.runs.WithLabelValues("ok").Inc()
	s.log.Info("directory synced", "corp", corpID, "departments", rep.Departments, "users", rep.Users,
		"created", rep.Created, "updated", rep.Updated, "left", rep.Left, "seconds", time.Since(begun).Seconds())
	return rep, nil
}

func (s *Syncer) sync(ctx context.Context, corpID string) (Report, error) {
	var rep Report
	if err := checkCorpID(corpID); err != nil {
		return rep, fmt.Errorf("idmap: sync: %w", err)
	}
	dir, ok := s.dirs[corpID]
	if !ok {
		return rep, fmt.Errorf("idmap: sync: no directory client for corp %q", corpID)
	}
	depts, err := s.departments(ctx, dir, &rep)
	if err != nil {
		return rep, err
	}
	members, order, err := s.members(ctx, dir)
	if err != nil {
		return rep, err
	}
	if len(depts) == 0 || len(members) == 0 {
		return rep, ErrEmptyDirectory
	}
	rep.Departments, rep.Users = len(depts), len(members)
	rep.Names, err = s.names(ctx, dir, depts, members)
	if err != nil {
		return rep, err
	}
	if err := s.m.writeDepartments(ctx, corpID, depts); err != nil {
		return rep, err
	}
	if err := s.m.writeMembers(ctx, corpID, members, order, &rep); err != nil {
		return rep, err
	}
	return rep, nil
}

// departments lists the structure with department/simplelist and takes
// names from department/list when the app may call it; otherwise names stay
// as stored.
func (s *Syncer) departments(ctx context.Context, dir Directory, rep *Report) ([]yidu.Department, error) {
	list, err := dir.Departments(ctx)
	if err != nil {
		return nil, fmt.Errorf("idmap: sync: department/simplelist: %w", err)
	}
	out := make([]yidu.Department, 0, len(list))
	for _, d := range list {
		if d.ID >= 0 && d.ParentID >= 0 {
			out = append(out, d)
		}
	}
	names, err := dir.DepartmentNames(ctx)
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr):
		s.log.Warn("department names unavailable; keeping stored names", "errcode", apiErr.Code)
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("idmap: sync: department/list: %w", err)
	}
	for i := range out {
		out[i].Name = names[out[i].ID]
	}
	rep.DepartmentNames = true
	return out, nil
}

// members pages user/list_id (one row per member-department pair) and
// groups the pairs by member, in first-seen order.
func (s *Syncer) members(ctx context.Context, dir Directory) (map[string]*member, []string, error) {
	members := map[string]*member{}
	var order []string
	cursor := ""
	for page := 0; ; page++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		pairs, next, err := dir.UserIDs(ctx, cursor, listLimit)
		if err != nil {
			return nil, nil, fmt.Errorf("idmap: sync: user/list_id page %d: %w", page, err)
		}
		for _, p := range pairs {
			if checkUserID(p.UserID) != nil {
				continue
			}
			mb := members[p.UserID]
			if mb == nil {
				mb = &member{userID: p.UserID}
				members[p.UserID] = mb
				order = append(order, p.UserID)
			}
			if p.Department >= 0 && !containsInt(mb.depts, p.Department) {
				mb.depts = append(mb.depts, p.Department)
			}
		}
		if next == "" || next == cursor {
			return members, order, nil
		}
		cursor = next
	}
}

// names fills member names from user/simplelist, one call per department.
// An API refusal (no permission) skips names altogether: they are optional.
func (s *Syncer) names(ctx context.Context, dir Directory, depts []yidu.Department, members map[string]*member) (bool, error) {
	for _, d := range depts {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		list, err := dir.DepartmentUsers(ctx, d.ID)
		var apiErr *APIError
		switch {
		case errors.As(err, &apiErr):
			s.log.Warn("member names unavailable; keeping stored names", "errcode", apiErr.Code)
			return false, nil
		case err != nil:
			return false, fmt.Errorf("idmap: sync: user/simplelist: %w", err)
		}
		for _, u := range list {
			if mb := members[u.UserID]; mb != nil {
				mb.name = u.Name
			}
		}
	}
	return true, nil
}

func containsInt(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// writeDepartments replaces the corp's departments in one transaction. A
// department listed without a name keeps the name stored before.
func (m *Mapper) writeDepartments(ctx context.Context, corpID string, depts []yidu.Department) error {
	return m.inTx(ctx, opSync, func(tx *sql.Tx) error {
		m.metrics.query(opSync)
		rows, err := tx.QueryContext(ctx, "SELECT dept_id, name FROM departments WHERE corp_id = ? FOR UPDATE", corpID)
		if err != nil {
			return fmt.Errorf("idmap: sync departments: %w", err)
		}
		old := map[int64]string{}
		for rows.Next() {
			var id int64
			var name string
			if err := rows.Scan(&id, &name); err != nil {
				rows.Close()
				return fmt.Errorf("idmap: sync departments: %w", err)
			}
			old[id] = name
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("idmap: sync departments: %w", err)
		}
		m.metrics.query(opSync)
		if _, err := tx.ExecContext(ctx, "DELETE FROM departments WHERE corp_id = ?", corpID); err != nil {
			return fmt.Errorf("idmap: sync departments: %w", err)
		}
		for start := 0; start < len(depts); start += chunkSize {
			chunk := depts[start:min(start+chunkSize, len(depts))]
			args := make([]any, 0, 5*len(chunk))
			for _, d := range chunk {
				name := d.Name
				if name == "" {
					name = old[d.ID]
				}
				args = append(args, corpID, d.ID, d.ParentID, name, d.Order)
			}
			m.metrics.query(opSync)
			if _, err := tx.ExecContext(ctx,
				"INSERT IGNORE INTO departments (corp_id, dept_id, parent_id, name, sort_order) VALUES "+
					rowMarks("(?,?,?,?,?)", len(chunk)), args...); err != nil {
				return fmt.Errorf("idmap: sync departments: %w", err)
			}
		}
		return nil
	})
}

type storedUser struct {
	uid    uint32
	name   string
	status yidu.UserStatus
	depts  string
}

// writeMembers assigns uids to new members, updates changed ones in bulk,
// marks unlisted ones left and replaces user_departments.
func (m *Mapper) writeMembers(ctx context.Context, corpID string, members map[string]*member, order []string, rep *Report) error {
	m.metrics.query(opSync)
	rows, err := m.db.QueryContext(ctx, "SELECT userid, uid, name, status, departments FROM users WHERE corp_id = ?", corpID)
	if err != nil {
		return fmt.Errorf("idmap: sync users: %w", err)
	}
	stored := map[string]storedUser{}
	for rows.Next() {
		var id string
		var u storedUser
		if err := rows.Scan(&id, &u.uid, &u.name, &u.status, &u.depts); err != nil {
			rows.Close()
			return fmt.Errorf("idmap: sync users: %w", err)
		}
		stored[id] = u
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("idmap: sync users: %w", err)
	}

	var fresh []string
	for _, id := range order {
		if _, ok := stored[id]; !ok {
			fresh = append(fresh, id)
		}
	}
	uids, err := m.Assign(ctx, corpID, fresh)
	if err != nil {
		return fmt.Errorf("idmap: sync users: %w", err)
	}
	rep.Created = len(fresh)

	type change struct {
		uid        uint32
		id, name   string
		deptString string
	}
	var changes []change
	var memberships [][2]int64 // dept, uid
	for _, id := range order {
		mb := members[id]
		deptString, err := FormatDepartments(mb.depts)
		if err != nil {
			m.log.Warn("member's department list does not fit; stored in user_departments only", "corp", corpID)
			deptString = ""
		}
		u, known := stored[id]
		if !known {
			u = storedUser{uid: uids[id], status: yidu.StatusActive}
		}
		for _, d := range mb.depts {
			memberships = append(memberships, [2]int64{d, int64(u.uid)})
		}
		if known && u.status == yidu.StatusActive && u.depts == deptString && (mb.name == "" || mb.name == u.name) {
			continue
		}
		if known {
			rep.Updated++
		}
		changes = append(changes, change{uid: u.uid, id: id, name: mb.name, deptString: deptString})
	}
	for start := 0; start < len(changes); start += chunkSize {
		chunk := changes[start:min(start+chunkSize, len(changes))]
		args := make([]any, 0, 5*len(chunk))
		for _, c := range chunk {
			args = append(args, corpID, c.uid, c.id, c.name, c.deptString)
		}
		// Rows exist (assigned above), so this only updates; an empty name
		// (names unavailable) keeps the stored one.
		m.metrics.query(opSync)
		if _, err := m.db.ExecContext(ctx,
			`INSERT INTO users (corp_id, uid, userid, name, departments) VALUES `+rowMarks("(?,?,?,?,?)", len(chunk))+`
			 ON DUPLICATE KEY UPDATE status = 1, departments = VALUES(departments),
			   name = IF(VALUES(name) = '', name, VALUES(name))`, args...); err != nil {
			return fmt.Errorf("idmap: sync users: %w", err)
		}
	}

	var left []any
	for id, u := range stored {
		if _, listed := members[id]; !listed && u.status != yidu.StatusLeft {
			left = append(left, u.uid)
		}
	}
	rep.Left = len(left)
	for start := 0; start < len(left); start += chunkSize {
		chunk := left[start:min(start+chunkSize, len(left))]
		m.metrics.query(opSync)
		if _, err := m.db.ExecContext(ctx,
			"UPDATE users SET status = 2 WHERE corp_id = ? AND uid IN ("+placeholders(len(chunk))+")",
			append([]any{corpID}, chunk...)...); err != nil {
			return fmt.Errorf("idmap: sync users: mark left: %w", err)
		}
	}
	rep.Memberships = len(memberships)
	return m.replaceAllMemberships(ctx, corpID, memberships)
}

// replaceAllMemberships replaces the corp's user_departments in one
// transaction, so audiences never see a half-written directory.
func (m *Mapper) replaceAllMemberships(ctx context.Context, corpID string, memberships [][2]int64) error {
	const rowsPerInsert = 2000
	return m.inTx(ctx, opSync, func(tx *sql.Tx) error {
		m.metrics.query(opSync)
		if _, err := tx.ExecContext(ctx, "DELETE FROM user_departments WHERE corp_id = ?", corpID); err != nil {
			return fmt.Errorf("idmap: sync memberships: %w", err)
		}
		for start := 0; start < len(memberships); start += rowsPerInsert {
			chunk := memberships[start:min(start+rowsPerInsert, len(memberships))]
			args := make([]any, 0, 3*len(chunk))
			for _, p := range chunk {
				args = append(args, corpID, p[0], p[1])
			}
			m.metrics.query(opSync)
			if _, err := tx.ExecContext(ctx,
				"INSERT IGNORE INTO user_departments (corp_id, dept_id, uid) VALUES "+rowMarks("(?,?,?)", len(chunk)), args...); err != nil {
				return fmt.Errorf("idmap: sync memberships: %w", err)
			}
		}
		return nil
	})
}

// rowMarks returns n copies of row joined by commas.
func rowMarks(row string, n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(row+",", n-1) + row
}
