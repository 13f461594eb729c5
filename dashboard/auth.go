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
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"golang.org/x/crypto/bcrypt"
)

// Authentication: bearer tokens for programs, password sign-in for people.
// A session is a random 256-bit id in the cookie (nothing signed) that
// names a record in the SessionStore: the user and the session's CSRF
// token. With the Redis store every replica sees every session, a restart
// keeps them, and signing out deletes the record, which ends the session
// everywhere at once. The user's corps are looked up at each request, so
// a user removed from the configuration is signed out by the next deploy.

const (
	sessionCookie = "yidu_session"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
	maxSessions   = 10_000
	maxLimiters   = 10_000
)

// SessionStore keeps sign-in sessions by id. Declared here, where it is
// used: NewRedisSessions shares them between dashboard replicas and keeps
// them across restarts; without one (Options.Sessions nil) they live in
// this process's memory.
type SessionStore interface {
	// Put stores s under id until ttl passes.
	Put(ctx context.Context, id string, s Session, ttl time.Duration) error
	// Get returns the session stored under id; ok is false when there is
	// none (never stored, expired or deleted).
	Get(ctx context.Context, id string) (s Session, ok bool, err error)
	// Delete removes the session: sign-out, everywhere.
	Delete(ctx context.Context, id string) error
}

// Session is a signed-in person's session as stored.
type Session struct {
	User string `json:"user"`
	// CSRF is the token the page sends back with every POST.
	CSRF    string    `json:"csrf"`
	Expires time.Time `json:"expires"`
	// Cred names the password user's credential the session was opened
	// with (a hash of its bcrypt hash): a user removed and added again
	// with another password within session_ttl does not get the old
	// sessions back (issue 38). Empty for a WeCom member.
	Cred string `json:"cred,omitempty"`
}

// credOf names a password hash without being one.
func credOf(hash []byte) string {
	sum := sha256.Sum256(hash)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// memSessions is the SessionStore of a single dashboard process.
type memSessions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]Session
}

func newMemSessions(now func() time.Time) *memSessions {
	return &memSessions{now: now, m: map[string]Session{}}
}

func (m *memSessions) Put(_ context.Context, id string, s Session, _ time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.m) >= maxSessions {
		now := m.now()
		for k, v := range m.m {
			if !now.Before(v.Expires) {
				delete(m.m, k)
			}
		}
		for k := range m.m { // still full: drop an arbitrary one
			if len(m.m) < maxSessions {
				break
			}
			delete(m.m, k)
		}
	}
	m.m[id] = s
	return nil
}

func (m *memSessions) Get(_ context.Context, id string) (Session, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.m[id]
	return s, ok, nil
}

func (m *memSessions) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, id)
	return nil
}

// principal is who is asking and which corps they may see.
type principal struct {
	name string
	// corps are the corps the principal is an admin of (acc.AdminCorps):
	// nil means every corp ("*"); empty means none. Until every endpoint
	// answers through an access.View (issue 31), a sender or viewer grant
	// admits nothing here: a scoped principal is refused, never shown
	// more than its scope.
	corps   []string
	session *session // nil for bearer tokens
	// acc is the principal as package access knows it: its name, kind
	// and grants (for the audit's actor and the role checks).
	acc *access.Principal
}

// key names the principal in the per-principal limits: a token by its
// name, a person by theirs (all their sessions together, so signing in
// again gains nothing).
func (p *principal) key() string {
	if p.session != nil {
		return "user:" + p.name
	}
	return p.name
}

func (p *principal) allows(corp string) bool {
	return p.corps == nil || slices.Contains(p.corps, corp)
}

// grants resolves one configured user's or token's grants with access
// (which decides what they mean) and the corps it is an admin of.
func grants(name string, kind access.Kind, corps []string, role yidu.Role, corp string, apps []string, depts []int64, au yidu.SenderAudience) (*access.Principal, []string, error) {
	gs, all, err := access.ConfigGrants(corps, role, corp, apps, depts)
	if err != nil {
		return nil, nil, err
	}
	if au.Limited() {
		// A sender kept to an audience (issue 41): the scope says so.
		for i := range gs {
			gs[i].Scope.Audience = au
			if err := gs[i].Scope.Validate(gs[i].Role); err != nil {
				return nil, nil, err
			}
		}
		if len(gs) == 0 {
			return nil, nil, fmt.Errorf("audience applies to a sender only: %w", yidu.ErrInvalid)
		}
	}
	p := access.NewPrincipal(name, kind, all, gs)
	admin, _ := p.AdminCorps()
	return p, admin, nil
}

