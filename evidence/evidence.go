// Package evidence makes proof of what one member was told and how they
// confirmed it (issue 40): a Record per recipient per notice, read from
// what the send path, the read path and the follow-up already keep in
// MySQL; a one-page 告知确认书 PDF of it; a ZIP of a department's PDFs with
// a manifest and the ledger's inclusion proofs; and Check, which verifies
// such a ZIP offline.
//
// The package decides who may see a record (a Scope: a leader sees their
// own people; anyone else is ErrNotFound, as if the member were not a
// recipient) and what it holds. It writes nothing: the callers record each
// view and export as an audit row before answering.
//
// The ledger (issue 40 item 2) is another package's; Ledger below is what
// this one needs of it. Without one, a Record says so (LedgerConnected
// false) and the PDF prints 未接入账本.
package evidence

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/notice"
)

// ErrNotFound: no such notice, no such member, the member is not a
// recipient, or the caller's scope does not reach them. The edges answer
// 404 for all four alike, so a scoped caller learns nothing of people
// outside their scope.
var ErrNotFound = errors.New("evidence: not found")

// sendBatch is tracker.SendBatch: the first send puts the recipients, in
// uid order, into batches of this many UserIDs (batch n holds ranks
// n*sendBatch..). A member's batch follows from their rank.
const sendBatch = 1000

// Scope is whom a caller may see (access.View satisfies it).
type Scope interface {
	Contains(uid uint32) bool
}

// Versions are a notice's versions (notice.Store).
type Versions interface {
	List(ctx context.Context, corp, msgid string) ([]notice.Version, error)
}

// LedgerEntry is one fact of the member's in the ledger: its sequence
// number in the corp's log, its day's tree and its index in it, its kind
// (send, signal, reminder, version, recall) and its leaf hash.
type LedgerEntry struct {
	Seq      int64
	Day      string
	Index    int64
	Kind     string
	LeafHash [32]byte
}

// Proof is the inclusion proof of one entry in its day's tree (RFC 6962
// §2.1.1): the day, the leaf's index, the tree's size and root, and the
// audit path from the leaf up.
type Proof struct {
	Day      string
	Index    int64
	TreeSize int64
	Root     [32]byte
	Path     [][32]byte
}

// Ledger is what evidence needs of the tamper-evident ledger (package
// ledger, issue 40 item 2): the entries about one member of one notice,
// and each one's inclusion proof. Declared here, where it is used; cmd
// adapts the ledger to it.
type Ledger interface {
	EntriesFor(ctx context.Context, corp, msgid, userid string) ([]LedgerEntry, error)
	Prove(ctx context.Context, corp string, seq int64) (Proof, error)
}

// PageEvents are the reading page's own records of a member's signals
// (issue 39: opened, read_to_end, acknowledged), each with the version
// shown and the client's IP and User-Agent. This is the seam for them:
// until the page records them, message_read_record's first time per
// signal is all there is, with no IP, no User-Agent and a version
// inferred from the time (Signal.VersionInferred).
type PageEvents interface {
	PageEvents(ctx context.Context, corp, msgid string, uid uint32) ([]Signal, error)
}

// Options configures a Service.
type Options struct {
	// Ledger gives the ledger positions and proofs; nil: not connected
	// (未接入账本).
	Ledger Ledger
	// PageEvents gives the page's signals with IP and User-Agent; nil:
	// only message_read_record.
	PageEvents PageEvents
	// Zone is the corp's time zone for the PDF (default Asia/Shanghai,
	// docs/zh-CN words: show the zone only when it is not the corp's).
	Zone   *time.Location
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Workers make a ZIP's people at once (default 4): each person is a
	// few round trips to MySQL and a PDF's CPU.
	Workers int
}

// Service builds evidence records from MySQL.
type Service struct {
	db       *sql.DB
	versions Versions
	ledger   Ledger
	page     PageEvents
	zone     *time.Location
	log      *slog.Logger
	now      func() time.Time
	workers  int

	// deptMu guards deptCache, the last notice's departments at send
	// (written once by the send, so never stale while the notice lives).
	deptMu    sync.Mutex
	deptCache *sendDepartments
}

