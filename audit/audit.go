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
	"time"
	"unicode/utf8"

	"github.com/yidu-io/yidu"
)

// Event is one audited action.
type Event struct {
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
	Outcome   string // "ok", "refused", "failed"
	// Detail is an optional summary, e.g. an export's scope.
	Detail string
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
	if err := e.Action.Validate(); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if e.Actor == "" || e.Outcome == "" {
		return fmt.Errorf("audit: actor and outcome are required: %w", yidu.ErrInvalid)
	}
	_, err := m.db.ExecContext(ctx, `INSERT INTO audit_events
		(at, actor, actor_kind, role, action, corp_id, app, msgid, people, client_ip, user_agent, outcome, detail)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.At.UTC(), clip(e.Actor, 128), clip(e.ActorKind, 16), clip(e.Role, 32), string(e.Action), clip(e.CorpID, 64),
		clip(e.App, 64), clip(e.MsgID, 64), e.People, clip(e.ClientIP, 45), clip(e.UserAgent, 255), clip(e.Outcome, 16), clip(e.Detail, 512))
	if err != nil {
		return fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	return nil
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
