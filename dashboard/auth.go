package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"
)

// Authentication: bearer tokens for programs, password sign-in for people.
// Sessions live in memory on the server (a random 256-bit id in the cookie,
// nothing signed): a restart signs everyone out, which is acceptable for a
// single dashboard process and makes sign-out and expiry exact.

const (
	sessionCookie = "yidu_session"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
	maxSessions   = 10_000
	maxLimiters   = 10_000
)

// principal is who is asking and which corps they may see.
type principal struct {
	name string
	// corps nil means every corp ("*"); empty means none.
	corps   []string
	session *session // nil for bearer tokens
}

func (p *principal) allows(corp string) bool {
	return p.corps == nil || slices.Contains(p.corps, corp)
}

func grantedCorps(corps []string) []string {
	if slices.Contains(corps, "*") {
		return nil
	}
	return append([]string{}, corps...)
}

type principalKey struct{}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

type session struct {
	user    string
	corps   []string
	csrf    string
	expires time.Time
}

type tokenEntry struct {
	name  string
	sum   [sha256.Size]byte
	corps []string
}

type userEntry struct {
	hash  []byte
	corps []string
	limit *rate.Limiter
}

type authenticator struct {
	now    func() time.Time
	ttl    time.Duration
	tokens []tokenEntry
	users  map[string]*userEntry
	// dummyHash keeps the time of a sign-in with an unknown name equal to
	// that of a wrong password, so names cannot be probed.
	dummyHash []byte

	mu       sync.Mutex
	sessions map[string]*session
	perIP    map[string]*rate.Limiter
}

func newAuthenticator(tokens []Token, users []User, ttl time.Duration, now func() time.Time) (*authenticator, error) {
	a := &authenticator{
		now: now, ttl: ttl, users: map[string]*userEntry{},
		sessions: map[string]*session{}, perIP: map[string]*rate.Limiter{},
	}
	for i, t := range tokens {
		if len(t.Token) < 16 {
			return nil, fmt.Errorf("dashboard: tokens[%d] (%s) is shorter than 16 characters", i, t.Name)
		}
		a.tokens = append(a.tokens, tokenEntry{name: t.Name, sum: sha256.Sum256([]byte(t.Token)), corps: grantedCorps(t.Corps)})
	}
	for i, u := range users {
		if _, err := bcrypt.Cost([]byte(u.PasswordHash)); err != nil {
			return nil, fmt.Errorf("dashboard: users[%d] (%s): password_hash is not bcrypt: %w", i, u.Name, err)
		}
		a.users[u.Name] = &userEntry{
			hash: []byte(u.PasswordHash), corps: grantedCorps(u.Corps),
			limit: rate.NewLimiter(rate.Every(6*time.Second), 10),
		}
	}
	h, err := bcrypt.GenerateFromPassword([]byte("yidu-dummy-password"), bcrypt.DefaultCost)
	if err != nil {
		return nil, fmt.Errorf("dashboard: dummy hash: %w", err)
	}
	a.dummyHash = h
	return a, nil
}

// bearer checks an Authorization: Bearer token against every configured
// token in constant time (hashes compared, so length leaks nothing).
func (a *authenticator) bearer(tok string) (*principal, bool) {
	sum := sha256.Sum256([]byte(tok))
	var found *tokenEntry
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = &a.tokens[i]
		}
	}
	if found == nil {
		return nil, false
	}
	return &principal{name: "token:" + found.name, corps: found.corps}, true
}

var errRateLimited = errors.New("too many sign-in attempts")

