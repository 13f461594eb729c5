package retention

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/yidu-io/yidu/tracker"
)

// DefaultPurgeBatch is PurgeOptions.BatchSize when left out: the most rows
// one DELETE removes, so each statement holds its row locks for a few
// milliseconds (docs/benchmarks.md, "Retention").
const DefaultPurgeBatch = 1000

// MaxPurgeBatch bounds PurgeOptions.BatchSize: a larger DELETE holds its
// locks (and grows the undo log) for longer than a flush batch waits.
const MaxPurgeBatch = 50_000

// PurgeOptions choose what Purge deletes.
type PurgeOptions struct {
	// Before: notices sent before it are purged (required).
	Before time.Time
	// CorpID limits the purge to one corp ("": every corp).
	CorpID string
	// BatchSize is the most rows per DELETE (0: DefaultPurgeBatch; at
	// most MaxPurgeBatch).
	BatchSize int
	// Execute deletes; without it Purge only counts what it would delete.
	Execute bool
	// DropSummaries deletes without keeping the notice's message_summary
	// row in message_summaries first.
	DropSummaries bool
	// Logger receives the purge's progress (nil: discarded).
	Logger *slog.Logger
}

// PurgedMessage is one notice Purge deleted (or would delete), with the
// rows of each table.
type PurgedMessage struct {
	CorpID, MsgID string
	SentAt        time.Time
	// PersonRows are its rows that name people.
	PersonRows
	// Sends counts its message_sends rows; FollowUps its rows in
	// follow_ups, follow_up_rounds, follow_up_batches, campaigns and
	// notice_acts (issues 29, 30 and 37).
	Sends, FollowUps int64
	// Summarized: its summary is in message_summaries.
	Summarized bool
}

// PurgeReport sums a purge.
type PurgeReport struct {
	Messages int
	PersonRows
	Sends, FollowUps int64
	Summaries        int
	// Statements counts the batched DELETEs run (the messages rows'
	// one-row DELETEs aside); Longest is the longest of them.
	Statements int
	Longest    time.Duration
}

// add counts pm in r (Statements and Longest are counted as they run).
func (r *PurgeReport) add(pm PurgedMessage) {
	r.Messages++
	r.PersonRows.add(pm.PersonRows)
	r.Sends += pm.Sends
	r.FollowUps += pm.FollowUps
	if pm.Summarized {
		r.Summaries++
	}
}

// Purge deletes the notices sent before opts.Before: their recipient rows
// (message_read_record), parked reads (read_orphans), send attempts
// (message_sends), follow-up (reminder_log, follow_up_batches,
// follow_up_rounds, follow_ups), manual reminders (manual_reminders,
// notice_acts), its campaigns row and the messages row,
// one notice after another. Rows go
// in DELETEs of at most opts.BatchSize, each committed on its own, so no
// statement holds many locks for long and flushd and registration keep
// writing meanwhile. Unless opts.DropSummaries, the notice's
// message_summary row (with its per-signal counts) is first kept in
// message_summaries; a summary already there is kept as it is, so a purge
// interrupted and run again does not replace it with one of a
// half-deleted notice. Without opts.Execute nothing is written: each
// notice is counted and reported. each (may be nil) is called per notice
// when it is done. Users and departments are not per notice and stay.
func Purge(ctx context.Context, db DB, opts PurgeOptions, each func(PurgedMessage)) (PurgeReport, error) {
	var rep PurgeReport
	if opts.Before.IsZero() {
		return rep, errors.New("retention: purge: a date to purge before is required")
	}
	if err := checkBatch("purge", &opts.BatchSize, &opts.Logger); err != nil {
		return rep, err
	}
	log := opts.Logger.With("component", "purge")
	msgs, err := purgeCandidates(ctx, db, opts)
	if err != nil {
		return rep, err
	}
	for _, pm := range msgs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if err := purgeMessage(ctx, db, opts, &pm, &rep); err != nil {
			return rep, err
		}
		rep.add(pm)
		if opts.Execute {
			log.Info("notice purged", "corp_id", pm.CorpID, "msgid", pm.MsgID, "records", pm.Records)
		}
		if each != nil {
			each(pm)
		}
	}
	return rep, nil
}

