package retention

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/tracker"
)

// AnonymiseOptions configures Anonymise.
type AnonymiseOptions struct {
	// Now is the time retention is measured to.
	Now time.Time
	// Defaults are each app's retention (apps[].retention); a notice's own
	// (messages.retention) wins. A notice with neither is left alone.
	Defaults map[string]yidu.Retention
	// CorpID limits it to one corp ("" every corp).
	CorpID string
	// BatchSize is the most rows per DELETE (default DefaultPurgeBatch).
	BatchSize int
	// Execute removes; without it each notice is counted only.
	Execute bool
	// Forget, when set, empties the ledger bodies about the notice's
	// people (ledger.Ledger.Forget: the signal entries' uids, the page
	// entries' IP and User-Agent, the send entries' UserIDs), keeping
	// their leaf hashes, so old roots still verify.
	Forget func(ctx context.Context, corpID, msgID string) error
	Logger *slog.Logger
}

// AnonymisedMessage is one notice past its retention, with the rows of
// personal data Anonymise removed (or would remove).
type AnonymisedMessage struct {
	CorpID, MsgID string
	SentAt        time.Time
	Retention     yidu.Retention
	// PersonRows are its rows that name people, deleted (Reminders
	// counts its follow_up_batches rows too: each lists its people).
	PersonRows
	// Sends: message_sends rows whose invaliduser list is blanked;
	// Audit: audit_events rows whose IP, User-Agent and detail are
	// blanked.
	Sends, Audit int64
}

// AnonymiseReport sums Anonymise.
type AnonymiseReport struct {
	Messages int
	PersonRows
	Sends, Audit int64
}

// add counts am in r.
func (r *AnonymiseReport) add(am AnonymisedMessage) {
	r.Messages++
	r.PersonRows.add(am.PersonRows)
	r.Sends += am.Sends
	r.Audit += am.Audit
}

// anonymiseDeletes are the per-person rows of a notice, deleted in
// batches through their tables' owners: the ones Purge deletes too, and
// the follow-up's batches (which list their people).
func anonymiseDeletes(am *AnonymisedMessage) []ownedTable {
	return append(personTables(&am.PersonRows),
		ownedTable{"follow_up_batches", followUps, &am.Reminders})
}

// Anonymise removes the personal data of the notices past their
// retention (issue 40, PIPL Art. 19): their per-person rows go (the
// summary with its counts is kept first in message_summaries, as Purge
// keeps it), the invaliduser lists WeCom answered are blanked, and the
// audit rows about the notice lose their client IP, User-Agent and
// detail (which may name a UserID), and opts.Forget empties the ledger
// bodies about its people. The notice's row (marked anonymised_at), its
// versions, its send batches and the ledger's leaf hashes stay, so old
// roots still verify.
// Without opts.Execute it only counts. each (may be nil) is called per
// notice.
func Anonymise(ctx context.Context, db DB, opts AnonymiseOptions, each func(AnonymisedMessage)) (AnonymiseReport, error) {
	var rep AnonymiseReport
	if opts.Now.IsZero() {
		return rep, fmt.Errorf("retention: anonymise: a time is required")
	}
	if err := checkBatch("anonymise", &opts.BatchSize, &opts.Logger); err != nil {
		return rep, err
	}
	due, err := anonymiseCandidates(ctx, db, opts)
	if err != nil {
		return rep, err
	}
	for _, am := range due {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if err := anonymiseMessage(ctx, db, opts, &am); err != nil {
			return rep, err
		}
		rep.add(am)
		if opts.Execute {
			opts.Logger.Info("notice anonymised", "component", "retention", "corp_id", am.CorpID, "msgid", am.MsgID, "records", am.Records)
		}
		if each != nil {
			each(am)
		}
	}
	return rep, nil
}