type principalKey struct{}

func principalFrom(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// session is a stored Session resolved against the current users.
type session struct {
	user    string
	corps   []string
	acc     *access.Principal
	csrf    string
	expires time.Time
}

type tokenEntry struct {
	name  string
	sum   [sha256.Size]byte
	corps []string
	acc   *access.Principal
}

type userEntry struct {
	hash  []byte
	corps []string
	acc   *access.Principal
}

// Sign-in limits (docs/reliability.md, Hostile use). Unknown and known
// names go through exactly the same steps, so an answer never tells
// whether a name exists:
//
//   - per client address, every attempt: 10 at once, then one per 6 s
//     (an office behind one NAT address signs in together);
//   - per (name, address), failures: 5, then one per 12 s;
//   - per name from every address, failures: 10, then one per 6 s. A name
//     past it is "under attack": an address with a recent failure for it
//     is refused, but an address with none still gets its try, so a
//     stranger's flood never locks the real person out.
//
// A refusal is 429 before bcrypt runs; an attempt that runs bcrypt
// compares an unknown name against a dummy hash of the users' cost, so
// it takes as long as a wrong password.
var (
	perAddress = bucketRule{burst: 10, every: 6 * time.Second}
	perPair    = bucketRule{burst: 5, every: 12 * time.Second}
	perName    = bucketRule{burst: 10, every: 6 * time.Second}
)

// bucketRule is a token bucket's size and refill.
type bucketRule struct {
	burst float64
	every time.Duration
}

// bucket is a token bucket that can give a token back (a success).
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) level(r bucketRule, now time.Time) float64 {
	if now.After(b.at) {
		b.tokens = min(r.burst, b.tokens+float64(now.Sub(b.at))/float64(r.every))
		b.at = now
	}
	return b.tokens
}

// take takes a token if there is one.
func (b *bucket) take(r bucketRule, now time.Time) bool {
	if b.level(r, now) < 1 {
		return false
	}
	b.tokens--
	return true
}

func (b *bucket) give(r bucketRule) { b.tokens = min(r.burst, b.tokens+1) }

// buckets are the buckets of one rule by key, at most maxLimiters: when
// full, the buckets back at their burst (equal to new ones) are dropped;
// if none is, an arbitrary one (failOpen, a flood of addresses: the
// attacker has those anyway) or the new key starts empty (a flood of
// names: an unseen name is then "under attack", which delays nobody with
// the right password).
type buckets struct {
	rule     bucketRule
	failOpen bool
	m        map[string]*bucket
}

func newBuckets(r bucketRule, failOpen bool) *buckets {
	return &buckets{rule: r, failOpen: failOpen, m: map[string]*bucket{}}
}

func (bs *buckets) get(key string, now time.Time) *bucket {
	if b := bs.m[key]; b != nil {
		return b
	}
	tokens := bs.rule.burst
	if len(bs.m) >= maxLimiters {
		for k, b := range bs.m {
			if b.level(bs.rule, now) >= bs.rule.burst {
				delete(bs.m, k)
			}
		}
		if len(bs.m) >= maxLimiters {
			if !bs.failOpen {
				tokens = 0
			}
			for k := range bs.m {
				delete(bs.m, k)
				break
			}
		}
	}
	b := &bucket{tokens: tokens, at: now}
	bs.m[key] = b
	return b
}

type authenticator struct {
	now    func() time.Time
	ttl    time.Duration
	tokens []tokenEntry
	users  map[string]*userEntry
	// dummyHash keeps the time of a sign-in with an unknown name equal to
	// that of a wrong password, so names cannot be probed.
	dummyHash []byte

	sessions SessionStore
	// wecom resolves WeCom members' sessions at each request (nil: none).
	wecom *access.Access

	mu                     sync.Mutex
	byAddr, byPair, byName *buckets
}

