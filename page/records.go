package page

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/evidence"
)

// Records are a member's own notices and evidence (evidence.Service), for
// 我的记录 (PIPL Art. 45: a person may see what is kept about them).
type Records interface {
	Received(ctx context.Context, corp, userid string) ([]evidence.Received, error)
	Record(ctx context.Context, scope evidence.Scope, corp, msgid, userid string) (evidence.Record, error)
	PDF(w io.Writer, rec evidence.Record) error
}

// self is the scope of a member looking at their own record: the UserID
// asked for is the session's (checked before), so every uid it resolves
// to is theirs.
type self struct{}

func (self) Contains(uint32) bool { return true }

// member returns the session's UserID when it is the one in the URL; it
// starts the sign-in without a session and answers 404 for another
// member's UserID (with an audit row).
func (s *Server) member(w http.ResponseWriter, r *http.Request) (App, string, bool) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	userid := chi.URLParam(r, "userid")
	if !ok || s.opts.Records == nil || !yidu.UserID(userid).Valid() {
		http.Error(w, "not found", http.StatusNotFound)
		return a, "", false
	}
	sess, ok, err := s.sessionOf(r)
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: session", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return a, "", false
	}
	if !ok || sess.Corp != a.CorpID {
		s.startSignIn(w, r, a)
		return a, "", false
	}
	if sess.UserID != userid {
		if err := s.audit.Record(r.Context(), audit.Event{At: s.opts.Now(), Actor: sess.UserID, ActorKind: "wecom", Action: yidu.ActionPageDenied,
			CorpID: a.CorpID, App: a.Name, Outcome: "denied", Detail: "records of another member", UserAgent: yidu.Truncate(r.UserAgent(), 255)}); err != nil {
			s.log.ErrorContext(r.Context(), "page: audit", "err", err)
		}
		http.Error(w, "not found", http.StatusNotFound)
		return a, "", false
	}
	return a, userid, true
}

// recordsView is what records.html shows.
type recordsView struct {
	UserID  string
	Notices []receivedView
}

type receivedView struct {
	Title, SentAt, State string
	Signals              []string
	PDF                  string
}

// handleRecords is 我的记录: the notices the member received and what was
// recorded of their reading, each with its 告知确认书 to download. The
// view is an audit row, as any view of personal read data.
func (s *Server) handleRecords(w http.ResponseWriter, r *http.Request) {
	a, userid, ok := s.member(w, r)
	if !ok {
		return
	}
	list, err := s.opts.Records.Received(r.Context(), a.CorpID, userid)
	if err == nil {
		err = s.audit.Record(r.Context(), audit.Event{At: s.opts.Now(), Actor: userid, ActorKind: "wecom", Action: yidu.ActionEvidence,
			CorpID: a.CorpID, App: a.Name, People: 1, Outcome: "ok", Detail: "own records", UserAgent: yidu.Truncate(r.UserAgent(), 255)})
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: records", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	out := recordsView{UserID: userid}
	for _, rc := range list {
		v := receivedView{Title: rc.Title, SentAt: rc.SentAt.In(shanghai).Format("2006-01-02 15:04"), State: "未读",
			PDF: url.PathEscape(userid) + "/" + url.PathEscape(rc.MsgID) + "/evidence.pdf"}
		if rc.Read {
			v.State = "已读"
		}
		for _, sg := range rc.Signals {
			v.Signals = append(v.Signals, fmt.Sprintf("%s %s", sg.At.In(shanghai).Format("2006-01-02 15:04:05"), evidence.SignalWord(sg.Kind)))
		}
		out.Notices = append(out.Notices, v)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, "records.html", out); err != nil {
		s.log.ErrorContext(r.Context(), "page: render", "err", err)
	}
}

// handleRecordPDF downloads the member's own 告知确认书 of one notice.
func (s *Server) handleRecordPDF(w http.ResponseWriter, r *http.Request) {
	a, userid, ok := s.member(w, r)
	if !ok {
		return
	}
	msgID := chi.URLParam(r, "msgid")
	if !yidu.MsgID(msgID).Valid() {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	rec, err := s.opts.Records.Record(r.Context(), self{}, a.CorpID, msgID, userid)
	if errors.Is(err, evidence.ErrNotFound) {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if err == nil {
		err = s.audit.Record(r.Context(), audit.Event{At: s.opts.Now(), Actor: userid, ActorKind: "wecom", Action: yidu.ActionEvidence,
			CorpID: a.CorpID, App: a.Name, MsgID: msgID, People: 1, Outcome: "ok", Detail: "own evidence format=pdf", UserAgent: yidu.Truncate(r.UserAgent(), 255)})
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: evidence", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/pdf")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.pdf"`, msgID, userid))
	if err := s.opts.Records.PDF(w, rec); err != nil {
		s.log.ErrorContext(r.Context(), "page: evidence pdf cut short", "err", err)
		panic(http.ErrAbortHandler)
	}
}
