// Package store keeps the notice service's tables in MySQL: drafts and
// scheduled notices (campaigns, migration 00011) with their approval
// trail (notice_approvals) and the approval cards to send again
// (approval_card_retries), the claims of reminders and recalls and who
// was reminded when (notice_acts, manual_reminders: ReminderLog), and the
// notice templates (notice_templates). Package campaign decides, package
// campaign/loops schedules and claims; both write these tables only
// through this package. Lease is the one claim of a row across replicas.
//
// States (yidu.NoticeState): draft -> scheduled -> sending -> sent, or
// cancelled (by a person, before sending), failed (with a reason), held
// (its time passed by more than MaxLateness while yidu was down: a person
// sends or cancels it). A notice is editable until it is sending.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/metric"
	"github.com/yidu-io/yidu/internal/namespace"
	"github.com/yidu-io/yidu/internal/opt"
	"github.com/yidu-io/yidu/internal/sqlrows"
)

// Directory is what the store needs from the directory (idmap.Mapper):
// the audience expansion a registration snapshots and the compose page's
// preview counts (one rule), so that an audience that reaches nobody is
// refused before it is stored, not when it fires.
type Directory interface {
	Expand(ctx context.Context, corpID string, a yidu.Audience) (yidu.Expansion, error)
}

// Options configures a Store.
type Options struct {
	// Directory expands audiences to check them; nil skips the check.
	Directory Directory
	// Apps are the configured apps: a stored notice names its app, whose
	// agent id and time zone come from here at send time.
	Apps   []yidu.App
	Logger *slog.Logger
	// Registerer takes the metrics; nil registers none.
	Registerer prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Evidence, when set, gets an entry for each approval step in the
	// step's transaction (issue 48).
	Evidence EvidenceLog
}

// Store keeps the notices (campaigns table).
type Store struct {
	db   *sql.DB
	dir  Directory
	apps map[string]yidu.App
	log  *slog.Logger
	now  func() time.Time
	met  *metrics
	// evidence logs the approval steps (Options.Evidence).
	evidence EvidenceLog
}

type metrics struct {
	transitions *prometheus.CounterVec
	lateness    prometheus.Histogram
	claims      *prometheus.CounterVec
}

// New returns a Store over db.
func New(db *sql.DB, opts Options) (*Store, error) {
	if db == nil {
		return nil, errors.New("campaign store: db is required")
	}
	opt.Logger(&opts.Logger)
	opt.Clock(&opts.Now)
	f := metric.New(opts.Registerer)
	m := &metrics{
		transitions: f.CounterVec("yidu_campaign_transitions_total", "Notices entering a state.", "state"),
		lateness: f.Histogram("yidu_campaign_lateness_seconds", "How late a scheduled notice started sending.",
			prometheus.ExponentialBuckets(0.5, 2, 16)),
		claims: f.CounterVec("yidu_campaign_claims_total", "Claims of due notices by result (won, lost, resumed).", "result"),
	}
	if err := f.Err("campaign"); err != nil {
		return nil, err
	}
	st := &Store{db: db, dir: opts.Directory, apps: map[string]yidu.App{}, log: opts.Logger.With("component", "campaign"), now: opts.Now, met: m, evidence: opts.Evidence}
	for _, a := range opts.Apps {
		st.apps[a.Name] = a
	}
	return st, nil
}

// check validates d as yidu.Registration.Validate does at send time (one
// rule for title, body, url and audience: a notice is stored only if it
// would register) and its schedule.
func (s *Store) check(ctx context.Context, d *yidu.Draft) error {
	now := s.now()
	reg := yidu.Registration{MsgID: d.MsgID, App: d.App, Title: d.Title, Body: d.Body, URL: d.URL, Audience: d.Audience, Send: true}
	if err := reg.Validate(now); err != nil {
		return err
	}
	d.MsgID, d.Title, d.Body, d.URL, d.Audience = reg.MsgID, reg.Title, reg.Body, reg.URL, reg.Audience
	if err := d.Schedule.Validate(now); err != nil {
		return err
	}
	if s.dir == nil {
		return nil
	}
	n, err := s.count(ctx, d.App.CorpID, d.Audience)
	if err != nil {
		return err
	}
	return d.Audience.CheckRecipients(n)
}