// New returns a Service over db (migrated) and the notices' versions.
func New(db *sql.DB, versions Versions, opts Options) (*Service, error) {
	if db == nil || versions == nil {
		return nil, errors.New("evidence: a database and the notices' versions are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Zone == nil {
		z, err := time.LoadLocation("Asia/Shanghai")
		if err != nil {
			z = time.FixedZone("CST", 8*3600)
		}
		opts.Zone = z
	}
	if err := checkFont(); err != nil {
		return nil, err
	}
	return &Service{db: db, versions: versions, ledger: opts.Ledger, page: opts.PageEvents, zone: opts.Zone,
		log: opts.Logger.With("component", "evidence"), now: opts.Now, workers: cmp.Or(opts.Workers, 4)}, nil
}

// Department is a department of the member's.
type Department struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// Person is who the record is about.
type Person struct {
	UID    uint32 `json:"uid"`
	UserID string `json:"userid"`
	Name   string `json:"name"`
	Left   bool   `json:"left"`
	// Departments are the member's departments when the notice was
	// first sent (DepartmentsAsOf "send", DepartmentsAt the moment the
	// send kept them: send_departments); for a notice sent before yidu
	// kept them, the directory's when the record is made
	// (DepartmentsAsOf "current", DepartmentsAt nil).
	Departments     []Department `json:"departments"`
	DepartmentsAsOf string       `json:"departments_as_of"`
	DepartmentsAt   *time.Time   `json:"departments_at"`
}

// Version is one version of the notice's content.
type Version struct {
	N             int       `json:"version"`
	Title         string    `json:"title"`
	SHA256        string    `json:"sha256"`
	Reacknowledge bool      `json:"reacknowledge"`
	CreatedAt     time.Time `json:"created_at"`
	CreatedBy     string    `json:"created_by"`
}

// Delivery is one attempt at the send batch that held the member: what
// WeCom answered and when.
type Delivery struct {
	Kind   string `json:"kind"`
	Batch  int    `json:"batch"`
	Status string `json:"status"`
	// ErrCode is WeCom's errcode; WeComMsgID its msgid for the batch.
	ErrCode    int64  `json:"errcode"`
	WeComMsgID string `json:"wecom_msgid"`
	// InvalidUser: WeCom listed the member in invaliduser; Unlicensed:
	// in unlicenseduser (no basic licence, doc path 90236), nil when the
	// batch's answer did not keep it (no answer, or sent before yidu
	// kept it).
	InvalidUser bool      `json:"invaliduser"`
	Unlicensed  *bool     `json:"unlicensed"`
	Version     int       `json:"version"`
	At          time.Time `json:"at"`
	Recalled    bool      `json:"recalled"`
}

// Signal is one signal of the member's.
type Signal struct {
	// Kind is button (the card's 我已阅读), link (the notice opened: the
	// tracked link or the reading page), enter_agent (entered the app),
	// or a page signal (read_to_end, acknowledged).
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	// Version is the version shown; VersionInferred: the record does not
	// say, and Version is the one current at At.
	Version         int  `json:"version"`
	VersionInferred bool `json:"version_inferred"`
	// Source is where it came from: card (callback), page, app.
	Source string `json:"source"`
	// ClientIP and UserAgent: page events only, "" when not recorded.
	ClientIP  string `json:"client_ip"`
	UserAgent string `json:"user_agent"`
	// CountedAsRead: the signal that made the member read
	// (message_read_record.source and read_time).
	CountedAsRead bool `json:"counted_as_read"`
}

// FollowUp is one reminder, escalation digest or manual reminder the
// member was sent.
type FollowUp struct {
	// Kind: reminder (a follow-up round's), digest (an escalation sent
	// to them as a leader), manual (提醒未读 from the dashboard),
	// update_card (通知已更新，请重新确认 of a material version: Version).
	Kind    string    `json:"kind"`
	Round   int       `json:"round"`
	Version int       `json:"version,omitempty"`
	Batch   int       `json:"batch"`
	Outcome string    `json:"outcome"`
	By      string    `json:"by,omitempty"`
	At      time.Time `json:"at"`
}

// Entry is a ledger entry of the member's with its proof; Proof nil when
// the ledger could not prove it.
type Entry struct {
	Seq      int64     `json:"seq"`
	Day      string    `json:"day"`
	Index    int64     `json:"index"`
	Kind     string    `json:"kind"`
	LeafHash string    `json:"leaf_hash"`
	Proof    *ProofDoc `json:"proof"`
}

// ProofDoc is a Proof as JSON carries it (hex).
type ProofDoc struct {
	Day      string   `json:"day"`
	Index    int64    `json:"index"`
	TreeSize int64    `json:"tree_size"`
	Root     string   `json:"root"`
	Path     []string `json:"path"`
}

// Event is one line of the record's timeline: every fact above, in time
// order.
type Event struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Version int       `json:"version,omitempty"`
	Detail  string    `json:"detail"`
}

