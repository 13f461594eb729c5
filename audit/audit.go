// Package audit records who did what in yidu (issue 31 item 4): sign-ins,
// sends, reminders, recalls, exports. Callers declare and hold a Recorder;
// MySQL is the implementation, table audit_events (migration 00013).
//
// An event never carries a token, an OAuth code, a cookie, a password or
// an employee list: Actor is a name (a WeCom UserID, a password user's
// name, a token's name) and Detail a short summary.
package audit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/noticedel"
)

// Event is one audited action.
type Event struct {
	// ID orders events (the keyset cursor of List); set by List, ignored
	// by Record.
	ID int64
	At time.Time
	// Actor names who acted: a WeCom sign-in's UserID, a password user's
	// name or a token's name (never the token).
	Actor     string
	ActorKind string // "wecom", "password", "token"
	Role      string
	Action    yidu.Action
	CorpID    string
	App       string
	MsgID     string
	// People is how many people the action touched (a send's recipients,
	// an export's rows).
	People    int64
	ClientIP  string
	UserAgent string
	Outcome   string // "ok", "refused", "failed"; "started" (OutcomeStarted)
	// Detail is an optional summary, e.g. an export's scope.
	Detail string
}

// OutcomeStarted is the outcome of the row a streamed download (an
// export, a PDF, a ZIP) writes before its first byte, so nothing leaves
// unaudited (fail closed); Ended is the row saying how it ended.
const OutcomeStarted = "started"

// Ended is the row of how the streamed download that e started ended,
// written written people (rows, records): outcome "ok" when the whole
// file was written to the client (err nil), else "failed" with how far it
// got (detail written=N). A download cut short, by a backend error or a
// client gone midway, never reads as a success. This is the one rule:
// every streamed download records its end through it.
func (e Event) Ended(written int64, err error) Event {
	e.Outcome, e.People = "ok", written
	if err != nil {
		e.Outcome = "failed"
		e.Detail += fmt.Sprintf(" written=%d", written)
	}
	return e
}

// Recorder writes audit events; the dashboard declares its own copy of
// this interface.
type Recorder interface {
	Record(ctx context.Context, e Event) error
}

// MySQL records events in audit_events.
type MySQL struct{ db *sql.DB }

// NewMySQL returns the MySQL recorder over db (migrated to 00013).
func NewMySQL(db *sql.DB) *MySQL { return &MySQL{db: db} }

// clip cuts s to n runes so an over-long user agent cannot fail the write.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Record writes e; an invalid action or empty actor is refused.
func (m *MySQL) Record(ctx context.Context, e Event) error {
	return Insert(ctx, m.db, e)
}

