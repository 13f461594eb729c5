package page

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/notice"
)

// reader returns the signed-in reader of app's msgid, or answers for the
// request itself (sign-in, redirect, 404, 503) and returns ok false.
// Without a session, startSignIn starts one (else 404); a notice of
// another app redirects to its page there when startSignIn (else 404).
func (s *Server) reader(w http.ResponseWriter, r *http.Request, a App, msgID string, startSignIn bool) (session, Reader, bool) {
	sess, rd, _, ok := s.visit(w, r, a, msgID, startSignIn, false)
	return sess, rd, ok
}

// prefetched is the current-version key's GET made with the session's.
type prefetched struct {
	cur   current
	found bool
	err   error
}

// visit is reader; withCurrent also reads the notice's current version
// key in the session's round trip (the page's open).
func (s *Server) visit(w http.ResponseWriter, r *http.Request, a App, msgID string, startSignIn, withCurrent bool) (session, Reader, prefetched, bool) {
	ctx := r.Context()
	var pre prefetched
	var sess session
	var ok bool
	var err error
	if withCurrent {
		sess, ok, pre, err = s.sessionWithCurrent(r, a.CorpID, msgID)
	} else {
		sess, ok, err = s.sessionOf(r)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "page: session", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return session{}, Reader{}, pre, false
	}
	if !ok || sess.Corp != a.CorpID {
		if startSignIn {
			s.startSignIn(w, r, a)
		} else {
			notFound(w)
		}
		return session{}, Reader{}, pre, false
	}
	rd := Reader{UID: sess.UID, Name: sess.Name, Left: sess.Status == statusLeft}
	found := sess.Status != statusUnknown
	if !sess.Reader {
		// A session from before sessions carried the reader.
		rd, found, err = s.readers.Reader(ctx, a.CorpID, sess.UserID)
	}
	recipient := false
	if err == nil && found && !rd.Left {
		recipient, err = s.readers.IsRecipient(ctx, a.CorpID, msgID, rd.UID)
	}
	var app string
	if err == nil && recipient {
		app, err = s.noticeApp(ctx, a.CorpID, msgID)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "page: reader", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return session{}, Reader{}, pre, false
	}
	if !recipient {
		detail := "not a recipient"
		if found && rd.Left {
			detail = "left the company"
		} else if !found {
			detail = "not in the directory"
		}
		if err := s.audit.Record(ctx, audit.Event{At: s.opts.Now(), Actor: sess.UserID, ActorKind: "wecom", Action: yidu.ActionPageDenied,
			CorpID: a.CorpID, App: a.Name, MsgID: msgID, Outcome: "denied", Detail: detail, UserAgent: yidu.Truncate(r.UserAgent(), 255)}); err != nil {
			s.log.ErrorContext(ctx, "page: audit", "err", err)
		}
		notFound(w)
		return session{}, Reader{}, pre, false
	}
	if app != "" && app != a.Name {
		// Opened under another app (issue 46): its page is the notice's
		// app's, where its signals are recorded.
		if right, ok := s.apps[app]; ok && right.CorpID == a.CorpID && startSignIn {
			to := "/r/" + url.PathEscape(app) + "/" + url.PathEscape(msgID)
			if r.URL.RawQuery != "" {
				to += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, to, http.StatusFound)
		} else {
			notFound(w)
		}
		return session{}, Reader{}, pre, false
	}
	return sess, rd, pre, true
}

// noticeApp names the app that sent msgID ("" when unknown), remembered:
// a notice never changes app.
func (s *Server) noticeApp(ctx context.Context, corp, msgID string) (string, error) {
	k := corp + "/" + msgID
	if app, ok := s.noticeApps.get(k); ok {
		return app, nil
	}
	app, found, err := s.readers.NoticeApp(ctx, corp, msgID)
	if err != nil || !found {
		return "", err
	}
	s.noticeApps.put(k, app)
	return app, nil
}

