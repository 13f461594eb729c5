package evidence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/notice"
)

// Joined is a standing notice's enrolment of the member.
type Joined struct {
	JoinedAt time.Time  `json:"joined_at"`
	SentAt   *time.Time `json:"sent_at"`
	Version  int        `json:"version"`
	Deadline time.Time  `json:"deadline"`
	batch    int
}

// joined is mem's enrolment in msgid (nil: one of the first send's).
func (s *Service) joined(ctx context.Context, corp, msgid string, uid uint32) (*Joined, error) {
	var j Joined
	var sent sql.NullTime
	err := s.db.QueryRowContext(ctx, `SELECT joined_at, sent_at, version, deadline, batch FROM standing_enrolments
		WHERE corp_id = ? AND msgid = ? AND uid = ?`, corp, msgid, uid).Scan(&j.JoinedAt, &sent, &j.Version, &j.Deadline, &j.batch)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: enrolment in %s: %w", msgid, err)
	}
	j.JoinedAt, j.Deadline = j.JoinedAt.UTC(), j.Deadline.UTC()
	if sent.Valid {
		t := sent.Time.UTC()
		j.SentAt = &t
	}
	return &j, nil
}

// message is the notice's row.
type message struct {
	app, title string
	sentAt     time.Time
}

func (s *Service) message(ctx context.Context, corp, msgid string) (message, error) {
	var m message
	err := s.db.QueryRowContext(ctx, `SELECT app, title, sent_at FROM messages WHERE corp_id = ? AND msgid = ?`, corp, msgid).
		Scan(&m.app, &m.title, &m.sentAt)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	if err != nil {
		return m, fmt.Errorf("evidence: notice %s: %w", msgid, err)
	}
	m.sentAt = m.sentAt.UTC()
	return m, nil
}

// member is a recipient's row joined with their read record.
type member struct {
	uid       uint32
	userID    string
	name      string
	status    int
	depts     string
	isRead    bool
	readTime  sql.NullTime
	source    int
	signalsAt [3]sql.NullTime // button, link, enter
}

const memberColumns = `u.uid, u.userid, u.name, u.status, u.departments, r.is_read, r.read_time, r.source, r.button_at, r.link_at, r.enter_at`

func scanMember(sc interface{ Scan(...any) error }) (member, error) {
	var m member
	err := sc.Scan(&m.uid, &m.userID, &m.name, &m.status, &m.depts, &m.isRead, &m.readTime, &m.source,
		&m.signalsAt[0], &m.signalsAt[1], &m.signalsAt[2])
	return m, err
}

// Record returns the evidence of userid for corp's msgid, if scope
// reaches them; ErrNotFound otherwise.
func (s *Service) Record(ctx context.Context, scope Scope, corp, msgid, userid string) (Record, error) {
	if !yidu.UserID(userid).Valid() {
		return Record{}, ErrNotFound
	}
	m, err := s.message(ctx, corp, msgid)
	if err != nil {
		return Record{}, err
	}
	row := s.db.QueryRowContext(ctx, `SELECT `+memberColumns+` FROM users u
		JOIN message_read_record r ON r.corp_id = u.corp_id AND r.uid = u.uid AND r.msgid = ?
		WHERE u.corp_id = ? AND u.userid = ?`, msgid, corp, userid)
	mem, err := scanMember(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, fmt.Errorf("evidence: member of %s: %w", msgid, err)
	}
	if scope == nil || !scope.Contains(mem.uid) {
		return Record{}, ErrNotFound
	}
	visible, err := s.visibleDepartments(ctx, corp, scope)
	if err != nil {
		return Record{}, err
	}
	if s.ledger != nil {
		// The record's proofs lead to a checkpoint signed now.
		if _, err := s.ledger.Checkpoint(ctx, corp); err != nil {
			return Record{}, fmt.Errorf("evidence: checkpoint: %w", err)
		}
	}
	versions, err := s.versions.List(ctx, corp, msgid)
	if err != nil && !errors.Is(err, notice.ErrNotFound) {
		return Record{}, fmt.Errorf("evidence: versions of %s: %w", msgid, err)
	}
	names, err := s.departmentNames(ctx, corp)
	if err != nil {
		return Record{}, err
	}
	rec, err := s.build(ctx, corp, msgid, m, mem, versions, names)
	if err != nil {
		return Record{}, err
	}
	cutDepartments(&rec, visible)
	return rec, nil
}

// visibleDepartments are the departments scope sees (a DepartmentScope's
// with their subtrees in today's tree), nil for a scope that sees all.
func (s *Service) visibleDepartments(ctx context.Context, corp string, scope Scope) (map[int64]bool, error) {
	ds, ok := scope.(DepartmentScope)
	if !ok {
		return nil, nil
	}
	ids, all := ds.Departments()
	if all {
		return nil, nil
	}
	org, err := idmap.Tree(ctx, s.db, corp)
	if err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	out := map[int64]bool{}
	for _, d := range org.Subtree(ids...) {
		out[d] = true
	}
	return out, nil
}