// Record is the evidence of one member for one notice.
type Record struct {
	CorpID     string     `json:"corp_id"`
	MsgID      string     `json:"msgid"`
	App        string     `json:"app"`
	Title      string     `json:"title"`
	SentAt     time.Time  `json:"sent_at"`
	Person     Person     `json:"person"`
	Read       bool       `json:"read"`
	ReadTime   *time.Time `json:"read_time"`
	Versions   []Version  `json:"versions"`
	Deliveries []Delivery `json:"deliveries"`
	Signals    []Signal   `json:"signals"`
	FollowUps  []FollowUp `json:"follow_ups"`
	Timeline   []Event    `json:"timeline"`
	// LedgerConnected: yidu has a ledger; Ledger lists the member's
	// entries with their proofs, and Roots each day's root.
	LedgerConnected bool              `json:"ledger_connected"`
	Ledger          []Entry           `json:"ledger"`
	Roots           map[string]string `json:"roots"`
	GeneratedAt     time.Time         `json:"generated_at"`
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
	versions, err := s.versions.List(ctx, corp, msgid)
	if err != nil && !errors.Is(err, notice.ErrNotFound) {
		return Record{}, fmt.Errorf("evidence: versions of %s: %w", msgid, err)
	}
	names, err := s.departmentNames(ctx, corp)
	if err != nil {
		return Record{}, err
	}
	return s.build(ctx, corp, msgid, m, mem, versions, names)
}

// departmentNames are corp's departments by id.
func (s *Service) departmentNames(ctx context.Context, corp string) (map[int64]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT dept_id, name FROM departments WHERE corp_id = ?`, corp)
	if err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var name string
		if err := rows.Scan(&id, &name); err != nil {
			return nil, fmt.Errorf("evidence: departments: %w", err)
		}
		out[id] = name
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: departments: %w", err)
	}
	return out, nil
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
		GeneratedAt: s.now().UTC().Truncate(time.Second), Roots: map[string]string{}}
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
		rec.Versions = append(rec.Versions, Version{N: v.N, Title: v.Title, SHA256: v.SHA256.String(),
			Reacknowledge: v.Reacknowledge, CreatedAt: v.CreatedAt.UTC(), CreatedBy: v.CreatedBy})
	}
	rec.Read = mem.isRead
	if mem.isRead && mem.readTime.Valid {
		t := mem.readTime.Time.UTC()
		rec.ReadTime = &t
	}
	if rec.Deliveries, err = s.deliveries(ctx, corp, msgid, mem, rec.Versions); err != nil {
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

func (s *Service) deliveries(ctx context.Context, corp, msgid string, mem member, vs []Version) ([]Delivery, error) {
	var rank int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM message_read_record WHERE corp_id = ? AND msgid = ? AND uid < ?`,
		corp, msgid, mem.uid).Scan(&rank); err != nil {
		return nil, fmt.Errorf("evidence: batch of %s: %w", msgid, err)
	}
	batch := rank / sendBatch
	rows, err := s.db.QueryContext(ctx, `SELECT kind, batch, status, errcode, COALESCE(invalid, ''), unlicensed, COALESCE(wecom_msgid, ''),
		sent_at, recalled_at IS NOT NULL FROM message_sends WHERE corp_id = ? AND msgid = ? AND kind = 'send' AND batch = ?
		ORDER BY sent_at`, corp, msgid, batch)
	if err != nil {
		return nil, fmt.Errorf("evidence: sends of %s: %w", msgid, err)
	}
	defer rows.Close()
	out := []Delivery{}
	for rows.Next() {
		var d Delivery
		var invalid string
		var unlicensed sql.NullString
		if err := rows.Scan(&d.Kind, &d.Batch, &d.Status, &d.ErrCode, &invalid, &unlicensed, &d.WeComMsgID, &d.At, &d.Recalled); err != nil {
			return nil, fmt.Errorf("evidence: sends of %s: %w", msgid, err)
		}
		d.At = d.At.UTC()
		// WeCom lower-cases invaliduser (doc path 90236).
		d.InvalidUser = listed(invalid, mem.userID)
		if unlicensed.Valid {
			u := listed(unlicensed.String, mem.userID)
			d.Unlicensed = &u
		}
		d.Version = versionAt(vs, d.At)
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: sends of %s: %w", msgid, err)
	}
	return out, nil
}

