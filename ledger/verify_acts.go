package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// actRow is one row of notice_approvals or manual_reminders as Verify
// compares it with its entry: its identity (what the entry says too)
// and the text naming it.
type actRow struct {
	key  string
	name string
	// since: written since the ledger began, so it needs an entry (an
	// older one is compared when it has one, and needs one when its
	// notice is in the log).
	since bool
	msgid string
}

// verifyActs compares the approval trail (notice_approvals) and the
// manual reminders asked for (manual_reminders) written since corp's
// ledger began with their approval and asked entries: a row without an
// entry (an approval forged in MySQL, or one whose approver, time,
// version or reason was edited) is "inserted"; an entry whose row is gone
// while its notice is still kept is "deleted".
func (l *Ledger) verifyActs(ctx context.Context, corp, day string, gen time.Time, rep *Report) error {
	entries, err := l.actEntries(ctx, corp)
	if err != nil {
		return err
	}
	rows, err := l.actRows(ctx, corp, gen.UTC().Truncate(time.Millisecond))
	if err != nil {
		return err
	}
	logged, err := l.loggedNotices(ctx, corp)
	if err != nil {
		return err
	}
	for _, r := range rows {
		rep.Facts++
		if es := entries[r.key]; len(es) > 0 {
			entries[r.key] = es[1:]
			continue
		}
		if day == "" && (r.since || logged[r.msgid]) {
			rep.Problems = append(rep.Problems, Problem{What: "inserted", Detail: r.name + " has no ledger entry"})
		}
	}
	live, err := l.messages(ctx, corp)
	if err != nil {
		return err
	}
	drafts, err := l.campaigns(ctx, corp)
	if err != nil {
		return err
	}
	keys := slices.Sorted(maps.Keys(entries))
	for _, k := range keys {
		msgid, _, _ := strings.Cut(k, "\x00")
		msgid = msgid[2:]
		for _, e := range entries[k] {
			if (live[msgid] || drafts[msgid]) && onDay(day, e.day) {
				rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "deleted",
					Detail: fmt.Sprintf("it records %s, which MySQL no longer has", strings.ReplaceAll(k[2:], "\x00", " "))})
			}
		}
	}
	return nil
}

// actEntries reads corp's approval and asked entries by the key of the
// row each records (approvalKey, askedKey), in seq order; a withdrawal
// cancels the request it takes back.
func (l *Ledger) actEntries(ctx context.Context, corp string) (map[string][]placed, error) {
	es, err := l.entries(ctx, corp, "approval entries", "AND kind IN (?, ?) ORDER BY first_seq", string(KindApproval), string(KindAsked))
	if err != nil {
		return nil, err
	}
	entries := map[string][]placed{}
	for _, e := range es {
		if e.Body == nil {
			continue
		}
		var k string
		switch e.Kind {
		case KindApproval:
			var raw struct {
				Step        string `json:"step"`
				VersionHash string `json:"version_hash"`
				Actor       string `json:"actor"`
				At          string `json:"at"`
				Reason      string `json:"reason"`
			}
			if json.Unmarshal(e.Body, &raw) != nil {
				continue
			}
			k = approvalKey(e.MsgID, raw.Step, raw.VersionHash, raw.Actor, raw.At, raw.Reason)
		case KindAsked:
			var raw struct {
				At     string `json:"at"`
				By     string `json:"by"`
				Scope  string `json:"scope"`
				Undone bool   `json:"undone"`
			}
			if json.Unmarshal(e.Body, &raw) != nil {
				continue
			}
			k = askedKey(e.MsgID, e.UID, raw.At, raw.By, raw.Scope)
			if raw.Undone {
				// A withdrawal cancels the request it takes back.
				if es := entries[k]; len(es) > 0 {
					entries[k] = es[1:]
				}
				continue
			}
		}
		entries[k] = append(entries[k], placed{e.Seq, e.Day})
	}
	return entries, nil
}

// actRows reads corp's notice_approvals and manual_reminders rows; since
// is when its ledger began.
func (l *Ledger) actRows(ctx context.Context, corp string, since time.Time) ([]actRow, error) {
	var rows []actRow
	err := l.scanRows(ctx, corp, "approvals", `SELECT id, msgid, version_hash, step, actor, at, reason FROM notice_approvals
WHERE corp_id = ? ORDER BY id`, []any{corp}, func(q *sql.Rows) error {
		var id int64
		var msgid, hash, step, actor, reason string
		var at time.Time
		if err := q.Scan(&id, &msgid, &hash, &step, &actor, &at, &reason); err != nil {
			return err
		}
		rows = append(rows, actRow{approvalKey(msgid, step, hash, actor, timeText(at), reason),
			fmt.Sprintf("notice_approvals row %d (%s of %s version %.16s by %s at %s)", id, step, msgid, hash, actor, timeText(at)), !at.Before(since), msgid})
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = l.scanRows(ctx, corp, "manual reminders", `SELECT msgid, uid, reminded_at, reminded_by, scope FROM manual_reminders
WHERE corp_id = ? ORDER BY msgid, uid, reminded_at`, []any{corp}, func(q *sql.Rows) error {
		var msgid, by, scope string
		var uid uint32
		var at time.Time
		if err := q.Scan(&msgid, &uid, &at, &by, &scope); err != nil {
			return err
		}
		rows = append(rows, actRow{askedKey(msgid, uid, timeText(at), by, scope),
			fmt.Sprintf("manual_reminders row (%s uid %d asked by %s at %s)", msgid, uid, by, timeText(at)), !at.Before(since), msgid})
		return nil
	})
	return rows, err
}

// loggedNotices are the notices the log has entries of. Such a notice
// has its whole trail in it: a row dated before the log began is no
// excuse there.
func (l *Ledger) loggedNotices(ctx context.Context, corp string) (map[string]bool, error) {
	return l.msgids(ctx, corp, "logged notices", "SELECT DISTINCT msgid FROM ledger_blocks WHERE corp_id = ?")
}

// approvalKey and askedKey identify a row and its entry; both start with
// a two-byte tag and the msgid.
func approvalKey(msgid, step, hash, actor, at, reason string) string {
	return strings.Join([]string{"a:" + msgid, "approval", step, hash, actor, at, reason}, "\x00")
}

func askedKey(msgid string, uid uint32, at, by, scope string) string {
	return strings.Join([]string{"m:" + msgid, "manual reminder of uid", fmt.Sprint(uid), "by", by, "at", at, scope}, "\x00")
}

// campaigns are corp's stored notices (drafts and scheduled ones too).
func (l *Ledger) campaigns(ctx context.Context, corp string) (map[string]bool, error) {
	return l.msgids(ctx, corp, "notices", "SELECT msgid FROM campaigns WHERE corp_id = ?")
}