// Create stores a new draft or scheduled notice; invalid input is
// yidu.ErrInvalid and writes nothing, a msgid in use yidu.ErrConflict.
func (s *Store) Create(ctx context.Context, d yidu.Draft) (yidu.Notice, error) {
	return s.CreateWith(ctx, d, nil)
}

// CreateWith is Create with also (nil: none) writing in the same
// transaction (a compose's follow-up policy): both are stored, or neither.
func (s *Store) CreateWith(ctx context.Context, d yidu.Draft, also func(ctx context.Context, tx *sql.Tx, d yidu.Draft) error) (yidu.Notice, error) {
	aud, body, err := s.checkColumns(ctx, &d)
	if err != nil {
		return yidu.Notice{}, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	state := yidu.StateScheduled
	var sendAt any
	if d.Schedule.Draft {
		state = yidu.StateDraft
	} else {
		sendAt = d.Schedule.SendAt
	}
	// The msgid is claimed in the one namespace (internal/namespace) in
	// the same transaction as the row and the compose's follow-up policy:
	// another corp's or app's msgid, or one registered already, is
	// refused without saying whose.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return yidu.Notice{}, fmt.Errorf("campaign: begin %s: %w", d.MsgID, err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := namespace.Claim(ctx, tx, d.App.CorpID, d.App.Name, d.MsgID, namespace.Notice, now); err != nil {
		return yidu.Notice{}, err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO campaigns
		(msgid, corp_id, app, title, body, url, audience, content, state, send_at, created_by, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.MsgID, d.App.CorpID, d.App.Name, d.Title, d.Body, d.URL, aud, body, string(state), sendAt, d.By, now, now)
	if err != nil {
		if isDuplicate(err) {
			return yidu.Notice{}, fmt.Errorf("%w: msgid %s is taken", yidu.ErrConflict, d.MsgID)
		}
		return yidu.Notice{}, fmt.Errorf("campaign: insert %s: %w", d.MsgID, err)
	}
	if also != nil {
		if err := also(ctx, tx, d); err != nil {
			return yidu.Notice{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return yidu.Notice{}, fmt.Errorf("campaign: commit %s: %w", d.MsgID, err)
	}
	s.met.transitions.WithLabelValues(string(state)).Inc()
	s.log.InfoContext(ctx, "notice saved", "corp", d.App.CorpID, "msgid", d.MsgID, "state", state, "by", d.By)
	return s.Get(ctx, nil, d.MsgID)
}

// checkColumns checks d (see check) and returns its audience and content
// columns, as Create and Update store them.
func (s *Store) checkColumns(ctx context.Context, d *yidu.Draft) (aud []byte, body any, err error) {
	// The content is plain data, as written (check leaves it as it is).
	body, err = contentColumn(d.Content)
	if err != nil {
		return nil, nil, err
	}
	if err := s.check(ctx, d); err != nil {
		return nil, nil, err
	}
	aud, err = json.Marshal(d.Audience)
	if err != nil {
		return nil, nil, fmt.Errorf("campaign: audience: %w", err)
	}
	return aud, body, nil
}

// contentColumn is campaigns.content of c: its JSON, NULL for none.
func contentColumn(c *yidu.NoticeContent) (any, error) {
	if c == nil {
		return nil, nil
	}
	cc := *c
	if cc.Attachments == nil {
		cc.Attachments = []string{}
	}
	b, err := json.Marshal(cc)
	if err != nil {
		return nil, fmt.Errorf("campaign: content: %w", err)
	}
	return string(b), nil
}

func isDuplicate(err error) bool {
	return err != nil && strings.Contains(err.Error(), "Error 1062")
}

const noticeColumns = `msgid, corp_id, app, title, body, url, audience, state, send_at, started_at, finished_at,
	sent_late_by, state_reason, attempts, created_by, created_at, updated_at, approval, approval_hash, approval_now, content`

func scanNotice(sc interface{ Scan(...any) error }, apps map[string]yidu.App) (yidu.Notice, error) {
	var n yidu.Notice
	var aud []byte
	var state string
	var sendAt, started, finished sql.NullTime
	var late int64
	var body sql.NullString
	err := sc.Scan(&n.MsgID, &n.App.CorpID, &n.App.Name, &n.Title, &n.Body, &n.URL, &aud, &state, &sendAt, &started, &finished,
		&late, &n.Reason, &n.Attempts, &n.CreatedBy, &n.CreatedAt, &n.UpdatedAt, &n.Approval, &n.ApprovalHash, &n.ApprovalNow, &body)
	if err != nil {
		return n, err
	}
	if body.Valid {
		n.Content = new(yidu.NoticeContent)
		if err := json.Unmarshal([]byte(body.String), n.Content); err != nil {
			return n, fmt.Errorf("campaign: content of %s: %w", n.MsgID, err)
		}
	}
	n.State = yidu.NoticeState(state)
	if a, ok := apps[n.App.Name]; ok && a.CorpID == n.App.CorpID {
		n.App = a
	}
	n.SendAt, n.StartedAt, n.FinishedAt = sendAt.Time, started.Time, finished.Time
	n.SentLateBy = time.Duration(late) * time.Second
	if n.Reason == reasonSendNow {
		n.Reason = "" // a marker for the Runner, not a reason
	}
	if err := json.Unmarshal(aud, &n.Audience); err != nil {
		return n, fmt.Errorf("campaign: audience of %s: %w", n.MsgID, err)
	}
	return n, nil
}

// Get returns the notice msgID within corps (nil: any); yidu.ErrNotFound if
// there is none.
func (s *Store) Get(ctx context.Context, corps []string, msgID string) (yidu.Notice, error) {
	n, err := scanNotice(s.db.QueryRowContext(ctx, "SELECT "+noticeColumns+" FROM campaigns WHERE msgid = ?", msgID), s.apps)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && corps != nil && !contains(corps, n.App.CorpID)) {
		return yidu.Notice{}, fmt.Errorf("%w: %s", yidu.ErrNotFound, msgID)
	}
	if err != nil {
		return yidu.Notice{}, fmt.Errorf("campaign: read %s: %w", msgID, err)
	}
	return n, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s || v == "*" {
			return true
		}
	}
	return false
}

// List returns the notices of corps (nil: any) in state (empty: any)
// that keep keeps (nil: every one), newest first, after cursor (a msgid
// of the previous page), at most limit, and the next cursor ("" at the
// end). The filter comes first, then the page (issue 38): the cursor is
// always a notice keep kept, and a cursor naming one it does not keep is
// yidu.ErrInvalid, so neither says anything of the others.
func (s *Store) List(ctx context.Context, corps []string, state yidu.NoticeState, app, cursor string, limit int, keep func(yidu.Notice) bool) ([]yidu.Notice, string, error) {
	if cursor != "" && keep != nil {
		n, err := s.Get(ctx, corps, cursor)
		if errors.Is(err, yidu.ErrNotFound) || (err == nil && !keep(n)) {
			return nil, "", yidu.Fieldf("cursor", "cursor is not a cursor of this list")
		}
		if err != nil {
			return nil, "", err
		}
	}
	var out []yidu.Notice
	for {
		page, next, err := s.list(ctx, corps, state, app, cursor, max(limit, 100))
		if err != nil {
			return nil, "", err
		}
		for i, n := range page {
			if keep != nil && !keep(n) {
				continue
			}
			out = append(out, n)
			if len(out) == limit {
				if i == len(page)-1 && next == "" {
					return out, "", nil
				}
				return out, n.MsgID, nil
			}
		}
		if next == "" {
			return out, "", nil
		}
		cursor = next
	}
}

// list is one page of List before keep.
func (s *Store) list(ctx context.Context, corps []string, state yidu.NoticeState, app, cursor string, limit int) ([]yidu.Notice, string, error) {
	var where []string
	var args []any
	if corps != nil && !contains(corps, "*") {
		if len(corps) == 0 {
			return nil, "", nil
		}
		where = append(where, "corp_id IN (?"+strings.Repeat(", ?", len(corps)-1)+")")
		for _, c := range corps {
			args = append(args, c)
		}
	}
	if state != "" {
		where = append(where, "state = ?")
		args = append(args, string(state))
	}
	if app != "" {
		where = append(where, "app = ?")
		args = append(args, app)
	}
	if cursor != "" {
		where = append(where, "(created_at, msgid) < (SELECT created_at, msgid FROM campaigns WHERE msgid = ?)")
		args = append(args, cursor)
	}
	q := "SELECT " + noticeColumns + " FROM campaigns"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, msgid DESC LIMIT ?"
	args = append(args, limit+1)
	out, err := sqlrows.List(ctx, s.db, func(rows *sql.Rows, n *yidu.Notice) (err error) {
		*n, err = scanNotice(rows, s.apps)
		return err
	}, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("campaign: list: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].MsgID
	}
	return out, next, nil
}

// Edit changes a draft, scheduled or held notice; yidu.ErrNotEditable once it
// is sending (or ended), yidu.ErrInvalid for bad input (nothing written).
// The UPDATE is conditional on the state read, so an edit racing a claim
// either lands before it or is refused.
func (s *Store) Edit(ctx context.Context, corps []string, msgID string, p yidu.Patch) (yidu.Notice, error) {
	n, err := s.Get(ctx, corps, msgID)
	if err != nil {
		return yidu.Notice{}, err
	}
	if !n.State.Editable() {
		return yidu.Notice{}, fmt.Errorf("%w: %s is %s", yidu.ErrNotEditable, msgID, n.State)
	}
	d := yidu.Draft{MsgID: n.MsgID, App: n.App, Title: n.Title, Body: n.Body, URL: n.URL, Audience: n.Audience, Content: n.Content,
		Schedule: yidu.Schedule{SendAt: n.SendAt, Draft: n.State == yidu.StateDraft}}
	if p.Content != nil {
		d.Content = p.Content
	}
	if p.Title != nil {
		d.Title = *p.Title
	}
	if p.Body != nil {
		d.Body = *p.Body
	}
	if p.URL != nil {
		d.URL = *p.URL
	}
	if p.Audience != nil {
		d.Audience = *p.Audience
	}
	if p.Schedule != nil {
		d.Schedule = *p.Schedule
	} else if n.State == yidu.StateHeld {
		return yidu.Notice{}, yidu.Fieldf("send_at", "send_at: a held notice needs a new send_at, or send it now")
	}
	d.Schedule.Timezone = n.App.Timezone
	aud, body, err := s.checkColumns(ctx, &d)
	if err != nil {
		return yidu.Notice{}, err
	}
	state := yidu.StateScheduled
	var sendAt any = d.Schedule.SendAt
	if d.Schedule.Draft {
		state, sendAt = yidu.StateDraft, nil
	}
	// An approved notice edited is no longer approved (issue 41): it
	// waits, unclaimable, until Service asks approval of the new version.
	res, err := execRetry(ctx, s.db, `UPDATE campaigns SET title = ?, body = ?, url = ?, audience = ?, content = ?, state = ?, send_at = ?,
		state_reason = '', approval = IF(approval = '', '', 'pending'), approval_hash = IF(approval = '', '', 'edited'),
		updated_at = ? WHERE msgid = ? AND state = ?`,
		d.Title, d.Body, d.URL, aud, body, string(state), sendAt, s.now().UTC(), msgID, string(n.State))
	if err != nil {
		return yidu.Notice{}, fmt.Errorf("campaign: edit %s: %w", msgID, err)
	}
	if c, err := res.RowsAffected(); err == nil && c == 0 {
		return yidu.Notice{}, fmt.Errorf("%w: %s changed state", yidu.ErrNotEditable, msgID)
	}
	s.log.InfoContext(ctx, "notice edited", "corp", n.App.CorpID, "msgid", msgID, "state", state, "by", p.By)
	return s.Get(ctx, corps, msgID)
}

// Cancel cancels a draft, scheduled or held notice; yidu.ErrNotEditable once
// it is sending or ended.
func (s *Store) Cancel(ctx context.Context, corps []string, msgID, by string) (yidu.Notice, error) {
	n, err := s.Get(ctx, corps, msgID)
	if err != nil {
		return yidu.Notice{}, err
	}
	if !n.State.Editable() {
		return yidu.Notice{}, fmt.Errorf("%w: %s is %s", yidu.ErrNotEditable, msgID, n.State)
	}
	now := s.now().UTC()
	res, err := execRetry(ctx, s.db, `UPDATE campaigns SET state = 'cancelled', finished_at = ?, updated_at = ?
		WHERE msgid = ? AND state IN ('draft', 'scheduled', 'held')`, now, now, msgID)
	if err != nil {
		return yidu.Notice{}, fmt.Errorf("campaign: cancel %s: %w", msgID, err)
	}
	if c, err := res.RowsAffected(); err == nil && c == 0 {
		return yidu.Notice{}, fmt.Errorf("%w: %s changed state", yidu.ErrNotEditable, msgID)
	}
	s.met.transitions.WithLabelValues(string(yidu.StateCancelled)).Inc()
	s.log.InfoContext(ctx, "notice cancelled", "corp", n.App.CorpID, "msgid", msgID, "by", by)
	return s.Get(ctx, corps, msgID)
}

// SendNow makes a draft, scheduled or held notice due now: the Runner
// claims it as any scheduled notice (so it is sent once, by one replica).
// The UPDATE is conditional on the notice not being due now already, so
// of concurrent requests one makes it due and the others are
// yidu.ErrNotEditable: one act, one audit row. A held
// notice keeps its send_at, so its lateness is reported, and is not held
// again (hold_ok).
func (s *Store) SendNow(ctx context.Context, corps []string, msgID, by string) (yidu.Notice, error) {
	n, err := s.Get(ctx, corps, msgID)
	if err != nil {
		return yidu.Notice{}, err
	}
	if n.State != yidu.StateDraft && n.State != yidu.StateHeld && n.State != yidu.StateScheduled {
		return yidu.Notice{}, fmt.Errorf("%w: %s is %s", yidu.ErrNotEditable, msgID, n.State)
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	// A person's "send now" is never held: state_reason 'now' tells the
	// Runner (Runner.due), and send_at is now unless it was earlier.
	res, err := execRetry(ctx, s.db, `UPDATE campaigns SET state = 'scheduled', state_reason = ?,
		send_at = IF(send_at IS NULL OR send_at > ?, ?, send_at), updated_at = ?
		WHERE msgid = ? AND state = ? AND state_reason <> ?`, reasonSendNow, now, now, now, msgID, string(n.State), reasonSendNow)
	if err != nil {
		return yidu.Notice{}, fmt.Errorf("campaign: send %s: %w", msgID, err)
	}
	if c, err := res.RowsAffected(); err == nil && c == 0 {
		return yidu.Notice{}, fmt.Errorf("%w: %s is already being sent now, or changed state", yidu.ErrNotEditable, msgID)
	}
	s.log.InfoContext(ctx, "notice sent by hand", "corp", n.App.CorpID, "msgid", msgID, "by", by)
	return s.Get(ctx, corps, msgID)
}

// reasonSendNow marks a notice a person asked to send now.
const reasonSendNow = "send now"

// App is the configured app of that name; false if there is none.
func (s *Store) App(name string) (yidu.App, bool) {
	a, ok := s.apps[name]
	return a, ok
}

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Logger is the store's logger (component campaign).
func (s *Store) Logger() *slog.Logger { return s.log }

// inTx runs fn in a transaction of s's database.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
