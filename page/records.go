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

// notFoundText is 我的记录's 404 (issue 49: a bare English "not found").
const notFoundText = "没有找到这条记录。"

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
		http.Error(w, notFoundText, http.StatusNotFound)
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
		http.Error(w, notFoundText, http.StatusNotFound)
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
	Receipts             []string
	PDF                  string
}

// receiptWords are the receipts' states in the page's words.
var receiptWords = map[string]string{"queued": "发送中", "sent": "已发送", "refused": "未送达", "off": "未开启"}

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
		v := receivedView{Title: rc.Title, SentAt: rc.SentAt.In(shanghai).Format("2006-01-02 15:04"), State: recordState(rc),
			PDF: url.PathEscape(userid) + "/" + url.PathEscape(rc.MsgID) + "/evidence.pdf"}
		for _, sg := range rc.Signals {
			v.Signals = append(v.Signals, fmt.Sprintf("%s %s", sg.At.In(shanghai).Format("2006-01-02 15:04:05"), evidence.SignalWord(sg.Kind)))
		}
		for _, rc := range rc.Receipts {
			w := fmt.Sprintf("第 %d 版：%s", rc.Version, receiptWords[rc.State])
			if rc.SentAt != nil {
				w += " " + rc.SentAt.In(shanghai).Format("2006-01-02 15:04:05")
			}
			v.Receipts = append(v.Receipts, w)
		}
		out.Notices = append(out.Notices, v)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, "records.html", out); err != nil {
		s.log.ErrorContext(r.Context(), "page: render", "err", err)
	}
}

// recordState is how far the member got with a notice, in the glossary's
// words (zh-CN.md): the furthest signal recorded, so a notice read to the
// end and acknowledged on the page reads 已确认知悉, never 已打开.
func recordState(rc evidence.Received) string {
	switch {
	case rc.Has("acknowledged"):
		return evidence.SignalWord("acknowledged")
	case rc.Has("read_to_end"):
		return evidence.SignalWord("read_to_end")
	case rc.Read:
		return "已读"
	case rc.Has("link"):
		return evidence.SignalWord("link")
	}
	return "未读"
}

// handleRecordPDF downloads the member's own 告知确认书 of one notice.
func (s *Server) handleRecordPDF(w http.ResponseWriter, r *http.Request) {
	a, userid, ok := s.member(w, r)
	if !ok {
		return
	}
	msgID := chi.URLParam(r, "msgid")
	if !yidu.MsgID(msgID).Valid() {
		http.Error(w, notFoundText, http.StatusNotFound)
		return
	}
	rec, err := s.opts.Records.Record(r.Context(), self{}, a.CorpID, msgID, userid)
	if errors.Is(err, evidence.ErrNotFound) {
		http.Error(w, notFoundText, http.StatusNotFound)
		return
	}
	ev := audit.Event{At: s.opts.Now(), Actor: userid, ActorKind: "wecom", Action: yidu.ActionEvidence,
		CorpID: a.CorpID, App: a.Name, MsgID: msgID, People: 1, Outcome: audit.OutcomeStarted, Detail: "own evidence format=pdf", UserAgent: yidu.Truncate(r.UserAgent(), 255)}
	if err == nil {
		// Streamed: "started" first (fail closed), then how it ended.
		err = s.audit.Record(r.Context(), ev)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: evidence", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/pdf")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.pdf"`, msgID, userid))
	err = s.opts.Records.PDF(w, rec)
	end := ev.Ended(1, err)
	end.At = s.opts.Now()
	if aerr := s.audit.Record(context.WithoutCancel(r.Context()), end); aerr != nil {
		s.log.ErrorContext(r.Context(), "page: audit", "err", aerr)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: evidence pdf cut short", "err", err)
		panic(http.ErrAbortHandler)
	}
}
