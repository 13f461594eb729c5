package dashboard

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
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/progress"
)

// EvidenceRecords makes evidence of members (evidence.Service): one
// member's record and its PDF, and the ZIP of a selection. It decides
// whom the caller's scope reaches (evidence.ErrNotFound otherwise).
type EvidenceRecords interface {
	Record(ctx context.Context, scope evidence.Scope, corp, msgid, userid string) (evidence.Record, error)
	PDF(w io.Writer, rec evidence.Record) error
	Select(ctx context.Context, scope evidence.Scope, corp, msgid string, f evidence.Filter) (evidence.Selection, error)
	WriteZIP(ctx context.Context, w io.Writer, sel evidence.Selection) (int, error)
}

// handleEvidence answers GET …/evidence/{userid} (JSON) and
// …/evidence/{userid}.pdf (the 告知确认书). A UserID ending in ".pdf"
// asks for the PDF: UserIDs may hold dots, so "a.pdf" is a's PDF.
func (s *Server) handleEvidence(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.evidence == nil {
		s.fail(w, r, errNotFound)
		return
	}
	userid, pdf := strings.CutSuffix(chi.URLParam(r, "file"), ".pdf")
	rec, err := s.evidence.Record(r.Context(), viewFrom(r.Context()), m.CorpID, m.MsgID, userid)
	if errors.Is(err, evidence.ErrNotFound) {
		err = errNotFound
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	format := "json"
	if pdf {
		format = "pdf"
	}
	// Fail closed: no one's evidence leaves without its audit row.
	e := event(r, yidu.ActionEvidence, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = 1, "userid="+userid+" format="+format
	if err := s.record(r, e); err != nil {
		writeError(w, http.StatusServiceUnavailable, "evidence unavailable, try again shortly")
		return
	}
	if !pdf {
		writeJSON(w, http.StatusOK, rec)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/pdf")
	h.Set("Cache-Control", "no-store")
	// msgid and a valid UserID are [0-9A-Za-z_@.-]: safe in the quotes.
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.pdf"`, m.MsgID, userid))
	if err := s.evidence.PDF(w, rec); err != nil {
		s.log.WarnContext(r.Context(), "evidence pdf cut short", "corp", m.CorpID, "msgid", m.MsgID, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// handleEvidenceZIP streams GET …/evidence.zip?department=&state=: each
// person's PDF and proofs, the manifest, written to the client as they
// are made. A failure midway aborts the connection, so the client holds
// a ZIP without its directory rather than a short one that opens.
func (s *Server) handleEvidenceZIP(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	if s.evidence == nil {
		s.fail(w, r, errNotFound)
		return
	}
	rq, err := parseRecipientQuery(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f := evidence.Filter{Department: rq.Department, HasDepartment: rq.HasDepartment}
	if rq.State != progress.StateAll {
		f.State = string(rq.State)
	}
	ctx := r.Context()
	sel, err := s.evidence.Select(ctx, viewFrom(ctx), m.CorpID, m.MsgID, f)
	if errors.Is(err, evidence.ErrNotFound) {
		err = errNotFound
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	e := event(r, yidu.ActionEvidence, m.CorpID, m.App, m.MsgID)
	e.People, e.Detail = int64(len(sel.People)), fmt.Sprintf("format=zip state=%s department=%s", rq.State, r.URL.Query().Get("department"))
	if err := s.record(r, e); err != nil {
		writeError(w, http.StatusServiceUnavailable, "evidence unavailable, try again shortly")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/zip")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-evidence-%s.zip"`, m.MsgID, rq.State))
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(stallWriter{w: w, rc: rc, stall: s.exportStall}, 64<<10)
	n, err := s.evidence.WriteZIP(ctx, bw, sel)
	if err == nil {
		err = bw.Flush()
	}
	s.met.exportRows.Add(float64(n))
	if err != nil {
		s.log.WarnContext(ctx, "evidence zip cut short", "corp", m.CorpID, "msgid", m.MsgID, "people", n, "err", err)
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
		_ = sw.rc.Flush()
	}
	return n, err
}
