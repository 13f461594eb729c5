package idmap

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// Directory reads one corp's WeCom directory for Syncer. wecom.Directory
// implements it: which secret and which APIs a read takes is the WeCom
// client's business (an app secret sees its visible range, the
// contacts-sync secret the whole corp); Syncer writes what it is given.
type Directory interface {
	List(ctx context.Context) (yidu.Listing, error)
}

// ErrEmptyDirectory: WeCom listed no department or no member. Sync refuses
// to apply it, since it would mark every member as left.
var ErrEmptyDirectory = errors.New("idmap: sync: WeCom listed no department or no member " +
	"(an app whose visible range (可见范围) holds no department, or members only one by one, " +
	"which the app secret cannot list: add departments to the range or configure the contacts-sync secret)")

// SampleSize bounds the UserIDs a Report names as examples: enough to
// look into, never an employee list.
const SampleSize = 5

// Syncer copies a corp's WeCom directory into MySQL through a Mapper.
type Syncer struct {
	m       *Mapper
	dirs    map[string]Directory
	log     *slog.Logger
	runs    *prometheus.CounterVec
	seconds prometheus.Histogram
	unseen  *prometheus.GaugeVec
}

// Report counts what one Sync saw and changed.
type Report struct {
	// Source names the secret and the APIs read (yidu.Listing.Source).
	Source string
	// Complete reports whether the read saw the whole corp; only then are
	// members missing from it marked left.
	Complete    bool
	Departments int // departments listed
	Users       int // members listed (UserIDs that differ only in case are one)
	Created     int // members given a new uid
	Updated     int // existing members whose name, departments, flag or status changed
	Left        int // members no longer listed by a complete read, now status 2
	// Unseen counts active members a partial read did not list: outside
	// the app's visible range, or gone from the corp, which a partial read
	// cannot tell apart. They stay active; their memberships of the
	// departments the read listed are dropped. UnseenSample names up to
	// SampleSize of them.
	Unseen       int
	UnseenSample []string
	// Flagged counts listed members whose UserID breaks WeCom's rule
	// (yidu.UserID.Valid): kept, so their reads count, and flagged
	// (users.bad_userid), so no send addresses them. FlaggedSample names up
	// to SampleSize of them.
	Flagged       int
	FlaggedSample []string
	// Unstorable counts listed UserIDs users.userid cannot hold (empty,
	// longer than 64 bytes, not UTF-8): left out.
	Unstorable  int
	Memberships int // user_departments rows written
	// Names counts listed members with a name; DepartmentNames reports
	// whether department names were listed. Names not listed keep the
	// stored ones.
	Names           int
	DepartmentNames bool
	// Tags counts the tags listed; TagUsers and TagDepartments their
	// members written (users the directory knows, listed departments).
	Tags, TagUsers, TagDepartments int
	// Leaders counts department_leaders rows written (leaders the
	// directory knows).
	Leaders int
}

// NewSyncer returns a Syncer using dirs (by corp_id) to read WeCom.
func NewSyncer(m *Mapper, dirs map[string]Directory, opts Options) (*Syncer, error) {
	if m == nil {
		return nil, errors.New("idmap: sync: a Mapper is required")
	}
	opt.Logger(&opts.Logger)
	f := metric.New(opts.Registerer)
	s := &Syncer{
		m:       m,
		dirs:    dirs,
		log:     opts.Logger.With("component", "idmap.sync"),
		runs:    f.CounterVec("yidu_idmap_sync_total", "Directory syncs by result.", "result"),
		seconds: f.Histogram("yidu_idmap_sync_seconds", "Duration of a directory sync.", prometheus.ExponentialBuckets(0.1, 2, 12)),
		unseen: f.GaugeVec("yidu_idmap_sync_unseen_members",
			"Active members the last partial directory read of a corp did not list (outside the app's visible range, or gone).", "corp"),
	}
	metric.Preset(s.runs.MetricVec, []string{"ok", "error"})
	return s, f.Err("idmap: sync")
}

// member is one listed member, by folded UserID.
type member struct {
	userID string // the spelling WeCom listed first
	name   string
	depts  []int64
}

// Sync reads the corp's directory from WeCom and writes it. Listed members
// get uids (bulk Assign), names, departments, their UserID flag and status
// active. A complete read replaces the corp's departments and
// user_departments and marks members it no longer lists left (status 2,
// uid kept). A partial read (an app's visible range) is the truth only
// about what it covers: its departments are upserted, memberships of those
// departments replaced, and a member it does not list is reported
// (Report.Unseen), never marked left. A renamed member cannot be told from
// a new one here (only change_contact says so): the new UserID gets a new
// uid and the old one leaves.
func (s *Syncer) Sync(ctx context.Context, corpID string) (Report, error) {
	begun := time.Now()
	rep, err := s.sync(ctx, corpID)
	s.seconds.Observe(time.Since(begun).Seconds())
	if err != nil {
		s.runs.WithLabelValues("error").Inc()
		return rep, err
	}
	s.runs.WithLabelValues("ok").Inc()
	s.unseen.WithLabelValues(corpID).Set(float64(rep.Unseen))
	// Counts only: samples of UserIDs go to the Report, never to logs.
	s.log.Info("directory synced", "corp", corpID, "source", rep.Source, "complete", rep.Complete,
		"departments", rep.Departments, "users", rep.Users, "created", rep.Created, "updated", rep.Updated,
		"left", rep.Left, "unseen", rep.Unseen, "flagged", rep.Flagged, "unstorable", rep.Unstorable,
		"seconds", time.Since(begun).Seconds())
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
	l, err := dir.List(ctx)
	if err != nil {
		return rep, fmt.Errorf("idmap: sync %s: %w", corpID, err)
	}
	rep.Source, rep.Complete, rep.DepartmentNames = l.Source, l.Complete, l.DepartmentNames
	depts := make([]yidu.Department, 0, len(l.Departments))
	for _, d := range l.Departments {
		if d.ID >= 0 && d.ParentID >= 0 {
			depts = append(depts, d)
		}
	}
	members, order := group(l.Members, &rep)
	if len(depts) == 0 || len(members) == 0 {
		return rep, ErrEmptyDirectory
	}
	rep.Departments, rep.Users = len(depts), len(members)
	if err := s.m.writeDepartments(ctx, corpID, depts, l.Complete); err != nil {
		return rep, err
	}
	if err := s.m.writeMembers(ctx, corpID, members, order, depts, l, &rep); err != nil {
		return rep, err
	}
	s.m.dropIndex(corpID)
	return rep, nil
}

