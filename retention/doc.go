// Package retention ends what yidu keeps (yidu archive purge): Anonymise
// removes the personal data of the notices past their retention (the
// notice's own, else apps[].retention), and Purge deletes the notices sent
// before a date: their recipient rows, parked reads, send attempts and
// messages row, in DELETEs of a bounded number of rows each committed on
// its own, after keeping each notice's message_summary row in
// message_summaries.
//
// It was part of flushd, which writes reads; it shares none of flushd's
// loop, and runs from the command line. It writes only
// message_summaries: every other row goes through the package that owns
// its table (one owner per table group, issue 47): flushd the read
// archive, tracker the messages and their sends, campaign/store the notices
// and their acts, campaign/loops their follow-up, audit the audit trail.
package retention

import (
	"context"

	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/flushd"
	"github.com/yidu-io/yidu/tracker"
)

// DB is what retention needs of MySQL: *sql.DB (each statement commits
// on its own) or *sql.Tx; flushd's, whose DeleteNotice it is handed to.
type DB = flushd.DB

// ownedTable is one table of a notice's rows, with its owner's delete of
// one batch of them and the count it adds to.
type ownedTable struct {
	table  string
	delete deleter
	n      *int64
}

// PersonRows counts a notice's rows that name its people one by one,
// which Anonymise and Purge both delete (personTables).
type PersonRows struct {
	// Records: its message_read_record rows, with the page_signals,
	// ack_receipts and send_departments rows about its recipients.
	Records int64
	// Orphans: its read_orphans rows.
	Orphans int64
	// Reminders: its reminder_log rows (one per person reminded per
	// follow-up round, and per leader's digest) and manual_reminders rows
	// (one per person per manual reminder).
	Reminders int64
}

// add sums q into p.
func (p *PersonRows) add(q PersonRows) {
	p.Records += q.Records
	p.Orphans += q.Orphans
	p.Reminders += q.Reminders
}

// personTables are a notice's rows that name its people one by one, each
// through its table's owner, counted in p: Anonymise and Purge both
// delete them, so a table of such rows added here is gone after either.
func personTables(p *PersonRows) []ownedTable {
	return []ownedTable{
		{"message_read_record", reads, &p.Records},
		{"read_orphans", reads, &p.Orphans},
		// The reading page's signals: who, on which version, from
		// which IP and User-Agent.
		{"page_signals", reads, &p.Records},
		// The members' acknowledgement receipts (issue 48).
		{"ack_receipts", reads, &p.Records},
		// Each recipient's departments at send time.
		{"send_departments", sends, &p.Records},
		{"reminder_log", followUps, &p.Reminders},
		{"manual_reminders", notices, &p.Reminders},
	}
}

// deleter deletes at most limit rows of a notice from table, one its
// owner names, and returns how many it deleted.
type deleter func(ctx context.Context, db DB, table, corpID, msgID string, limit int) (int64, error)

// The owners of a notice's per-person rows.
var (
	reads deleter = func(ctx context.Context, db DB, table, corpID, msgID string, limit int) (int64, error) {
		return flushd.DeleteNotice(ctx, db, table, corpID, msgID, limit)
	}
	sends deleter = func(ctx context.Context, db DB, table, corpID, msgID string, limit int) (int64, error) {
		return tracker.DeleteNotice(ctx, db, table, corpID, msgID, limit)
	}
	notices deleter = func(ctx context.Context, db DB, table, corpID, msgID string, limit int) (int64, error) {
		return store.DeleteNotice(ctx, db, table, corpID, msgID, limit)
	}
	followUps deleter = func(ctx context.Context, db DB, table, corpID, msgID string, limit int) (int64, error) {
		return loops.DeleteNotice(ctx, db, table, corpID, msgID, limit)
	}
)