// purgeCandidates lists the notices sent before opts.Before, oldest first.
// One row per notice, so the list fits in memory for any archive.
func purgeCandidates(ctx context.Context, db DB, opts PurgeOptions) ([]PurgedMessage, error) {
	q := "SELECT corp_id, msgid, sent_at FROM messages WHERE sent_at < ?"
	args := []any{opts.Before.UTC().Format("2006-01-02 15:04:05.000")}
	return listNotices(ctx, db, "purge", q, args, opts.CorpID, func(rows *sql.Rows) (PurgedMessage, bool, error) {
		var pm PurgedMessage
		err := rows.Scan(&pm.CorpID, &pm.MsgID, &pm.SentAt)
		return pm, err == nil, err
	})
}

// summarizeStatement keeps message_summary's row of one notice, with its
// per-signal counts, in message_summaries (migration 00008).
const summarizeStatement = `INSERT IGNORE INTO message_summaries
    (corp_id, msgid, app, title, sent_at, recalled_at, read_at_recall, recipients, read_count,
     percent, median_seconds, seconds_to_90, button, link, enter_agent)
SELECT s.corp_id, s.msgid, s.app, s.title, s.sent_at, s.recalled_at, s.read_at_recall, s.recipients, s.read_count,
       s.percent, s.median_seconds, s.seconds_to_90, c.button, c.link, c.enter_agent
FROM message_summary s
JOIN (SELECT COUNT(button_at) AS button, COUNT(link_at) AS link, COUNT(enter_at) AS enter_agent
      FROM message_read_record WHERE corp_id = ? AND msgid = ?) c
WHERE s.corp_id = ? AND s.msgid = ?`

// purgeTables are a notice's rows Purge deletes before its messages row,
// each through its table's owner (one owner per table group, issue 47),
// which deletes by the rest of the table's primary key after (corp_id,
// msgid): each DELETE takes the next range of it, and is safe for
// statement-based replication.
func purgeTables(pm *PurgedMessage) []ownedTable {
	return append(personTables(&pm.PersonRows),
		ownedTable{"message_sends", sends, &pm.Sends},
		ownedTable{"notice_acts", notices, &pm.FollowUps},
		ownedTable{"follow_up_batches", followUps, &pm.FollowUps},
		ownedTable{"follow_up_rounds", followUps, &pm.FollowUps},
		ownedTable{"follow_ups", followUps, &pm.FollowUps},
		ownedTable{"campaigns", notices, &pm.FollowUps},
	)
}

func purgeMessage(ctx context.Context, db DB, opts PurgeOptions, pm *PurgedMessage, rep *PurgeReport) error {
	id := []any{pm.CorpID, pm.MsgID}
	if !opts.Execute {
		if err := countTables(ctx, db, purgeTables(pm), pm.CorpID, pm.MsgID); err != nil {
			return fmt.Errorf("retention: purge %s/%s: %w", pm.CorpID, pm.MsgID, err)
		}
		return nil
	}
	if !opts.DropSummaries {
		if _, err := db.ExecContext(ctx, summarizeStatement, pm.CorpID, pm.MsgID, pm.CorpID, pm.MsgID); err != nil {
			return fmt.Errorf("retention: purge %s/%s: keep the summary: %w", pm.CorpID, pm.MsgID, err)
		}
		var n int64
		if err := queryCount(ctx, db, &n, "SELECT COUNT(*) FROM message_summaries WHERE corp_id = ? AND msgid = ?", id...); err != nil {
			return fmt.Errorf("retention: purge %s/%s: summary: %w", pm.CorpID, pm.MsgID, err)
		}
		pm.Summarized = n == 1
	}
	statement := func(took time.Duration) {
		rep.Statements++
		rep.Longest = max(rep.Longest, took)
	}
	if err := deleteTables(ctx, db, purgeTables(pm), pm.CorpID, pm.MsgID, opts.BatchSize, statement); err != nil {
		return fmt.Errorf("retention: purge %s/%s: %w", pm.CorpID, pm.MsgID, err)
	}
	if err := tracker.DeleteMessage(ctx, db, pm.CorpID, pm.MsgID); err != nil {
		return fmt.Errorf("retention: purge %s/%s: delete the message: %w", pm.CorpID, pm.MsgID, err)
	}
	return nil
}

// queryCount scans the one number query returns into *dst.
func queryCount(ctx context.Context, db DB, dst *int64, query string, args ...any) error {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("no row")
	}
	if err := rows.Scan(dst); err != nil {
		return err
	}
	return rows.Err()
}