// pageView is what the template shows.
type pageView struct {
	Title    string
	Text     template.HTML
	Version  int
	Versions int
	// Note is the version's change note (修改说明), escaped by the
	// template: plain text, never markup.
	Note         string
	SHA256       string
	Images, PDFs []attachmentView
	Reader       string
	UserID       string
	At           string
	Watermark    []int
	// View is the token the page's events name; Ended and Acked what
	// the reader already did on this version; MinRead the seconds before
	// #ack may be pressed; Events the events' path relative to the page.
	View         string
	Events       string
	Ended, Acked bool
	MinRead      int
}

type attachmentView struct {
	Name, Href, Size string
}

// noticeOf is the app and msgid of a notice's route (/{app}/{msgid}/...);
// false (answered 404) for an app or msgid that is not one.
func (s *Server) noticeOf(w http.ResponseWriter, r *http.Request) (App, string, bool) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	msgID := chi.URLParam(r, "msgid")
	if !ok || !yidu.MsgID(msgID).Valid() {
		notFound(w)
		return a, "", false
	}
	return a, msgID, true
}

// handleView serves a version of the notice (?v=N, else the latest) to
// a recipient signed in: Redis (session, recipient, current version,
// view) and memory (the version, its page rendered once), no MySQL once
// this receiver has served the version.
func (s *Server) handleView(w http.ResponseWriter, r *http.Request) {
	a, msgID, ok := s.noticeOf(w, r)
	if !ok {
		return
	}
	n := 0
	if q := r.URL.Query().Get("v"); q != "" {
		var err error
		if n, err = strconv.Atoi(q); err != nil || n < 1 || len(q) > 9 {
			http.Error(w, "v is a version number", http.StatusBadRequest)
			return
		}
	}
	sess, rd, pre, ok := s.visit(w, r, a, msgID, true, true)
	if !ok {
		return
	}
	ctx := r.Context()
	cur, err := s.vers.currentOr(ctx, a.CorpID, msgID, pre.cur, pre.found, pre.err)
	if n == 0 {
		n = cur.Latest
	}
	var v notice.Version
	if err == nil {
		if n > cur.Latest {
			err = notice.ErrNotFound
		} else {
			v, err = s.vers.get(ctx, a.CorpID, msgID, n)
		}
	}
	if errors.Is(err, notice.ErrNotFound) {
		notFound(w)
		return
	}
	if err != nil {
		s.log.ErrorContext(ctx, "page: version", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	now := s.opts.Now()
	token, ended, acked, err := s.beginView(ctx, view{App: a.Name, Corp: a.CorpID, MsgID: msgID, UserID: sess.UserID, UID: rd.UID,
		Version: v.N, ShownMs: now.UnixMilli(), MinRead: v.Settings.MinReadSeconds, Material: cur.Material})
	if err != nil {
		s.log.ErrorContext(ctx, "page: view", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	// The page was opened: the signal link with the version shown, as the
	// tracked link's landing records it (best-effort: the reader must
	// reach the text).
	lctx, cancel := s.signalContext(r)
	defer cancel()
	if _, _, err := s.reads.PageSignal(lctx, yidu.SignalLink, a.CorpID, a.AgentID, sess.UserID, msgID, now,
		bitmap.PageEvent{Version: v.N, IP: s.clientIP(r), UserAgent: r.UserAgent()}); err != nil {
		s.log.ErrorContext(ctx, "page: link not recorded", "app", a.Name, "msgid", msgID, "err", err)
	}
	page, err := s.rendered(pageKey{corp: a.CorpID, msgid: msgID, n: v.N, latest: cur.Latest, ended: ended, acked: acked}, v)
	if err != nil {
		s.log.ErrorContext(ctx, "page: render", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		s.setSession(w, c.Value)
		s.recent.put(c.Value, recentSession{sess: sess, at: now})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	page.write(w, slotValues{Reader: rd.Name, UserID: sess.UserID, At: now.In(shanghai).Format("2006-01-02 15:04"), View: token})
}

var shanghai = yidu.Shanghai

func size(n int64) string {
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MB"
	}
	return strconv.FormatInt(max(1, (n+512)/1024), 10) + " KB"
}
