package flushd

import (
	"slices"
	"strconv"
	"time"

	"github.com/yidu-io/yidu/delta"
)

// Signal bits of a compact read (compactStatement): which signal columns
// take its time.
const (
	bitButton = 1
	bitLink   = 2
	bitEnter  = 4
)

// compact returns r as one time t, the counted source (0: none) and the
// signal bits whose columns take t; ok is false when r has two different
// times (its counted read and a signal, or two signals).
func (r Read) compact() (t int64, source delta.Source, bits int, ok bool) {
	if r.Source != 0 {
		t, source = r.At, r.Source
	}
	for _, c := range [...]struct {
		at  int64
		bit int
	}{{r.Button, bitButton}, {r.Link, bitLink}, {r.EnterAgent, bitEnter}} {
		switch {
		case c.at == 0:
		case t == 0 || c.at == t:
			t, bits = c.at, bits|c.bit
		default:
			return 0, 0, 0, false
		}
	}
	return t, source, bits, t != 0
}

// splitCompact returns the reads of one time and the others, each in
// uid order. When every read is compact (the usual batch) it returns
// reads itself and no copy.
func splitCompact(reads []Read) (compact, full []Read) {
	i := 0
	for i < len(reads) {
		if _, _, _, ok := reads[i].compact(); !ok {
			break
		}
		i++
	}
	if i == len(reads) {
		return reads, nil
	}
	compact = slices.Clone(reads[:i])
	for _, r := range reads[i:] {
		if _, _, _, ok := r.compact(); ok {
			compact = append(compact, r)
		} else {
			full = append(full, r)
		}
	}
	return compact, full
}

// compactStatement is the batch UPDATE of reads of one time each
// (Read.compact; see the package doc): a read travels as [uid, "time",
// source, signal bits] (bitButton | bitLink | bitEnter), so MySQL parses
// one DATETIME a read instead of updateStatement's four (three of them
// noTime in a storm of card presses). On MariaDB 10.11 the same 50,000
// card presses took 70-75 % of the full form's time
// (BenchmarkFlushInterleaved, %full). Its guards and RowsAffected are the
// full form's; each assignment reads only its own column's old value (and
// d).
func compactStatement(corpID, msgID string, reads []Read) (string, []any) {
	return compactQuery, []any{compactJSON(reads), corpID, msgID}
}

const compactQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', t DATETIME PATH '$[1]', src INT UNSIGNED PATH '$[2]', sig INT UNSIGNED PATH '$[3]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = IF(d.src > 0, 1, r.is_read)," +
	" r.read_time = IF(r.read_time IS NULL AND d.src > 0, d.t, r.read_time)," +
	" r.source = IF(r.source = 0, d.src, r.source)," +
	" r.button_at = IF(r.button_at IS NULL AND (d.sig & 1) > 0, d.t, r.button_at)," +
	" r.link_at = IF(r.link_at IS NULL AND (d.sig & 2) > 0, d.t, r.link_at)," +
	" r.enter_at = IF(r.enter_at IS NULL AND (d.sig & 4) > 0, d.t, r.enter_at)" +
	" WHERE (r.is_read = 0 AND d.src > 0)" +
	" OR (r.button_at IS NULL AND (d.sig & 1) > 0)" +
	" OR (r.link_at IS NULL AND (d.sig & 2) > 0)" +
	" OR (r.enter_at IS NULL AND (d.sig & 4) > 0)"

