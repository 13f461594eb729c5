package page

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/wecom"
)

// A reader's session and sign-in: the web edge's (internal/webedge)
// sessions, WeCom sign-in and client address, with the page's cookies,
// its sign-in bounds (limit.go) and its 请稍候.

const (
	sessionCookie = SessionCookie
	nonceCookie   = "yidu_read_login"
)

// sessionOf returns r's reader's session, its end pushed back (rolling).
func (s *Server) sessionOf(r *http.Request) (session, bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return session{}, false, nil
	}
	return s.sessions.lookup(r.Context(), c.Value)
}

// sessionWithCurrent is sessionOf, reading msgID's current version key
// in the same round trip, shared with the read path's (Options.Marks).
func (s *Server) sessionWithCurrent(r *http.Request, corp, msgID string) (session, bool, prefetched, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return session{}, false, prefetched{}, nil
	}
	ctx := r.Context()
	var answer func() (session, bool, error)
	var curCmd *redis.StringCmd
	if err := s.opts.Marks.Pipelined(ctx, func(p redis.Pipeliner) {
		answer = s.sessions.queueLookup(ctx, p, c.Value)
		curCmd = p.Get(ctx, s.opts.Current.key(corp, msgID))
	}); err != nil {
		return session{}, false, prefetched{}, fmt.Errorf("page: session: %w", err)
	}
	sess, ok, err := answer()
	var pre prefetched
	pre.cur, pre.found, pre.err = parseCurrent(curCmd.Val(), curCmd.Err(), msgID)
	return sess, ok, pre, err
}

// recentTTL is how long a receiver takes a session its page just served
// as still valid for that page's events, without asking Redis: a session
// ended (the member left) stops within it.
const recentTTL = 15 * time.Second

// recentSession is a session a page was served with, and when.
type recentSession struct {
	sess session
	at   time.Time
}

// eventSession is the session of an event: the one its page was served
// with on this receiver within recentTTL, else Redis's.
func (s *Server) eventSession(r *http.Request) (session, bool, error) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if rs, ok := s.recent.get(c.Value); ok && s.opts.Now().Sub(rs.at) < recentTTL {
			return rs.sess, true, nil
		}
	}
	return s.sessionOf(r)
}

// setSession gives the browser the session cookie for SessionTTL, again
// on each page served: the cookie rolls as the session does.
func (s *Server) setSession(w http.ResponseWriter, id string) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/r/", MaxAge: int(s.opts.SessionTTL.Seconds()),
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode})
}

// clientAddr is the member's address: the peer, or through
// receiver.trusted_proxies the address their X-Forwarded-For names.
func (s *Server) clientAddr(r *http.Request) netip.Addr { return s.opts.TrustedProxies.Of(r) }

// clientIP is clientAddr as the page's signals record it.
func (s *Server) clientIP(r *http.Request) string { return webedge.ClientIP(s.opts.TrustedProxies, r) }

// redirectURI is where WeCom sends the reader back for app.
func (s *Server) redirectURI(app string) string {
	return strings.TrimRight(s.opts.PublicURL, "/") + "/r/" + url.PathEscape(app) + "/signin"
}

// startSignIn sends the browser to WeCom's sign-in, bound to it by a
// nonce cookie; it comes back to next, a path of this app's pages. Beyond
// the sign-in bounds (limit.go) it waits on 请稍候 and comes back.
func (s *Server) startSignIn(w http.ResponseWriter, r *http.Request, a App) {
	now := s.opts.Now()
	if !s.lim.clients.allow(s.clientAddr(r), now) {
		s.deferSignIn(w, r, r.URL.RequestURI(), "client")
		return
	}
	if !s.lim.started.AllowN(now, 1) {
		s.deferSignIn(w, r, r.URL.RequestURI(), "all")
		return
	}
	app := webedge.App{CorpID: a.CorpID, AgentID: a.AgentID, RedirectURI: s.redirectURI(a.Name), Endpoints: s.opts.Endpoints}
	if err := webedge.StartWeCom(w, r, s.opts.States, app, r.URL.RequestURI(), s.nonceCookie()); err != nil {
		s.log.ErrorContext(r.Context(), "page: sign-in start", "err", err)
		s.deferSignIn(w, r, r.URL.RequestURI(), "unavailable")
	}
}

// nonceCookie binds a started sign-in to its browser.
func (s *Server) nonceCookie() webedge.NonceCookie {
	return webedge.NonceCookie{Name: nonceCookie, Path: "/r/", Secure: s.secure}
}

