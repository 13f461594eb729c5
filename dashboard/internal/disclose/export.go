package disclose

import (
	"bufio"
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/progress"

	"github.com/yidu-io/yidu"
)

// UTF8BOM makes Excel read the file as UTF-8, so Chinese names survive.
const UTF8BOM = "\ufeff"

// neutralise is yidu.CSVCell: the one rule for every CSV people open.
func neutralise(cell string) string { return yidu.CSVCell(cell) }

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

// HandleExport streams the selection as CSV. Memory stays flat: the uids
// are walked chunkSize at a time, each chunk's users and read times fetched
// and written, then dropped. A failure mid-stream (a backend's, or the
// client gone) aborts the connection so the client sees a broken download
// rather than a silently short file, and the audit row of its end says
// failed: as the evidence downloads, a "started" row before the first
// byte, then "ok" only when the whole file was written.
func (s *Handlers) HandleExport(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	rq, err := handle.ParseRecipientQuery(r, false)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	ctx := r.Context()
	sel, err := s.Prog.Select(ctx, m, viewFrom(ctx), principalFrom(ctx), rq)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	// Fail closed: no personal data leaves without its audit row.
	e := event(r, yidu.ActionExport, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail, e.Outcome = int64(sel.Total()), "state="+string(rq.State), outcomeStarted
	if !s.Disclose(w, r, e, "export") {
		return
	}
	// msgid matches [0-9A-Za-z_-]: safe inside the quoted filename.
	download(w, "text/csv; charset=utf-8", fmt.Sprintf("%s-%s.csv", m.MsgID, rq.State))
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 64<<10)
	var line []byte
	_, _ = bw.WriteString(UTF8BOM)
	f := s.exportFormatOf(r, m)
	_, _ = bw.Write(csvRow(line, f.header))

	var rows int64
	row := make([]string, 7)
	names := make([]string, 0, 8)
	err = sel.Rows(ctx, func(chunk []progress.Row) error {
		for _, rw := range chunk {
			names = f.fill(row, names, rw)
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
		return rc.Flush()
	})
	s.exportRows.Add(float64(rows))
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		// Out of net/http's buffers too: ok means the whole file went.
		err = rc.Flush()
	}
	s.recordStreamed(r, e, rows, err)
	if err != nil {
		s.Log.WarnContext(ctx, "export cut short", "corp", m.CorpID, "msgid", m.MsgID, "rows", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// exportFormat is how an export writes its header, states and times.
type exportFormat struct {
	zh                   bool
	zone                 *time.Location
	header               []string
	readWord, unreadWord string
}

// exportFormatOf is the export's format for r and m.
func (s *Handlers) exportFormatOf(r *http.Request, m yidu.Message) exportFormat {
	// first_signal and first_signal_time are MySQL's source and read_time:
	// the first signal that counted as read (read_time repeats the time,
	// as before signals were kept apart).
	// labels=zh-CN (the page's downloads in Chinese) writes the page's
	// headers and words, and times in the app's zone as 2026-12-03 18:05:05;
	// without it the columns stay the machine's (UTC, RFC 3339).
	f := exportFormat{
		zh:       r.URL.Query().Get("labels") == "zh-CN",
		zone:     time.UTC,
		header:   []string{"userid", "name", "departments", "state", "read_time", "first_signal", "first_signal_time"},
		readWord: "read", unreadWord: "unread",
	}
	if f.zh {
		f.header = []string{"账号", "姓名", "部门", "状态", "已读时间", "首个计为已读的信号", "该信号时间"}
		f.readWord, f.unreadWord = "已读", "未读"
		tz := yidu.DefaultTimezone
		if a, ok := s.apps[m.App]; ok && a.CorpID == m.CorpID && a.Timezone != "" {
			tz = a.Timezone
		}
		if z, err := time.LoadLocation(tz); err == nil {
			f.zone = z
		}
	}
	return f
}

func (f exportFormat) stamp(t time.Time) string {
	if f.zh {
		return t.In(f.zone).Format("2006-01-02 15:04:05")
	}
	return t.UTC().Format(time.RFC3339)
}

// fill fills row with rw's cells; names is scratch space for the
// departments, returned for the next row.
func (f exportFormat) fill(row, names []string, rw progress.Row) []string {
	names = names[:0]
	for _, d := range rw.Departments {
		// Each name neutralised on its own: the second is a
		// cell of its own where ';' separates cells.
		names = append(names, neutralise(d))
	}
	row[0], row[1], row[2] = neutralise(rw.User.UserID), neutralise(rw.User.Name), strings.Join(names, "; ")
	row[3], row[4], row[5], row[6] = f.unreadWord, "", "", ""
	if rw.Read {
		row[3] = f.readWord
		if first := rw.First; first != nil {
			row[4] = f.stamp(first.At)
			row[5], row[6] = first.SignalName(), row[4]
			if f.zh {
				row[5] = cmp.Or(first.Signal.Word(), "对账补记")
			}
		}
	}
	// Under read_rule acknowledged the state is the page's four
	// (未打开 · 已打开未读完 · 已读完未确认 · 已确认知悉).
	if rw.State != "" {
		row[3] = string(rw.State)
		if f.zh {
			row[3] = rw.State.Word()
		}
	}
	return names
}