func newAuthenticator(tokens []Token, users []User, ttl time.Duration, now func() time.Time, store SessionStore) (*authenticator, error) {
	if store == nil {
		store = newMemSessions(now)
	}
	a := &authenticator{
		now: now, ttl: ttl, users: map[string]*userEntry{}, sessions: store,
		byAddr: newBuckets(perAddress, true), byPair: newBuckets(perPair, true), byName: newBuckets(perName, false),
	}
	names := map[string]bool{}
	for i, t := range tokens {
		// The name is the token's actor in the audit and its key in the
		// per-principal limits: it must name one token.
		if t.Name == "" || names[t.Name] {
			return nil, fmt.Errorf("dashboard: tokens[%d]: a token needs a name of its own (%q is empty or used twice): %w", i, t.Name, yidu.ErrInvalid)
		}
		names[t.Name] = true
		if len(t.Token) < MinTokenLength { // Options.Validate's rule, for a caller that skipped it
			return nil, fmt.Errorf("dashboard: tokens[%d] (%s): token must be at least %d characters", i, t.Name, MinTokenLength)
		}
		acc, corps, err := grants(t.Name, access.KindToken, t.Corps, t.Role, t.Corp, t.Apps, t.Departments, t.Audience)
		if err != nil {
			return nil, fmt.Errorf("dashboard: tokens[%d] (%s): %w", i, t.Name, err)
		}
		a.tokens = append(a.tokens, tokenEntry{name: t.Name, sum: sha256.Sum256([]byte(t.Token)), corps: corps, acc: acc})
	}
	cost := bcrypt.DefaultCost
	for i, u := range users {
		if strings.HasPrefix(u.Name, wecomUserPrefix) {
			return nil, fmt.Errorf("dashboard: users[%d] (%s): a name may not start with %q (WeCom members' sessions): %w", i, u.Name, wecomUserPrefix, yidu.ErrInvalid)
		}
		c, err := bcrypt.Cost([]byte(u.PasswordHash))
		if err != nil {
			return nil, fmt.Errorf("dashboard: users[%d] (%s): password_hash is not bcrypt: %w", i, u.Name, err)
		}
		if i == 0 || c > cost {
			cost = c
		}
		acc, corps, err := grants(u.Name, access.KindUser, u.Corps, u.Role, u.Corp, u.Apps, u.Departments, u.Audience)
		if err != nil {
			return nil, fmt.Errorf("dashboard: users[%d] (%s): %w", i, u.Name, err)
		}
		a.users[u.Name] = &userEntry{hash: []byte(u.PasswordHash), corps: corps, acc: acc}
	}
	// The users' cost, so an unknown name costs what a known one does.
	h, err := bcrypt.GenerateFromPassword([]byte("yidu-dummy-password"), cost)
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
	return &principal{name: "token:" + found.name, corps: found.corps, acc: found.acc}, true
}

var (
	errRateLimited = errors.New("too many sign-in attempts")
	errBadPassword = errors.New("wrong name or password")
)

