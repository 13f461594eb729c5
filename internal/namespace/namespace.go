// Package namespace is the one place where a msgid is taken (issue 38):
// the tracker's registrations, campaign's drafts and scheduled notices
// all claim it here, in the msgids table (migration 00017), so that no
// corp or app can take another's, and no registration can take the msgid
// of a notice that is waiting for its time.
package namespace

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/yidu-io/yidu"
)

// Kind is what claims a msgid.
type Kind int

const (
	// Message is a registration through the API (POST /messages): it
	// admits the msgid's earlier registration by the same corp and app
	// (a replay), nothing else.
	Message Kind = iota
	// Notice is a new draft or scheduled notice: the msgid must be free.
	Notice
	// NoticeSend is the registration that sends a notice (campaign's
	// Runner): it admits the notice's own claim.
	NoticeSend
)

// DB is what Claim needs: a *sql.DB or a *sql.Tx.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Claim takes msgID for corp and app as kind, or reports why not. A msgid
// another corp or another app holds, or that a waiting notice holds
// against a plain registration, is yidu.ErrConflict; the error never
// says whose it is (the caller may be an attacker probing for it).
func Claim(ctx context.Context, db DB, corp, app, msgID string, kind Kind, now time.Time) error {
	notice := 0
	if kind != Message {
		notice = 1
	}
	res, err := db.ExecContext(ctx, `INSERT IGNORE INTO msgids (msgid, corp_id, app, notice, created_at) VALUES (?, ?, ?, ?, ?)`,
		msgID, corp, app, notice, now.UTC())
	if err != nil {
		return fmt.Errorf("namespace: claim %s: %w", msgID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 1 {
		return nil
	}
	var holderCorp, holderApp string
	var held int
	err = db.QueryRowContext(ctx, `SELECT corp_id, app, notice FROM msgids WHERE msgid = ?`, msgID).Scan(&holderCorp, &holderApp, &held)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("namespace: claim %s: vanished: %w", msgID, yidu.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("namespace: read claim %s: %w", msgID, err)
	}
	if Admits(holderCorp, holderApp, held == 1, corp, app, kind) {
		return nil
	}
	return fmt.Errorf("%w: msgid %s is taken", yidu.ErrConflict, msgID)
}

// Admits is the rule: whether a msgid held by (holderCorp, holderApp), a
// waiting notice's when notice, may be claimed by (corp, app) as kind.
func Admits(holderCorp, holderApp string, notice bool, corp, app string, kind Kind) bool {
	if holderCorp != corp || holderApp != app {
		return false
	}
	switch kind {
	case Message:
		return !notice
	case NoticeSend:
		return notice
	}
	return false
}