// login checks a password and opens a session. The attempt is counted
// against the client IP and the user name before bcrypt runs.
func (a *authenticator) login(ip, user, password string) (id string, s *session, err error) {
	now := a.now()
	a.mu.Lock()
	lim := a.perIP[ip]
	if lim == nil {
		if len(a.perIP) >= maxLimiters {
			clear(a.perIP) // a flood of addresses resets, never grows memory
		}
		lim = rate.NewLimiter(rate.Every(12*time.Second), 5)
		a.perIP[ip] = lim
	}
	ipOK := lim.AllowN(now, 1)
	a.mu.Unlock()
	u := a.users[user]
	if !ipOK || (u != nil && !u.limit.AllowN(now, 1)) {
		return "", nil, errRateLimited
	}
	hash := a.dummyHash
	if u != nil {
		hash = u.hash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u == nil {
		return "", nil, errors.New("wrong name or password")
	}
	id, csrf := randomToken(), randomToken()
	s = &session{user: user, corps: u.corps, csrf: csrf, expires: now.Add(a.ttl)}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sessions) >= maxSessions {
		a.sweepLocked(now)
		for k := range a.sessions { // still full: drop an arbitrary one
			if len(a.sessions) < maxSessions {
				break
			}
			delete(a.sessions, k)
		}
	}
	a.sessions[id] = s
	return id, s, nil
}

func (a *authenticator) sweepLocked(now time.Time) {
	for k, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, k)
		}
	}
}

func (a *authenticator) lookup(id string) (*session, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sessions[id]
	if !ok {
		return nil, false
	}
	if !a.now().Before(s.expires) {
		delete(a.sessions, id)
		return nil, false
	}
	return s, true
}

func (a *authenticator) logout(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *Server) sessionFrom(r *http.Request) (string, *session, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return "", nil, false
	}
	sess, ok := s.auth.lookup(c.Value)
	return c.Value, sess, ok
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// csrfOK compares the request's CSRF token (header, or form field for the
// page's plain forms) with the session's, in constant time.
func csrfOK(r *http.Request, sess *session) bool {
	got := r.Header.Get(csrfHeader)
	if got == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		got = r.PostFormValue(csrfField)
	}
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(sess.csrf)) == 1
}

// requireAPI admits a bearer token or a session; a session's POSTs need the
// CSRF token (Origin is checked for every request by CrossOriginProtection).
func (s *Server) requireAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p *principal
		if h := r.Header.Get("Authorization"); h != "" {
			// The scheme is case-insensitive (RFC 9110 §11.1).
			scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
			ok = ok && strings.EqualFold(scheme, "Bearer")
			if ok {
				p, ok = s.auth.bearer(strings.TrimSpace(tok))
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
				writeError(w, http.StatusUnauthorized, "invalid bearer token")
				return
			}
		} else if _, sess, ok := s.sessionFrom(r); ok {
			if !safeMethod(r.Method) && !csrfOK(r, sess) {
				writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
				return
			}
			p = &principal{name: sess.user, corps: sess.corps, session: sess}
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// requirePage admits a session; others are sent to the sign-in page.
func (s *Server) requirePage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, sess, ok := s.sessionFrom(r)
		if !ok {
			if safeMethod(r.Method) {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		if !safeMethod(r.Method) && !csrfOK(r, sess) {
			writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
			return
		}
		p := &principal{name: sess.user, corps: sess.corps, session: sess}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// clientIP is the TCP peer: proxy headers are not trusted (STYLE.md).
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, http.StatusBadRequest, "Bad request")
		return
	}
	user, pass := r.PostForm.Get("username"), r.PostForm.Get("password")
	if len(user) > 128 || len(pass) > 72 { // bcrypt reads at most 72 bytes
		s.renderLogin(w, http.StatusUnauthorized, "Wrong name or password / 用户名或密码错误")
		return
	}
	id, sess, err := s.auth.login(clientIP(r), user, pass)
	switch {
	case errors.Is(err, errRateLimited):
		s.met.logins.WithLabelValues("rate_limited").Inc()
		w.Header().Set("Retry-After", "60")
		s.renderLogin(w, http.StatusTooManyRequests, "Too many attempts, try again in a minute / 尝试次数过多，请稍后再试")
		return
	case err != nil:
		s.met.logins.WithLabelValues("bad_password").Inc()
		s.log.InfoContext(r.Context(), "sign-in refused", "ip", clientIP(r))
		s.renderLogin(w, http.StatusUnauthorized, "Wrong name or password / 用户名或密码错误")
		return
	}
	s.met.logins.WithLabelValues("ok").Inc()
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", Expires: sess.expires,
		MaxAge: int(s.auth.ttl.Seconds()), HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if id, _, ok := s.sessionFrom(r); ok {
		s.auth.logout(id)
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
