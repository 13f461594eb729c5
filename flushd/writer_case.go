package flushd

import "strings"

// casePrefix starts every batch UPDATE of the CASE form (tests count
// statements by it).
const casePrefix = "UPDATE message_read_record SET "

// caseArgsPerUID is the most placeholders the CASE form binds for one uid:
// its place in the IN list (1), in is_read's IN list (1), read_time's and
// source's WHEN ? THEN ? (2 each) and each signal's (2 each).
const caseArgsPerUID = 1 + 1 + 2 + 2 + 3*2

// maxCaseBatch is the most uids one CASE statement carries within MySQL's
// 65,535 placeholders (5461); a larger batch is split.
const maxCaseBatch = (65535 - 2) / caseArgsPerUID

// caseStatement builds the batch UPDATE for servers without JSON_TABLE:
// every value bound, one CASE uid WHEN ? THEN ? … END per column, on the
// rows of the batch's uids. reads are sorted by uid, one per uid, at most
// maxCaseBatch. It writes what updateStatement writes, with the same
// guards:
//
//	UPDATE message_read_record SET
//	    is_read   = IF(uid IN (counted uids), 1, is_read),
//	    read_time = COALESCE(read_time, CASE uid WHEN ? THEN ? … END),
//	    source    = IF(source = 0, CASE uid WHEN ? THEN ? … ELSE 0 END, source),
//	    button_at = COALESCE(button_at, CASE uid WHEN ? THEN ? … END), … link_at, enter_at
//	WHERE corp_id = ? AND msgid = ? AND uid IN (…)
//	  AND (is_read = 0 OR button_at IS NULL OR …)
//
// A column no read of the batch writes is left out. Each assignment reads
// only its own column's old value: a single-table UPDATE assigns left to
// right, each seeing the new values before it. read_time and source are
// empty exactly while is_read = 0 (set together), so COALESCE and
// source = 0 are the is_read = 0 guard. The last WHERE line skips rows
// holding everything already; RowsAffected counts changed rows only.
func caseStatement(corpID, msgID string, reads []Read) (string, []any) {
	var q strings.Builder
	args := make([]any, 0, 2+caseArgsPerUID*len(reads))
	q.WriteString(casePrefix)
	var counted []Read
	for _, r := range reads {
		if r.Source != 0 {
			counted = append(counted, r)
		}
	}
	var set []string // the assignments, joined by ", "
	var guards []string
	if len(counted) > 0 {
		var b strings.Builder
		b.WriteString("is_read = IF(uid IN (")
		args = appendUIDs(&b, args, counted)
		b.WriteString("), 1, is_read)")
		set = append(set, b.String())

		b.Reset()
		b.WriteString("read_time = COALESCE(read_time, CASE uid")
		args = appendWhens(&b, args, counted, func(r Read) any { return datetime(r.At) })
		b.WriteString(" END)")
		set = append(set, b.String())

		b.Reset()
		b.WriteString("source = IF(source = 0, CASE uid")
		args = appendWhens(&b, args, counted, func(r Read) any { return int64(r.Source) })
		b.WriteString(" ELSE 0 END, source)")
		set = append(set, b.String())
		guards = append(guards, "is_read = 0")
	}
	for _, c := range [...]struct {
		col string
		at  func(Read) int64
	}{
		{"button_at", func(r Read) int64 { return r.Button }},
		{"link_at", func(r Read) int64 { return r.Link }},
		{"enter_at", func(r Read) int64 { return r.EnterAgent }},
	} {
		var b strings.Builder
		for _, r := range reads {
			if t := c.at(r); t != 0 {
				if b.Len() == 0 {
					b.WriteString(c.col + " = COALESCE(" + c.col + ", CASE uid")
				}
				b.WriteString(" WHEN ? THEN ?")
				args = append(args, r.UID, datetime(t))
			}
		}
		if b.Len() > 0 {
			b.WriteString(" END)")
			set = append(set, b.String())
			guards = append(guards, c.col+" IS NULL")
		}
	}
	q.WriteString(strings.Join(set, ", "))
	q.WriteString(" WHERE corp_id = ? AND msgid = ? AND uid IN (")
	args = appendUIDs(&q, append(args, corpID, msgID), reads)
	q.WriteString(") AND (" + strings.Join(guards, " OR ") + ")")
	return q.String(), args
}

// appendUIDs writes one placeholder per read, comma-separated, and binds
// its uid.
func appendUIDs(b *strings.Builder, args []any, reads []Read) []any {
	for i, r := range reads {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		args = append(args, r.UID)
	}
	return args
}

// appendWhens writes " WHEN ? THEN ?" per read and binds its uid and
// value(r).
func appendWhens(b *strings.Builder, args []any, reads []Read, value func(Read) any) []any {
	for _, r := range reads {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, r.UID, value(r))
	}
	return args
}
