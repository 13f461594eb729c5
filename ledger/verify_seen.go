package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// seenKey identifies a signal column of a message_read_record row and
// the seen entry of it.
type seenKey struct {
	msgid  string
	uid    uint32
	signal string
}

func (k seenKey) notice() string { return k.msgid }

// seenEntry is a seen entry as verifySeen keeps it.
type seenEntry struct {
	placed
	at string
}

// seenWitnesses are the entries that may record a signal column: the
// seen entries by column, and the times signal and page entries give.
type seenWitnesses struct {
	seen  map[seenKey]seenEntry
	reads map[readKey]string   // the read time of each row's latest signal entry
	pages map[seenKey][]string // the times of each row's page entries per signal
}

// verifySeen checks each signal column of message_read_record (button_at,
// link_at, enter_at) set since the ledger began against the entry that
// records it: the row's signal entry when the column is its read time, a
// seen entry of that signal and time otherwise; and each seen entry
// against its column. A card press forged onto a row (button_at set by
// hand) has neither.
func (l *Ledger) verifySeen(ctx context.Context, corp, day string, gen time.Time, rep *Report) error {
	w, err := l.seenWitnesses(ctx, corp)
	if err != nil {
		return err
	}
	const format = "%Y-%m-%dT%H:%i:%sZ"
	names := [3]string{"button", "link", "enter_agent"}
	err = l.scanRows(ctx, corp, "signal columns", `SELECT msgid, uid, DATE_FORMAT(button_at, '`+format+`'), DATE_FORMAT(link_at, '`+format+`'),
DATE_FORMAT(enter_at, '`+format+`'), button_at < ?, link_at < ?, enter_at < ?
FROM message_read_record WHERE corp_id = ? AND (button_at IS NOT NULL OR link_at IS NOT NULL OR enter_at IS NOT NULL)`,
		[]any{gen.UTC().Truncate(time.Second), gen.UTC().Truncate(time.Second), gen.UTC().Truncate(time.Second), corp}, func(rows *sql.Rows) error {
			var k readKey
			var at [3]sql.NullString
			var older [3]sql.NullBool
			if err := rows.Scan(&k.msgid, &k.uid, &at[0], &at[1], &at[2], &older[0], &older[1], &older[2]); err != nil {
				return err
			}
			for i, a := range at {
				if !a.Valid {
					continue
				}
				sk := seenKey{k.msgid, k.uid, names[i]}
				e, ok := w.seen[sk]
				delete(w.seen, sk)
				switch {
				case ok && e.at == a.String:
				case ok && onDay(day, e.day):
					rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "altered",
						Detail: fmt.Sprintf("message_read_record %s uid %d says %s at %s; the entry says %s", k.msgid, k.uid, names[i], a.String, e.at)})
				case !ok && (w.reads[k] == a.String || slices.Contains(w.pages[sk], a.String)):
				case !ok && day == "" && !older[i].Bool:
					rep.Problems = append(rep.Problems, Problem{What: "inserted",
						Detail: fmt.Sprintf("message_read_record %s uid %d has %s at %s, which no ledger entry records", k.msgid, k.uid, names[i], a.String)})
				}
			}
			return nil
		})
	if err != nil {
		return err
	}
	return reportGone(ctx, l, corp, day, rep, w.seen, func(k seenKey, e seenEntry) string {
		return fmt.Sprintf("it records %s of %s by uid %d at %s, which message_read_record no longer has", k.signal, k.msgid, k.uid, e.at)
	})
}

// seenWitnesses reads corp's seen, signal and page entries.
func (l *Ledger) seenWitnesses(ctx context.Context, corp string) (seenWitnesses, error) {
	w := seenWitnesses{seen: map[seenKey]seenEntry{}, reads: map[readKey]string{}, pages: map[seenKey][]string{}}
	es, err := l.entries(ctx, corp, "seen entries", "AND kind IN (?, ?, ?) ORDER BY first_seq", string(KindSeen), string(KindSignal), string(KindPage))
	if err != nil {
		return w, err
	}
	for _, e := range es {
		if e.Body == nil {
			continue
		}
		if e.Kind == KindSignal || e.Kind == KindPage {
			var sb struct {
				ReadTime string `json:"read_time"`
				Signal   string `json:"signal"`
			}
			if json.Unmarshal(e.Body, &sb) != nil {
				continue
			}
			if e.Kind == KindSignal {
				w.reads[readKey{e.MsgID, e.UID}] = sb.ReadTime
			}
			if sb.Signal != "" {
				k := seenKey{e.MsgID, e.UID, sb.Signal}
				w.pages[k] = append(w.pages[k], sb.ReadTime)
			}
			continue
		}
		var sb struct {
			Signal string `json:"signal"`
			At     string `json:"at"`
		}
		if json.Unmarshal(e.Body, &sb) != nil {
			continue
		}
		w.seen[seenKey{e.MsgID, e.UID, sb.Signal}] = seenEntry{placed{e.Seq, e.Day}, sb.At}
	}
	return w, nil
}