// handleSignIn is WeCom's return: the state and its nonce cookie, the
// code exchanged for the member, a session of the corp. An address whose
// exchanges keep failing (or WeCom refusing codes in a flood) waits on
// 请稍候 before anything is spent, so the same return goes through once
// the flood has passed; WeCom's 45009/45033 are backed off and retried,
// then the member starts again from the page.
func (s *Server) handleSignIn(w http.ResponseWriter, r *http.Request) {
	a, ok := s.apps[chi.URLParam(r, "app")]
	if !ok {
		notFound(w)
		return
	}
	ctx := r.Context()
	addr, now := s.clientAddr(r), s.opts.Now()
	if s.lim.failures.empty(addr, now) || s.lim.refused.TokensAt(now) < 1 {
		s.deferSignIn(w, r, r.URL.RequestURI(), "failures")
		return
	}
	ret := webedge.ReturnOf(w, r, s.nonceCookie())
	next, _, userID, err := webedge.FinishWeCom(ctx, s.opts.States, func(ctx context.Context, _, code string) (string, error) {
		userID, err := s.exchange(ctx, a, code)
		var refused *wecom.APIError
		if errors.As(err, &refused) && !wecomBusy(err) {
			s.lim.refused.AllowN(now, 1)
			err = fmt.Errorf("%w: %w", access.ErrBadState, err)
		}
		return userID, err
	}, ret, func(next, corp string) bool {
		return corp == a.CorpID && strings.HasPrefix(next, "/r/"+a.Name+"/")
	})
	var id string
	if err == nil {
		id, err = s.newSession(ctx, a, userID)
	}
	switch {
	case errors.Is(err, access.ErrBadState), errors.Is(err, access.ErrCodeUsed):
		s.lim.failures.allow(addr, now)
		http.Error(w, "登录已失效，请重新打开通知", http.StatusBadRequest)
		return
	case errors.Is(err, access.ErrNotMember):
		s.lim.failures.allow(addr, now)
		http.Error(w, "您不是本企业成员", http.StatusForbidden)
		return
	case wecomBusy(err):
		s.deferSignIn(w, r, next, "wecom_busy")
		return
	case err != nil:
		s.log.ErrorContext(ctx, "page: sign-in", "err", err)
		if next == "" || !strings.HasPrefix(next, "/r/"+a.Name+"/") {
			http.Error(w, "暂时无法登录，请稍后再试", http.StatusServiceUnavailable)
			return
		}
		s.deferSignIn(w, r, next, "unavailable")
		return
	}
	s.setSession(w, id)
	http.Redirect(w, r, next, http.StatusFound)
}

// newSession makes the session of userID, a member WeCom just vouched
// for, and returns its id. Who they are comes from Readers, which may
// answer from a copy of the directory (idmap's roster); when their
// sessions were revoked around the sign-in (they left, on another
// replica), the directory itself decides and the session is made again.
func (s *Server) newSession(ctx context.Context, a App, userID string) (string, error) {
	var id string
	for fresh := false; ; fresh = true {
		rd, found, err := s.readers.Reader(ctx, a.CorpID, userID, fresh)
		if err != nil {
			return "", err
		}
		sess := session{Corp: a.CorpID, UserID: userID, UID: rd.UID, Name: rd.Name, Reader: true}
		switch {
		case !found:
			sess.UID, sess.Status = 0, statusUnknown
		case rd.Left:
			sess.Status = statusLeft
		}
		// In the read path's shared pipeline, as the state and the code
		// were (issue 50); whether the member's sessions were revoked is
		// asked after the session's index entry, so a revocation that
		// missed the session is seen here.
		var created func() error
		var revoked func() (bool, error)
		if err := s.opts.Marks.Pipelined(ctx, func(p redis.Pipeliner) {
			id, created = s.sessions.queueCreate(ctx, p, sess)
			if sess.Status == "" && !fresh {
				revoked = s.sessions.queueRevoked(ctx, p, sess.Corp, sess.UID)
			}
		}); err != nil {
			return "", err
		}
		if err := created(); err != nil {
			return "", err
		}
		if revoked == nil {
			return id, nil
		}
		if gone, err := revoked(); err == nil && !gone {
			return id, nil
		}
		if err := s.sessions.end(ctx, sess, id); err != nil {
			return "", err
		}
	}
}