// login checks a password and opens a session. The attempt is admitted
// (see perAddress, perPair, perName) before bcrypt runs, and holds a token
// of its (name, address) and its name while it does: concurrent guesses
// cannot all slip through. A success gives them back.
func (a *authenticator) login(ctx context.Context, ip, user, password string) (id string, s *session, err error) {
	now := a.now()
	pairKey := user + "\x00" + ip
	a.mu.Lock()
	admitted, tookName := a.byAddr.get(ip, now).take(perAddress, now), false
	if admitted {
		pair, name := a.byPair.get(pairKey, now), a.byName.get(user, now)
		fresh := pair.level(perPair, now) >= perPair.burst // no recent failure from here
		admitted = pair.take(perPair, now)
		tookName = admitted && name.take(perName, now)
		if admitted && !tookName && !fresh {
			pair.give(perPair) // the name is under attack, and this address took part
			admitted = false
		}
	}
	a.mu.Unlock()
	if !admitted {
		return "", nil, errRateLimited
	}
	u := a.users[user]
	hash := a.dummyHash
	if u != nil {
		hash = u.hash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u == nil {
		return "", nil, errBadPassword
	}
	a.mu.Lock()
	a.byPair.get(pairKey, now).give(perPair)
	if tookName {
		a.byName.get(user, now).give(perName)
	}
	a.mu.Unlock()
	id, csrf := randomToken(), randomToken()
	st := Session{User: user, CSRF: csrf, Expires: now.Add(a.ttl), Cred: credOf(u.hash)}
	if err := a.sessions.Put(ctx, id, st, a.ttl); err != nil {
		return "", nil, fmt.Errorf("dashboard: store session: %w", err)
	}
	return id, &session{user: user, corps: u.corps, acc: u.acc, csrf: csrf, expires: st.Expires}, nil
}

// lookup returns the live session id names, resolved against the current
// users: a session of a user no longer configured is over.
func (a *authenticator) lookup(ctx context.Context, id string) (*session, bool, error) {
	st, ok, err := a.sessions.Get(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("dashboard: load session: %w", err)
	}
	if !ok {
		return nil, false, nil
	}
	if rest, ok := strings.CutPrefix(st.User, wecomUserPrefix); ok && a.wecom != nil {
		// A WeCom member is resolved against the directory at each
		// request: one who left (at the last sync) or lost every role
		// is signed out.
		corp, userID, _ := strings.Cut(rest, ":")
		p, err := a.wecom.WeCom(ctx, corp, userID)
		if errors.Is(err, access.ErrNotMember) || errors.Is(err, access.ErrNoRole) || (err == nil && !a.now().Before(st.Expires)) {
			return nil, false, a.logout(ctx, id)
		}
		if err != nil {
			return nil, false, fmt.Errorf("dashboard: resolve wecom member: %w", err)
		}
		corps, _ := p.AdminCorps()
		return &session{user: st.User, corps: corps, acc: p, csrf: st.CSRF, expires: st.Expires}, true, nil
	}
	u := a.users[st.User]
	if u == nil || !a.now().Before(st.Expires) || subtle.ConstantTimeCompare([]byte(st.Cred), []byte(credOf(u.hash))) != 1 {
		return nil, false, a.logout(ctx, id)
	}
	return &session{user: st.User, corps: u.corps, acc: u.acc, csrf: st.CSRF, expires: st.Expires}, true, nil
}

// open opens a session for user (a sign-in already proven).
func (a *authenticator) open(ctx context.Context, user string) (string, *session, error) {
	id, csrf := randomToken(), randomToken()
	st := Session{User: user, CSRF: csrf, Expires: a.now().Add(a.ttl)}
	if err := a.sessions.Put(ctx, id, st, a.ttl); err != nil {
		return "", nil, fmt.Errorf("dashboard: store session: %w", err)
	}
	return id, &session{user: user, csrf: csrf, expires: st.Expires}, nil
}

func (a *authenticator) logout(ctx context.Context, id string) error {
	if err := a.sessions.Delete(ctx, id); err != nil {
		return fmt.Errorf("dashboard: delete session: %w", err)
	}
	return nil
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// sessionFrom returns the request's live session. An error (the session
// store is unreachable) is logged and counts as no session, except that
// the guards answer 503 rather than sign the person out.
func (s *Server) sessionFrom(r *http.Request) (string, *session, bool, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 64 {
		return "", nil, false, nil
	}
	sess, ok, err := s.auth.lookup(r.Context(), c.Value)
	if err != nil {
		s.log.ErrorContext(r.Context(), "session store", "err", err)
	}
	return c.Value, sess, ok, err
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
		} else if _, sess, ok, err := s.sessionFrom(r); err != nil {
			writeError(w, http.StatusServiceUnavailable, "sessions are unavailable, try again shortly")
			return
		} else if ok {
			if !safeMethod(r.Method) && !csrfOK(r, sess) {
				writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
				return
			}
			// A link on another site must not act or read in the
			// session's name (issue 38: an export with the attacker's
			// filters, audited as the victim's): the browser says where
			// the request came from.
			if !fromThisSite(r, strings.HasSuffix(r.URL.Path, "/export.csv")) {
				writeError(w, http.StatusForbidden, "cross-site request refused")
				return
			}
			p = &principal{name: sess.user, corps: sess.corps, session: sess, acc: sess.acc}
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer realm="yidu"`)
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// fromThisSite reports whether a session's request came from this site:
// Sec-Fetch-Site same-origin, or none (typed, a bookmark). A browser that
// sends no Sec-Fetch-Site is believed unless strict, which asks it for a
// Referer of this host instead (the page's own export links send one:
// Referrer-Policy same-origin).
func fromThisSite(r *http.Request, strict bool) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
		if !strict {
			return true
		}
		ref, err := url.Parse(r.Referer())
		return err == nil && ref.Host != "" && strings.EqualFold(ref.Host, r.Host)
	}
	return false
}

// requirePage admits a session; others are sent to the sign-in page.
func (s *Server) requirePage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, sess, ok, err := s.sessionFrom(r)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "sessions are unavailable, try again shortly")
			return
		}
		if !ok {
			if safeMethod(r.Method) {
				// Back to this page once signed in; inside WeCom's
				// browser straight through WeCom (a leader opening a
				// digest card's link signs in without a click).
				next := url.QueryEscape(access.SafeNext(r.URL.RequestURI()))
				if s.wecomLogin != nil && s.publicURL != "" && access.InWeCom(r.UserAgent()) {
					http.Redirect(w, r, "/login/wecom?next="+next, http.StatusSeeOther)
					return
				}
				http.Redirect(w, r, "/login?next="+next, http.StatusSeeOther)
				return
			}
			writeError(w, http.StatusUnauthorized, "authentication required")
			return
		}
		if !safeMethod(r.Method) && !csrfOK(r, sess) {
			writeError(w, http.StatusForbidden, "missing or wrong CSRF token")
			return
		}
		p := &principal{name: sess.user, corps: sess.corps, session: sess, acc: sess.acc}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

// clientIP is the TCP peer; proxy headers are not trusted (STYLE.md)
// unless the peer is one of the configured trusted proxies (an ingress
// controller), whose X-Forwarded-For is then read from the right: the
// first address that is not itself a trusted proxy is the client.
func (s *Server) clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !s.trusted(host) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h := strings.TrimSpace(hops[i])
		if _, err := netip.ParseAddr(h); err != nil {
			break // garbage: stop at the last hop we can vouch for
		}
		host = h
		if !s.trusted(h) {
			break
		}
	}
	return host
}

// trusted reports whether addr is a trusted proxy.
func (s *Server) trusted(addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// secure reports whether the browser reached us over HTTPS: the public
// URL is https, or directly, or through a trusted proxy that says so
// (X-Forwarded-Proto), so the cookie gets the Secure flag behind a
// TLS-terminating ingress.
func (s *Server) secure(r *http.Request) bool {
	if s.httpsOnly || r.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	return err == nil && s.trusted(host) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "error.bad_request")
		return
	}
	user, pass := r.PostForm.Get("username"), r.PostForm.Get("password")
	if len(user) > 128 || len(pass) > 72 { // bcrypt reads at most 72 bytes
		s.renderLogin(w, r, http.StatusUnauthorized, "login.wrong")
		return
	}
	ip := s.clientIP(r)
	id, sess, err := s.auth.login(r.Context(), ip, user, pass)
	switch {
	case errors.Is(err, errRateLimited):
		s.met.logins.WithLabelValues("rate_limited").Inc()
		w.Header().Set("Retry-After", "60")
		s.renderLogin(w, r, http.StatusTooManyRequests, "login.too_many")
		return
	case errors.Is(err, errBadPassword):
		s.met.logins.WithLabelValues("bad_password").Inc()
		s.log.InfoContext(r.Context(), "sign-in refused", "ip", ip)
		// The name typed is anyone's input: a configured user's name is
		// recorded (someone tried their password), anything else only as
		// "unknown" (issue 38: no row names whatever a stranger typed).
		actor := "unknown"
		if s.auth.users[user] != nil {
			actor = user
		}
		_ = s.record(r, audit.Event{Actor: actor, ActorKind: "password", Action: yidu.ActionSignInFailed, Outcome: "refused"})
		s.renderLogin(w, r, http.StatusUnauthorized, "login.wrong")
		return
	case err != nil:
		s.log.ErrorContext(r.Context(), "sign-in", "err", err)
		s.renderLogin(w, r, http.StatusServiceUnavailable, "login.unavailable")
		return
	}
	s.met.logins.WithLabelValues("ok").Inc()
	_ = s.record(r, audit.Event{Actor: user, ActorKind: "password", Action: yidu.ActionSignIn})
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: id, Path: "/", Expires: sess.expires,
		MaxAge: int(s.auth.ttl.Seconds()), HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, access.SafeNext(r.PostForm.Get("next")), http.StatusSeeOther)
}

func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" && len(c.Value) <= 64 {
		// The actor is the session's owner, looked up before it ends; a
		// cookie of no live session signs nobody out and records nothing.
		ev, live := s.signOutEvent(r, c.Value)
		err := s.auth.logout(r.Context(), c.Value)
		if live {
			s.recordDone(r, ev, err)
		}
		if err != nil {
			// The cookie must not outlive a session we failed to end.
			s.log.ErrorContext(r.Context(), "sign-out", "err", err)
			writeError(w, http.StatusServiceUnavailable, "sign-out failed, try again shortly")
			return
		}
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
