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
	sess, rd, found, pre, ok := s.signedIn(w, r, a, msgID, startSignIn, withCurrent)
	if !ok {
		return session{}, Reader{}, pre, false
	}
	recipient, err := false, error(nil)
	if found && !rd.Left {
		recipient, err = s.isRecipient(r.Context(), a.CorpID, msgID, rd.UID)
	}
	if !s.admit(w, r, a, msgID, sess, rd, found, recipient, err, startSignIn) {
		return session{}, Reader{}, pre, false
	}
	return sess, rd, pre, true
}

// signedIn is the reader signed in for a's notice msgID (found false:
// not in the directory), or answers for the request itself (sign-in,
// 404, 503) and returns ok false; withCurrent also reads the notice's
// current version key in the session's round trip.
func (s *Server) signedIn(w http.ResponseWriter, r *http.Request, a App, msgID string, startSignIn, withCurrent bool) (sess session, rd Reader, found bool, pre prefetched, ok bool) {
	var err error
	if withCurrent {
		sess, ok, pre, err = s.sessionWithCurrent(r, a.CorpID, msgID)
	} else {
		sess, ok, err = s.sessionOf(r)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "page: session", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return session{}, Reader{}, false, pre, false
	}
	if !ok || sess.Corp != a.CorpID {
		if startSignIn {
			s.startSignIn(w, r, a)
		} else {
			notFound(w)
		}
		return session{}, Reader{}, false, pre, false
	}
	rd = Reader{UID: sess.UID, Name: sess.Name, Left: sess.Status == statusLeft}
	found = sess.Status != statusUnknown
	if !sess.Reader {
		// A session from before sessions carried the reader.
		if rd, found, err = s.readers.Reader(r.Context(), a.CorpID, sess.UserID, true); err != nil {
			s.log.ErrorContext(r.Context(), "page: reader", "err", err)
			http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
			return session{}, Reader{}, false, pre, false
		}
	}
	return sess, rd, found, pre, true
}

// isRecipient asks Readers whether uid is a recipient of msgID, in a
// round trip of its own.
func (s *Server) isRecipient(ctx context.Context, corp, msgID string, uid uint32) (bool, error) {
	p := s.opts.Redis.Pipeline()
	answer := s.readers.QueueRecipient(ctx, p, corp, msgID, uid)
	_, _ = p.Exec(ctx) // each command's error is answer's
	return answer()
}

// admit lets the signed-in reader rd (found false: not in the
// directory) on, given whether they are a recipient of a's notice msgID
// (err: that could not be told), or answers for the request itself: 503,
// 404 with the denial audited, or the notice's page under its own app
// (issue 46) when startSignIn.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, a App, msgID string, sess session, rd Reader, found, recipient bool, err error, startSignIn bool) bool {
	ctx := r.Context()
	var app string
	if err == nil && recipient {
		app, err = s.noticeApp(ctx, a.CorpID, msgID)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "page: reader", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return false
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
		return false
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
		return false
	}
	return true
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
	// Two rounds of Redis commands, both in the read path's shared
	// pipeline (issue 50): the session with the current version, then the
	// recipient check with the view handed out.
	sess, rd, found, pre, ok := s.signedIn(w, r, a, msgID, true, true)
	if !ok {
		return
	}
	if !found || rd.Left {
		s.admit(w, r, a, msgID, sess, rd, found, false, nil, true)
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
	if err != nil {
		// Who is not a recipient hears so first (and it is audited),
		// whatever the version.
		is, rerr := s.isRecipient(ctx, a.CorpID, msgID, rd.UID)
		if !s.admit(w, r, a, msgID, sess, rd, found, is, rerr, true) {
			return
		}
		if errors.Is(err, notice.ErrNotFound) {
			notFound(w)
			return
		}
		s.log.ErrorContext(ctx, "page: version", "err", err)
		http.Error(w, "暂时无法打开，请稍后再试", http.StatusServiceUnavailable)
		return
	}
	now := s.opts.Now()
	token, ended, acked, recipient, err := s.beginView(ctx, a, view{App: a.Name, Corp: a.CorpID, MsgID: msgID, UserID: sess.UserID, UID: rd.UID,
		Version: v.N, ShownMs: now.UnixMilli(), MinRead: v.Settings.MinReadSeconds, Material: cur.Material})
	if !s.admit(w, r, a, msgID, sess, rd, found, recipient, err, true) {
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