// Execer is a *sql.DB or a *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Insert writes e through ex: inside the caller's transaction when ex
// is one, so an act and its audit row are written together or not at
// all (an approval's steps, issue 41). An invalid action or empty actor
// is refused.
func Insert(ctx context.Context, ex Execer, e Event) error {
	if err := e.Action.Validate(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if e.Actor == "" || e.Outcome == "" {
		return fmt.Errorf("audit: actor and outcome are required: %w", yidu.ErrInvalid)
	}
	_, err := ex.ExecContext(ctx, `INSERT INTO audit_events
		(at, actor, actor_kind, role, action, corp_id, app, msgid, people, client_ip, user_agent, outcome, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.At.UTC(), clip(e.Actor, 128), clip(e.ActorKind, 16), clip(e.Role, 32), string(e.Action), clip(e.CorpID, 64),
		clip(e.App, 64), clip(e.MsgID, 64), e.People, clip(e.ClientIP, 45), clip(e.UserAgent, 255), clip(e.Outcome, 16), clip(e.Detail, 512))
	if err != nil {
		return fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	return nil
}

// Anonymise blanks the client IP, User-Agent and detail (which may name
// a UserID) of the events about message msgID (the retention package's
// anonymisation of a notice past its retention), and returns how many
// events had any.
func Anonymise(ctx context.Context, ex Execer, corpID, msgID string) (int64, error) {
	return noticedel.Blank(ctx, ex, "audit", "events",
		"UPDATE audit_events SET client_ip = '', user_agent = '', detail = '' WHERE corp_id = ? AND msgid = ? AND (client_ip <> '' OR user_agent <> '' OR detail <> '')", corpID, msgID)
}

// Purge deletes the events older than before, in chunks (for
// `yidu archive purge` and audit.retention); it returns how many it deleted.
func (m *MySQL) Purge(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	for {
		res, err := m.db.ExecContext(ctx, `DELETE FROM audit_events WHERE at < ? ORDER BY id LIMIT 5000`, before.UTC())
		if err != nil {
			return n, fmt.Errorf("audit: purge: %w", err)
		}
		k, _ := res.RowsAffected()
		n += k
		if k < 5000 {
			return n, nil
		}
	}
}

// MaxLimit bounds one page of List.
const MaxLimit = 500

// Query selects events for the audit page and GET /api/v1/audit. Empty
// fields select everything.
type Query struct {
	// Corps restricts the events to these corps; nil means every corp
	// (an admin of "*"), empty means none.
	Corps  []string
	Actor  string
	Action yidu.Action
	MsgID  string
	Since  time.Time
	// Before is the keyset cursor: events with a smaller id (0: newest).
	Before int64
	Limit  int
}

// List returns up to q.Limit events, newest first, and the cursor of the
// next page (0 when there is none).
func (m *MySQL) List(ctx context.Context, q Query) ([]Event, int64, error) {
	if q.Limit <= 0 || q.Limit > MaxLimit {
		return nil, 0, fmt.Errorf("audit: limit %d outside 1..%d: %w", q.Limit, MaxLimit, yidu.ErrInvalid)
	}
	if q.Corps != nil && len(q.Corps) == 0 {
		return []Event{}, 0, nil
	}
	var where []string
	var args []any
	if q.Corps != nil {
		where = append(where, "corp_id IN (?"+strings.Repeat(", ?", len(q.Corps)-1)+")")
		for _, c := range q.Corps {
			args = append(args, c)
		}
	}
	for _, f := range []struct{ col, v string }{{"actor", q.Actor}, {"action", string(q.Action)}, {"msgid", q.MsgID}} {
		if f.v != "" {
			where = append(where, f.col+" = ?")
			args = append(args, f.v)
		}
	}
	if !q.Since.IsZero() {
		where = append(where, "at >= ?")
		args = append(args, q.Since.UTC())
	}
	if q.Before > 0 {
		where = append(where, "id < ?")
		args = append(args, q.Before)
	}
	query := `SELECT id, at, actor, actor_kind, role, action, corp_id, app, msgid, people, client_ip, user_agent, outcome, detail
		FROM audit_events`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id DESC LIMIT ?"
	args = append(args, q.Limit+1)
	rows, err := m.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: list: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		var action string
		if err := rows.Scan(&e.ID, &e.At, &e.Actor, &e.ActorKind, &e.Role, &action, &e.CorpID, &e.App, &e.MsgID,
			&e.People, &e.ClientIP, &e.UserAgent, &e.Outcome, &e.Detail); err != nil {
			return nil, 0, fmt.Errorf("audit: list: %w", err)
		}
		e.Action, e.At = yidu.Action(action), e.At.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("audit: list: %w", err)
	}
	var next int64
	if len(out) > q.Limit {
		out = out[:q.Limit]
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

// Older counts the events older than before (what Purge would delete:
// the dry run of `yidu archive purge`).
func (m *MySQL) Older(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	if err := m.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_events WHERE at < ?`, before.UTC()).Scan(&n); err != nil {
		return 0, fmt.Errorf("audit: count older: %w", err)
	}
	return n, nil
}
