package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// pageBody is what verifyPages compares of a page entry's body.
type pageBody struct {
	ReadTime  string `json:"read_time"`
	Source    int64  `json:"source"`
	Version   int64  `json:"version"`
	ClientIP  string `json:"ip"`
	UserAgent string `json:"ua"`
}

// pageKey identifies a page_signals row and its entry.
type pageKey struct {
	msgid           string
	uid             uint32
	source, version int64
}

func (k pageKey) notice() string { return k.msgid }

// pageEntry is a page entry as verifyPages keeps it.
type pageEntry struct {
	placed
	body pageBody
}

// verifyPages checks each page_signals row (a reading page's event)
// against its one page entry and each page entry against its row: seen
// at, IP and User-Agent. A row older than the ledger needs no entry; the
// entries of a notice purged whole, and forgotten ones, need no row.
func (l *Ledger) verifyPages(ctx context.Context, corp, day string, gen time.Time, rep *Report) error {
	entries, err := l.pageEntries(ctx, corp, day, rep)
	if err != nil {
		return err
	}
	err = l.scanRows(ctx, corp, "page rows", `SELECT msgid, uid, source, version, DATE_FORMAT(seen_at, '%Y-%m-%dT%H:%i:%sZ'), ip, user_agent, seen_at < ?
FROM page_signals WHERE corp_id = ?`, []any{gen.UTC().Truncate(time.Second), corp}, func(rows *sql.Rows) error {
		var k pageKey
		var at, ip, ua string
		var older bool
		if err := rows.Scan(&k.msgid, &k.uid, &k.source, &k.version, &at, &ip, &ua, &older); err != nil {
			return err
		}
		rep.Facts++
		e, ok := entries[k]
		delete(entries, k)
		switch {
		case !ok && day == "" && !older:
			rep.Problems = append(rep.Problems, Problem{What: "inserted",
				Detail: fmt.Sprintf("page_signals %s uid %d source %d version %d (seen %s) has no ledger entry", k.msgid, k.uid, k.source, k.version, at)})
		case ok && onDay(day, e.day) && (e.body.ReadTime != at || e.body.ClientIP != ip || e.body.UserAgent != ua):
			rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "altered",
				Detail: fmt.Sprintf("page_signals %s uid %d source %d version %d says seen %s from %q with %q; the entry says %s from %q with %q",
					k.msgid, k.uid, k.source, k.version, at, ip, ua, e.body.ReadTime, e.body.ClientIP, e.body.UserAgent)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return reportGone(ctx, l, corp, day, rep, entries, func(k pageKey, _ pageEntry) string {
		return fmt.Sprintf("it records a page event of %s by uid %d (source %d, version %d) that page_signals no longer has", k.msgid, k.uid, k.source, k.version)
	})
}

// pageEntries reads corp's page entries by their row's key, reporting a
// second entry of the same row as "inserted".
func (l *Ledger) pageEntries(ctx context.Context, corp, day string, rep *Report) (map[pageKey]pageEntry, error) {
	es, err := l.entries(ctx, corp, "page entries", "AND kind = ? ORDER BY first_seq", string(KindPage))
	if err != nil {
		return nil, err
	}
	entries := map[pageKey]pageEntry{}
	for _, e := range es {
		var pb pageBody
		if e.Body == nil || json.Unmarshal(e.Body, &pb) != nil {
			continue // forgotten, or checkBody reports it
		}
		k := pageKey{e.MsgID, e.UID, pb.Source, pb.Version}
		if first, dup := entries[k]; dup {
			if onDay(day, e.Day) {
				rep.Problems = append(rep.Problems, Problem{Seq: e.Seq, What: "inserted",
					Detail: fmt.Sprintf("a second page entry for %s uid %d source %d version %d (the first is entry %d)", k.msgid, k.uid, k.source, k.version, first.seq)})
			}
			continue
		}
		entries[k] = pageEntry{placed{e.Seq, e.Day}, pb}
	}
	return entries, nil
}