// group merges the listed members by folded UserID (WeCom compares
// UserIDs case-insensitively), in first-seen order, and counts names,
// flagged and unstorable UserIDs.
func group(list []yidu.Member, rep *Report) (map[string]*member, []string) {
	members := make(map[string]*member, len(list))
	var order []string
	for _, lm := range list {
		if checkUserID(lm.UserID) != nil {
			rep.Unstorable++
			continue
		}
		key := fold(lm.UserID)
		mb := members[key]
		if mb == nil {
			mb = &member{userID: lm.UserID}
			members[key] = mb
			order = append(order, key)
		}
		if mb.name == "" {
			mb.name = lm.Name
		}
		for _, d := range lm.Departments {
			if d >= 0 && !slices.Contains(mb.depts, d) {
				mb.depts = append(mb.depts, d)
			}
		}
	}
	var flagged []string
	for _, key := range order {
		mb := members[key]
		if mb.name != "" {
			rep.Names++
		}
		if !yidu.UserID(mb.userID).Valid() {
			flagged = append(flagged, mb.userID)
		}
	}
	rep.Flagged, rep.FlaggedSample = len(flagged), sample(flagged)
	return members, order
}

// sample returns up to SampleSize of ids, the same ones every time.
func sample(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return ids[:min(len(ids), SampleSize)]
}

// writeDepartments writes the listed departments in one transaction: a
// complete read replaces the corp's, a partial one upserts the ones it saw.
// A department listed without a name keeps the name stored before.
func (m *Mapper) writeDepartments(ctx context.Context, corpID string, depts []yidu.Department, complete bool) error {
	return m.inTx(ctx, opSync, func(tx *sql.Tx) error {
		m.metrics.query(opSync)
		old, err := sqlrows.Map[int64, string](ctx, tx, "SELECT dept_id, name FROM departments WHERE corp_id = ? FOR UPDATE", corpID)
		if err != nil {
			return fmt.Errorf("idmap: sync departments: %w", err)
		}
		if complete {
			m.metrics.query(opSync)
			if _, err := tx.ExecContext(ctx, "DELETE FROM departments WHERE corp_id = ?", corpID); err != nil {
				return fmt.Errorf("idmap: sync departments: %w", err)
			}
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
				"INSERT INTO departments (corp_id, dept_id, parent_id, name, sort_order) VALUES "+
					rowMarks("(?,?,?,?,?)", len(chunk))+
					" ON DUPLICATE KEY UPDATE parent_id = VALUES(parent_id), sort_order = VALUES(sort_order), name = VALUES(name)",
				args...); err != nil {
				return fmt.Errorf("idmap: sync departments: %w", err)
			}
		}
		return nil
	})
}

// storedDepartments parses a users.departments value; one that does not
// parse counts as none (the column is only written by FormatDepartments).
func (m *Mapper) storedDepartments(corpID, s string) []int64 {
	ids, err := ParseDepartments(s)
	if err != nil {
		m.log.Warn("users.departments not parseable; treated as none", "corp", corpID)
		return nil
	}
	return ids
}

// writeMemberships replaces, in one transaction so audiences never see a
// half-written directory, the corp's user_departments rows of the
// departments in scope (nil: every row) with memberships.
func (m *Mapper) writeMemberships(ctx context.Context, corpID string, scope []int64, memberships [][2]int64, extra extras) error {
	const rowsPerInsert = 2000
	return m.inTx(ctx, opSync, func(tx *sql.Tx) error {
		if err := m.writeExtras(ctx, tx, corpID, scope, extra); err != nil {
			return err
		}
		if err := bumpVersion(ctx, tx, corpID); err != nil {
			return err
		}
		err := m.clearScope(ctx, tx, corpID, scope, "DELETE FROM user_departments WHERE corp_id = ?",
			"DELETE FROM user_departments WHERE corp_id = ? AND dept_id IN (")
		if err != nil {
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

// clearScope deletes corp's rows that a sync of scope replaces: all of
// them with all when scope is nil (the whole directory), else those of
// scope's departments with inScope, a DELETE ending in "dept_id IN (".
func (m *Mapper) clearScope(ctx context.Context, tx *sql.Tx, corpID string, scope []int64, all, inScope string) error {
	if scope == nil {
		m.metrics.query(opSync)
		_, err := tx.ExecContext(ctx, all, corpID)
		return err
	}
	return eachChunk(corpID, scope, func(marks string, args []any) error {
		m.metrics.query(opSync)
		_, err := tx.ExecContext(ctx, inScope+marks+")", args...)
		return err
	})
}
