package ledger

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// versionKey identifies a notice_versions row and its entry.
type versionKey struct {
	msgid string
	n     int64
}

func (k versionKey) notice() string { return k.msgid }

// versionEntry is a version entry as verifyVersions keeps it.
type versionEntry struct {
	placed
	hash string
}

// verifyVersions checks each version entry against notice_versions (its
// sha256) and each version stored since the ledger began against its
// entry.
func (l *Ledger) verifyVersions(ctx context.Context, corp, day string, gen time.Time, rep *Report) error {
	es, err := l.entries(ctx, corp, "version entries", "AND kind = ?", string(KindVersion))
	if err != nil {
		return err
	}
	entries := map[versionKey]versionEntry{}
	for _, e := range es {
		var v struct {
			Version int64  `json:"version"`
			SHA256  string `json:"sha256"`
		}
		if e.Body == nil || json.Unmarshal(e.Body, &v) != nil {
			continue
		}
		entries[versionKey{e.MsgID, v.Version}] = versionEntry{placed{e.Seq, e.Day}, v.SHA256}
	}
	err = l.scanRows(ctx, corp, "versions", "SELECT msgid, version, LOWER(HEX(sha256)), created_at >= ? FROM notice_versions WHERE corp_id = ?",
		[]any{gen.UTC(), corp}, func(rows *sql.Rows) error {
			var k versionKey
			var sum string
			var since bool
			if err := rows.Scan(&k.msgid, &k.n, &sum, &since); err != nil {
				return err
			}
			rep.Facts++
			e, ok := entries[k]
			delete(entries, k)
			switch {
			case !ok && since && day == "":
				rep.Problems = append(rep.Problems, Problem{What: "inserted",
					Detail: fmt.Sprintf("notice_versions %s v%d has no ledger entry", k.msgid, k.n)})
			case ok && e.hash != sum && onDay(day, e.day):
				rep.Problems = append(rep.Problems, Problem{Seq: e.seq, What: "altered",
					Detail: fmt.Sprintf("notice_versions %s v%d has sha256 %s; the entry says %s", k.msgid, k.n, sum, e.hash)})
			}
			return nil
		})
	if err != nil {
		return err
	}
	return reportGone(ctx, l, corp, day, rep, entries, func(k versionKey, _ versionEntry) string {
		return fmt.Sprintf("it records version %d of %s, which notice_versions no longer has", k.n, k.msgid)
	})
}
