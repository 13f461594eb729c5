package disclose

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/dashboard/internal/handle"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/progress"
)

// Records makes evidence of members (evidence.Service): one
// member's record and its PDF, and the ZIP of a selection. It decides
// whom the caller's scope reaches (evidence.ErrNotFound otherwise).
type Records interface {
	Record(ctx context.Context, scope evidence.Scope, corp, msgid, userid string) (evidence.Record, error)
	PDF(w io.Writer, rec evidence.Record) error
	Select(ctx context.Context, scope evidence.Scope, corp, msgid string, f evidence.Filter) (evidence.Selection, error)
	WriteZIP(ctx context.Context, w io.Writer, sel evidence.Selection) (int, error)
}

// HandleEvidence answers GET …/evidence/{userid} (JSON) and
// …/evidence/{userid}.pdf (the 告知确认书). A UserID ending in ".pdf"
// asks for the PDF: UserIDs may hold dots, so "a.pdf" is a's PDF.
func (s *Handlers) HandleEvidence(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.Evidence == nil {
		s.Fail(w, r, errNotFound)
		return
	}
	userid, pdf := strings.CutSuffix(chi.URLParam(r, "file"), ".pdf")
	rec, err := s.Evidence.Record(r.Context(), viewFrom(r.Context()), m.CorpID, m.MsgID, userid)
	if errors.Is(err, evidence.ErrNotFound) {
		err = errNotFound
	}
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	format := "json"
	if pdf {
		format = "pdf"
	}
	// Fail closed: no one's evidence leaves without its audit row. A PDF
	// is streamed: its first row says it started, a second what happened.
	e := event(r, yidu.ActionEvidence, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = 1, "userid="+userid+" format="+format
	if pdf {
		e.Outcome = outcomeStarted
	}
	if !s.Disclose(w, r, e, "evidence") {
		return
	}
	if !pdf {
		writeJSON(w, http.StatusOK, rec)
		return
	}
	// msgid and a valid UserID are [0-9A-Za-z_@.-]: safe in the quotes.
	download(w, "application/pdf", fmt.Sprintf("%s-%s.pdf", m.MsgID, userid))
	err = s.Evidence.PDF(w, rec)
	s.recordStreamed(r, e, 1, err)
	if err != nil {
		s.Log.WarnContext(r.Context(), "evidence pdf cut short", "corp", m.CorpID, "msgid", m.MsgID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// download sets the headers of a file the browser saves as filename
// (which the caller keeps to characters safe inside quotes), never
// cached.
func download(w http.ResponseWriter, contentType, filename string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", `attachment; filename="`+filename+`"`)
}

// outcomeStarted is the outcome of the audit row a streamed download
// writes before its first byte (fail closed); recordStreamed writes the
// row of how it ended.
const outcomeStarted = audit.OutcomeStarted

// recordStreamed records how a streamed download that e started ended
// (audit.Event.Ended: "ok" with the people it holds, or "failed" with
// how far it got), so a download cut short never reads as a success in
// the audit log.
func (s *Handlers) recordStreamed(r *http.Request, e audit.Event, people int64, err error) {
	// The request's context may be gone with its client; the row is not.
	ctx := context.WithoutCancel(r.Context())
	_ = s.Record(r.WithContext(ctx), e.Ended(people, err))
}

// HandleEvidenceZIP streams GET …/evidence.zip?department=&state=: each
// person's PDF and proofs, the manifest, written to the client as they
// are made. A failure midway aborts the connection, so the client holds
// a ZIP without its directory rather than a short one that opens.
func (s *Handlers) HandleEvidenceZIP(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.Evidence == nil {
		s.Fail(w, r, errNotFound)
		return
	}
	rq, err := handle.ParseRecipientQuery(r, false)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	if rq.State.PageState() {
		// evidence.Select knows read and unread only: never a ZIP of
		// everyone for a page state it ignored.
		s.Fail(w, r, badParam("state of evidence.zip must be read, unread or all"))
		return
	}
	f := evidence.Filter{Department: rq.Department, HasDepartment: rq.HasDepartment}
	if rq.State != progress.StateAll {
		f.State = string(rq.State)
	}
	ctx := r.Context()
	sel, err := s.Evidence.Select(ctx, viewFrom(ctx), m.CorpID, m.MsgID, f)
	if errors.Is(err, evidence.ErrNotFound) {
		err = errNotFound
	}
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	e := event(r, yidu.ActionEvidence, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = int64(len(sel.People)), fmt.Sprintf("format=zip state=%s department=%s", rq.State, r.URL.Query().Get("department"))
	e.Outcome = outcomeStarted
	if !s.Disclose(w, r, e, "evidence") {
		return
	}
	download(w, "application/zip", fmt.Sprintf("%s-evidence-%s.zip", m.MsgID, rq.State))
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(stallWriter{w: w, rc: rc, stall: s.exportStall}, 64<<10)
	n, err := s.Evidence.WriteZIP(ctx, bw, sel)
	if err == nil {
		err = bw.Flush()
	}
	s.exportRows.Add(float64(n))
	s.recordStreamed(r, e, int64(n), err)
	if err != nil {
		s.Log.WarnContext(ctx, "evidence zip cut short", "corp", m.CorpID, "msgid", m.MsgID, "people", n, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// stallWriter gives each write to the client exportStall: the download
// lasts as long as the client keeps reading, as export.csv's.
type stallWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	stall time.Duration
}

func (sw stallWriter) Write(p []byte) (int, error) {
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.stall))
	n, err := sw.w.Write(p)
	if err == nil {
		err = sw.rc.Flush() // a client gone shows here first
	}
	return n, err
}
