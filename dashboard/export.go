package dashboard

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/yidu-io/yidu/progress"

	"github.com/yidu-io/yidu"
)

// utf8BOM makes Excel read the file as UTF-8, so Chinese names survive.
const utf8BOM = "\ufeff"

// neutralise stops a spreadsheet from evaluating a cell as a formula (CSV
// injection, OWASP): a cell starting with = + - @ tab or CR gets a leading
// '. Spreadsheets in locales whose list separator is ';' split a cell
// there, so each ';'-separated part is neutralised too (and csvRow quotes
// such a cell).
func neutralise(cell string) string {
	if !strings.Contains(cell, ";") {
		return neutralisePart(cell)
	}
	parts := strings.Split(cell, ";")
	for i, p := range parts {
		parts[i] = neutralisePart(p)
	}
	return strings.Join(parts, ";")
}

func neutralisePart(part string) string {
	// A spreadsheet that splits on ';' may trim the space after it: the
	// first byte that is not a space decides.
	lead := strings.TrimLeft(part, " ")
	if lead == "" {
		return part
	}
	switch lead[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + part
	}
	return part
}

// csvRow appends one CSV record (RFC 4180) to b. A field is quoted when it
// holds a separator a spreadsheet may use (',' or ';'), a quote, a line
// break, or space at either end; encoding/csv would leave ';' bare.
func csvRow(b []byte, fields []string) []byte {
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		if f != "" && (strings.ContainsAny(f, ",;\"\r\n") || f[0] == ' ' || f[0] == '\t' || f[len(f)-1] == ' ') {
			b = append(b, '"')
			b = append(b, strings.ReplaceAll(f, `"`, `""`)...)
			b = append(b, '"')
			continue
		}
		b = append(b, f...)
	}
	return append(b, '\n')
}

// handleExport streams the selection as CSV. Memory stays flat: the uids
// are walked chunkSize at a time, each chunk's users and read times fetched
// and written, then dropped. A failure mid-stream aborts the connection so
// the client sees a broken download rather than a silently short file.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	rq, err := parseRecipientQuery(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	sel, err := s.prog.Select(ctx, m, viewFrom(ctx), principalFrom(ctx), rq)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Fail closed: no personal data leaves without its audit row.
	e := event(r, yidu.ActionExport, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = int64(sel.Total()), "state="+string(rq.State)
	if err := s.record(r, e); err != nil {
		writeError(w, http.StatusServiceUnavailable, "export unavailable, try again shortly")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// msgid matches [0-9A-Za-z_-]: safe inside the quoted filename.
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.csv"`, m.MsgID, rq.State))
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	_, _ = bw.WriteString(utf8BOM)
	// first_signal and first_signal_time are MySQL's source and read_time:
	// the first signal that counted as read (read_time repeats the time,
	// as before signals were kept apart).
	_, _ = bw.Write(csvRow(line, []string{"userid", "name", "departments", "state", "read_time", "first_signal", "first_signal_time"}))

	var rows int64
	row := make([]string, 7)
	names := make([]string, 0, 8)
	err = sel.Rows(ctx, func(chunk []progress.Row) error {
		for _, rw := range chunk {
			names = names[:0]
			for _, d := range rw.Departments {
				// Each name neutralised on its own: the second is a
				// cell of its own where ';' separates cells.
				names = append(names, neutralisePart(d))
			}
			row[0], row[1], row[2] = neutralise(rw.User.UserID), neutralise(rw.User.Name), strings.Join(names, "; ")
			row[3], row[4], row[5], row[6] = "unread", "", "", ""
			if rw.Read {
				row[3] = "read"
				if f := rw.First; f != nil {
					row[4] = f.At.UTC().Format(time.RFC3339)
					row[5], row[6] = f.SignalName(), row[4]
				}
			}
			line = csvRow(line[:0], row)
			if _, err := bw.Write(line); err != nil {
				return err
			}
			rows++
		}
		// The export lasts as long as the client keeps reading: each chunk
		// gets exportStall to reach it, the whole has no limit.
		_ = rc.SetWriteDeadline(time.Now().Add(s.exportStall))
		if err := bw.Flush(); err != nil {
			return err
		}
		_ = rc.Flush()
		return nil
	})
	s.met.exportRows.Add(float64(rows))
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		s.log.WarnContext(ctx, "export cut short", "corp", m.CorpID, "msgid", m.MsgID, "rows", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
}