// listed reports whether WeCom's '|'-joined list of UserIDs names
// userid (UserIDs are case-insensitive in WeCom).
func listed(list, userid string) bool {
	if list == "" {
		return false
	}
	return slices.ContainsFunc(strings.Split(list, "|"), func(id string) bool { return strings.EqualFold(id, userid) })
}

func (s *Service) followUps(ctx context.Context, corp, msgid string, uid uint32) ([]FollowUp, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT kind, round, batch, outcome, '', reminded_at, '' FROM reminder_log
		WHERE corp_id = ? AND msgid = ? AND uid = ?
		UNION ALL SELECT 'manual', 0, 0, 'sent', reminded_by, reminded_at, scope FROM manual_reminders
		WHERE corp_id = ? AND msgid = ? AND uid = ?`, corp, msgid, uid, corp, msgid, uid)
	if err != nil {
		return nil, fmt.Errorf("evidence: reminders of %s: %w", msgid, err)
	}
	defer rows.Close()
	out := []FollowUp{}
	for rows.Next() {
		var f FollowUp
		var scope string
		if err := rows.Scan(&f.Kind, &f.Round, &f.Batch, &f.Outcome, &f.By, &f.At, &scope); err != nil {
			return nil, fmt.Errorf("evidence: reminders of %s: %w", msgid, err)
		}
		// campaign.Service.Reconfirm records each update card as a manual
		// reminder of scope "reack:v<N>".
		if v, ok := strings.CutPrefix(scope, "reack:v"); ok {
			f.Kind = "update_card"
			f.Version, _ = strconv.Atoi(v)
		}
		f.At = f.At.UTC()
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("evidence: reminders of %s: %w", msgid, err)
	}
	slices.SortStableFunc(out, func(a, b FollowUp) int { return a.At.Compare(b.At) })
	return out, nil
}

func (s *Service) ledgerEntries(ctx context.Context, rec *Record) error {
	es, err := s.ledger.EntriesFor(ctx, rec.CorpID, rec.MsgID, rec.Person.UserID)
	if err != nil {
		return fmt.Errorf("evidence: ledger entries: %w", err)
	}
	rec.Ledger = make([]Entry, 0, len(es))
	for _, e := range es {
		en := Entry{Seq: e.Seq, Day: e.Day, Index: e.Index, Kind: e.Kind, LeafHash: hexOf(e.LeafHash)}
		p, err := s.ledger.Prove(ctx, rec.CorpID, e.Seq)
		if err != nil {
			return fmt.Errorf("evidence: ledger proof of %d: %w", e.Seq, err)
		}
		doc := proofDoc(p)
		en.Proof = &doc
		rec.Roots[p.Day] = doc.Root
		rec.Ledger = append(rec.Ledger, en)
	}
	return nil
}

// timeline merges the record's facts in time order; at equal times, in
// the order a reader expects: version, delivery, follow-up, signal.
func timeline(rec Record) []Event {
	out := []Event{}
	for _, v := range rec.Versions {
		d := "版本 " + strconv.Itoa(v.N) + " sha256 " + v.SHA256
		if v.Reacknowledge {
			d += "（需重新确认）"
		}
		out = append(out, Event{At: v.CreatedAt, Kind: "version", Version: v.N, Detail: d})
	}
	for _, d := range rec.Deliveries {
		det := fmt.Sprintf("第 %d 批 %s errcode %d", d.Batch+1, d.Status, d.ErrCode)
		if d.InvalidUser {
			det += " invaliduser"
		}
		if d.Unlicensed != nil && *d.Unlicensed {
			det += " unlicenseduser"
		}
		out = append(out, Event{At: d.At, Kind: "delivery", Version: d.Version, Detail: det})
	}
	for _, f := range rec.FollowUps {
		d := fmt.Sprintf("%s %d %s", f.Kind, f.Round, f.Outcome)
		if f.Kind == "update_card" {
			d = fmt.Sprintf("update_card v%d %s", f.Version, f.Outcome)
		}
		out = append(out, Event{At: f.At, Kind: "follow_up", Version: f.Version, Detail: d})
	}
	for _, sg := range rec.Signals {
		out = append(out, Event{At: sg.At, Kind: "signal", Version: sg.Version, Detail: sg.Kind + " (" + sg.Source + ")"})
	}
	order := map[string]int{"version": 0, "delivery": 1, "follow_up": 2, "signal": 3}
	slices.SortStableFunc(out, func(a, b Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return order[a.Kind] - order[b.Kind]
	})
	return out
}