func anonymiseCandidates(ctx context.Context, db DB, opts AnonymiseOptions) ([]AnonymisedMessage, error) {
	q := "SELECT corp_id, msgid, app, sent_at, COALESCE(retention, '') FROM messages WHERE anonymised_at IS NULL"
	return listNotices(ctx, db, "anonymise", q, nil, opts.CorpID, func(rows *sql.Rows) (AnonymisedMessage, bool, error) {
		var am AnonymisedMessage
		var app, own string
		if err := rows.Scan(&am.CorpID, &am.MsgID, &app, &am.SentAt, &own); err != nil {
			return am, false, err
		}
		r, err := yidu.ParseRetention(own)
		if err != nil {
			// A value only this code writes; one it cannot read is kept,
			// never removed early.
			opts.Logger.Warn("notice's retention unreadable; kept", "component", "retention", "corp_id", am.CorpID, "msgid", am.MsgID)
			return am, false, nil
		}
		if r.IsZero() {
			r = opts.Defaults[app]
		}
		if r.IsZero() || r.Add(am.SentAt).After(opts.Now) {
			return am, false, nil
		}
		am.Retention = r
		return am, true, nil
	})
}

func anonymiseMessage(ctx context.Context, db DB, opts AnonymiseOptions, am *AnonymisedMessage) error {
	id := []any{am.CorpID, am.MsgID}
	counts := []struct {
		q string
		n *int64
	}{
		{"SELECT COUNT(*) FROM message_sends WHERE corp_id = ? AND msgid = ? AND (invalid IS NOT NULL OR unlicensed IS NOT NULL)", &am.Sends},
		{"SELECT COUNT(*) FROM audit_events WHERE corp_id = ? AND msgid = ? AND (client_ip <> '' OR user_agent <> '' OR detail <> '')", &am.Audit},
	}
	if !opts.Execute {
		for _, c := range counts {
			var n int64
			if err := queryCount(ctx, db, &n, c.q, id...); err != nil {
				return fmt.Errorf("retention: anonymise %s/%s: count: %w", am.CorpID, am.MsgID, err)
			}
			*c.n += n
		}
		if err := countTables(ctx, db, anonymiseDeletes(am), am.CorpID, am.MsgID); err != nil {
			return fmt.Errorf("retention: anonymise %s/%s: %w", am.CorpID, am.MsgID, err)
		}
		return nil
	}
	if _, err := db.ExecContext(ctx, summarizeStatement, am.CorpID, am.MsgID, am.CorpID, am.MsgID); err != nil {
		return fmt.Errorf("retention: anonymise %s/%s: keep the summary: %w", am.CorpID, am.MsgID, err)
	}
	if err := deleteTables(ctx, db, anonymiseDeletes(am), am.CorpID, am.MsgID, opts.BatchSize, nil); err != nil {
		return fmt.Errorf("retention: anonymise %s/%s: %w", am.CorpID, am.MsgID, err)
	}
	// The invaliduser lists WeCom answered (tracker's), the audit rows'
	// IP, User-Agent and detail (audit's).
	updates := []struct {
		blank func(ctx context.Context, db DB, corpID, msgID string) (int64, error)
		n     *int64
	}{
		{func(ctx context.Context, db DB, corpID, msgID string) (int64, error) {
			return tracker.AnonymiseSends(ctx, db, corpID, msgID)
		}, &am.Sends},
		{func(ctx context.Context, db DB, corpID, msgID string) (int64, error) {
			return audit.Anonymise(ctx, db, corpID, msgID)
		}, &am.Audit},
	}
	for _, u := range updates {
		n, err := u.blank(ctx, db, am.CorpID, am.MsgID)
		if err != nil {
			return fmt.Errorf("retention: anonymise %s/%s: %w", am.CorpID, am.MsgID, err)
		}
		*u.n += n
	}
	if opts.Forget != nil {
		if err := opts.Forget(ctx, am.CorpID, am.MsgID); err != nil {
			return fmt.Errorf("retention: anonymise %s/%s: ledger: %w", am.CorpID, am.MsgID, err)
		}
	}
	// Last: a run cut short before here finds the notice again.
	if err := tracker.MarkAnonymised(ctx, db, am.CorpID, am.MsgID, opts.Now); err != nil {
		return fmt.Errorf("retention: anonymise %s/%s: mark: %w", am.CorpID, am.MsgID, err)
	}
	return nil
}