// compactJSON encodes compact reads as [[uid,"time",source,bits],…].
func compactJSON(reads []Read) string {
	const row = `[4294967295,"2006-01-02 15:04:05",4,7],`
	b := make([]byte, 0, 2+len(reads)*len(row))
	b = append(b, '[')
	for i, r := range reads {
		if i > 0 {
			b = append(b, ',')
		}
		t, source, bits, _ := r.compact()
		b = appendRead(b, r.UID, t, source)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(bits), 10)
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// updateStatement builds the full batch UPDATE, for reads with several
// times (compactStatement takes the others): the reads travel as one JSON
// array of [uid, "read_time", source, "button_at", "link_at", "enter_at"]
// bound to a single placeholder, and JSON_TABLE turns it into rows that
// are joined to their recipient rows by primary key. See the package doc
// for the measurements behind it.
//
// STRAIGHT_JOIN fixes the plan: JSON_TABLE first, then one primary-key
// lookup per uid. The other order re-reads the JSON for every recipient row
// of the message (MariaDB 10.11 took 18 s for 5000 uids on a 50,000-row
// message); optimizers choose it when they think the message is small.
//
// A time the read lacks is noTime, not JSON null: go-mysql-server (the
// demo's MySQL) refuses a NULL from JSON_TABLE in an UPDATE. Each
// assignment reads only its own column's old value (and d): MySQL
// documents no order for a multi-table UPDATE's assignments, so none may
// see another's new value. read_time and source are guarded by being
// empty, which is is_read = 0 (they are only ever set together with it).
func updateStatement(corpID, msgID string, reads []Read) (string, []any) {
	return updateQuery, []any{readsJSON(reads), corpID, msgID}
}

// updatePrefix starts every batch UPDATE (tests count statements by it).
const updatePrefix = "UPDATE JSON_TABLE("

// noTime stands for "no such time" in the JSON: below every time flushd
// accepts (minReadTime).
const noTime = "1000-01-01 00:00:00"

// The JSON_TABLE columns are named apart from message_read_record's, and
// src is INT: go-mysql-server reads a JSON 0 into TINYINT UNSIGNED as 255.
const updateQuery = updatePrefix + "?, '$[*]' COLUMNS(" +
	"uid INT UNSIGNED PATH '$[0]', read_at DATETIME PATH '$[1]', src INT UNSIGNED PATH '$[2]', " +
	"button DATETIME PATH '$[3]', link DATETIME PATH '$[4]', enter DATETIME PATH '$[5]')) AS d" +
	" STRAIGHT_JOIN message_read_record r ON r.corp_id = ? AND r.msgid = ? AND r.uid = d.uid" +
	" SET r.is_read = IF(d.src > 0, 1, r.is_read)," +
	" r.read_time = IF(r.read_time IS NULL AND d.src > 0, d.read_at, r.read_time)," +
	" r.source = IF(r.source = 0, d.src, r.source)," +
	" r.button_at = IF(r.button_at IS NULL AND d.button > '" + noTime + "', d.button, r.button_at)," +
	" r.link_at = IF(r.link_at IS NULL AND d.link > '" + noTime + "', d.link, r.link_at)," +
	" r.enter_at = IF(r.enter_at IS NULL AND d.enter > '" + noTime + "', d.enter, r.enter_at)" +
	" WHERE (r.is_read = 0 AND d.src > 0)" +
	" OR (r.button_at IS NULL AND d.button > '" + noTime + "')" +
	" OR (r.link_at IS NULL AND d.link > '" + noTime + "')" +
	" OR (r.enter_at IS NULL AND d.enter > '" + noTime + "')"

// readsJSON encodes reads as [[uid,"read_time",source,"button_at",
// "link_at","enter_at"],…], noTime for a time a read lacks. Every value is
// a number or a fixed-format time, so nothing needs escaping.
func readsJSON(reads []Read) string {
	const row = `[4294967295,"2006-01-02 15:04:05",4,"2006-01-02 15:04:05","2006-01-02 15:04:05","2006-01-02 15:04:05"],`
	b := make([]byte, 0, 2+len(reads)*len(row))
	b = append(b, '[')
	for i, r := range reads {
		if i > 0 {
			b = append(b, ',')
		}
		at := r.At
		if r.Source == 0 {
			at = 0
		}
		b = appendRead(b, r.UID, at, r.Source)
		for _, t := range [...]int64{r.Button, r.Link, r.EnterAgent} {
			b = append(b, ',')
			b = appendTime(b, t)
		}
		b = append(b, ']')
	}
	b = append(b, ']')
	return string(b)
}

// appendRead appends the start of a read's row, `[uid,"read_time",source`.
func appendRead(b []byte, uid uint32, at int64, source delta.Source) []byte {
	b = append(b, '[')
	b = strconv.AppendUint(b, uint64(uid), 10)
	b = append(b, ',')
	b = appendTime(b, at)
	b = append(b, ',')
	return strconv.AppendUint(b, uint64(source), 10)
}

// appendTime appends unix seconds t as a quoted DATETIME literal in UTC,
// or noTime for 0.
func appendTime(b []byte, t int64) []byte {
	b = append(b, '"')
	if t == 0 {
		b = append(b, noTime...)
	} else {
		b = time.Unix(t, 0).UTC().AppendFormat(b, time.DateTime)
	}
	return append(b, '"')
}

// datetime formats unix seconds as a UTC DATETIME literal, so the stored
// value does not depend on the DSN's loc or the session time_zone.
func datetime(unix int64) string {
	return time.Unix(unix, 0).UTC().Format(time.DateTime)
}

// nullTime is datetime(unix), or NULL for 0.
func nullTime(unix int64) any {
	if unix == 0 {
		return nil
	}
	return datetime(unix)
}