// cutDepartments keeps the person's departments that visible holds (nil:
// all of them).
func cutDepartments(rec *Record, visible map[int64]bool) {
	if visible == nil {
		return
	}
	rec.Person.Departments = slices.DeleteFunc(rec.Person.Departments, func(d Department) bool { return !visible[d.ID] })
}

// departmentNames are corp's departments by id, read through idmap
// (which owns departments).
func (s *Service) departmentNames(ctx context.Context, corp string) (map[int64]string, error) {
	names, err := idmap.DepartmentNames(ctx, s.db, corp)
	if err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	return names, nil
}

// versionAt is the number of the version current at t: the latest made
// at or before it (1 when none is older: the send).
func versionAt(vs []Version, t time.Time) int {
	n := 1
	for _, v := range vs {
		if !v.CreatedAt.After(t) && v.N > n {
			n = v.N
		}
	}
	if len(vs) == 0 {
		return 0
	}
	return n
}

// signalKinds are message_read_record's signal columns in memberColumns
// order, with where each comes from.
var signalKinds = [3]struct {
	kind, source string
	sig          yidu.Signal
}{
	{"button", "card", yidu.SignalButton},
	{"link", "page", yidu.SignalLink},
	{"enter_agent", "app", yidu.SignalEnterAgent},
}

func (s *Service) build(ctx context.Context, corp, msgid string, m message, mem member, nvs []notice.Version, names map[int64]string) (Record, error) {
	rec := Record{CorpID: corp, MsgID: msgid, App: m.app, Title: m.title, SentAt: m.sentAt,
		GeneratedAt: s.now().UTC().Truncate(time.Second)}
	rec.Person = Person{UID: mem.uid, UserID: mem.userID, Name: mem.name, Left: mem.status == int(yidu.StatusLeft),
		DepartmentsAsOf: "current", Departments: []Department{}}
	atSend, err := s.departmentsAtSend(ctx, corp, msgid, mem.uid)
	if err != nil {
		return Record{}, err
	}
	if atSend != nil {
		rec.Person.Departments, rec.Person.DepartmentsAsOf = atSend.depts, "send"
		at := atSend.at
		rec.Person.DepartmentsAt = &at
	} else {
		for _, f := range strings.Split(mem.depts, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				continue
			}
			rec.Person.Departments = append(rec.Person.Departments, Department{ID: id, Name: names[id]})
		}
	}
	rec.Versions = make([]Version, 0, len(nvs))
	for _, v := range nvs {
		rec.Versions = append(rec.Versions, Version{N: v.N, Title: v.Title, SHA256: v.SHA256.String(), Opening: firstLines(v.Markdown),
			Reacknowledge: v.Reacknowledge, CreatedAt: v.CreatedAt.UTC(), CreatedBy: v.CreatedBy})
	}
	rec.Read = mem.isRead
	if mem.isRead && mem.readTime.Valid {
		t := mem.readTime.Time.UTC()
		rec.ReadTime = &t
	}
	if rec.Joined, err = s.joined(ctx, corp, msgid, mem.uid); err != nil {
		return Record{}, err
	}
	if rec.Deliveries, err = s.deliveries(ctx, corp, msgid, mem, rec.Joined, rec.Versions); err != nil {
		return Record{}, err
	}
	rec.Signals = []Signal{}
	for i, k := range signalKinds {
		at := mem.signalsAt[i]
		if !at.Valid {
			continue
		}
		t := at.Time.UTC()
		rec.Signals = append(rec.Signals, Signal{Kind: k.kind, At: t, Version: versionAt(rec.Versions, t), VersionInferred: true,
			Source: k.source, CountedAsRead: mem.isRead && mem.source == int(k.sig) && mem.readTime.Valid && mem.readTime.Time.Equal(at.Time)})
	}
	if s.page != nil {
		pe, err := s.page.PageEvents(ctx, corp, msgid, mem.uid)
		if err != nil {
			return Record{}, fmt.Errorf("evidence: page events: %w", err)
		}
		// The page's own event of a signal the row also keeps (the link
		// opened, link_at) is the same fact, with its version, IP and
		// User-Agent: the row's copy goes, so it is listed once.
		rec.Signals = slices.DeleteFunc(rec.Signals, func(c Signal) bool {
			return slices.ContainsFunc(pe, func(p Signal) bool { return p.Kind == c.Kind && p.At.Equal(c.At) })
		})
		rec.Signals = append(rec.Signals, pe...)
	}
	slices.SortStableFunc(rec.Signals, func(a, b Signal) int { return a.At.Compare(b.At) })
	if rec.FollowUps, err = s.followUps(ctx, corp, msgid, mem.uid); err != nil {
		return Record{}, err
	}
	if s.ledger != nil {
		rec.LedgerConnected = true
		if err := s.ledgerEntries(ctx, &rec); err != nil {
			return Record{}, err
		}
	}
	rec.Timeline = timeline(rec)
	return rec, nil
}
