package access

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/internal/opt"
	"golang.org/x/crypto/bcrypt"
)

// Identity: bearer tokens for programs, password sign-in for people,
// sessions for both kinds of people (password and WeCom). A session is a
// random 256-bit id (the dashboard's cookie; nothing signed) that names a
// record in the SessionStore: the user and the session's CSRF token. With
// the Redis store every replica sees every session, a restart keeps
// them, and signing out deletes the record, which ends the session
// everywhere at once. The user's grants are looked up at each request, so
// a user removed from the configuration is signed out by the next deploy.

// MinTokenLength is the shortest API bearer token: a token is a shared
// secret compared in constant time, so its length is its strength.
const MinTokenLength = 16

// WeComUserPrefix starts a WeCom member's session user
// ("wecom:<corp>:<UserID>"); no password user's name may start with it.
const WeComUserPrefix = "wecom:"

// Token is an API bearer token (dashboard.tokens[]) and the corps it may
// see ("*" for all).
type Token struct {
	Name  string
	Token string
	Corps []string
	// Grant is one role instead of Corps (ConfigGrants); its
	// Scope.Audience keeps a sender to part of the directory (issue 41).
	Grant
}

// User is a person who may sign in with a password (dashboard.users[]).
type User struct {
	Name string
	// PasswordHash is a bcrypt hash (yidu hash-password prints one).
	PasswordHash string
	Corps        []string
	// Grant is one role instead of Corps (ConfigGrants); its
	// Scope.Audience keeps a sender to part of the directory (issue 41).
	Grant
}

// SignIn is a live session resolved against the current users and the
// directory: who, and the session's CSRF token.
type SignIn struct {
	// Principal is nil only for the session Identities.OpenWeCom just
	// opened (resolved at its first request).
	Principal *Principal
	CSRF      string
	Expires   time.Time
}

// Sign-in outcomes.
var (
	// ErrRateLimited is a sign-in refused before bcrypt ran (the limits
	// of Identities.SignIn).
	ErrRateLimited = errors.New("too many sign-in attempts")
	// ErrBadPassword is a wrong name or password (never which).
	ErrBadPassword = errors.New("wrong name or password")
)

// IdentityOptions configures Identities.
type IdentityOptions struct {
	Tokens []Token
	Users  []User
	// SessionTTL is how long a sign-in lasts (zero: 12 h).
	SessionTTL time.Duration
	// Sessions keeps sessions (webedge.DashboardSessions, shared by
	// replicas);
	// nil keeps them in this process's memory.
	Sessions SessionStore
	// WeCom resolves WeCom members' sessions at each request (nil: none
	// is valid).
	WeCom *Access
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

type tokenEntry struct {
	sum [sha256.Size]byte
	p   *Principal
}

type userEntry struct {
	hash []byte
	p    *Principal
}

// Identities answers who is asking: a bearer token, a password user's
// session or a WeCom member's session.
type Identities struct {
	now    func() time.Time
	ttl    time.Duration
	tokens []tokenEntry
	users  map[string]*userEntry
	// dummyHash keeps the time of a sign-in with an unknown name equal to
	// that of a wrong password, so names cannot be probed.
	dummyHash []byte

	sessions SessionStore
	wecom    *Access

	mu                     sync.Mutex
	byAddr, byPair, byName *buckets
}

// Validate checks what can be checked of o without building anything:
// each token has a name of its own and is long enough; no user's name
// is a WeCom member's. cmd runs it on the configuration at start;
// NewIdentities runs it too.
func (o IdentityOptions) Validate() error {
	names := map[string]bool{}
	for i, t := range o.Tokens {
		// The name is the token's actor in the audit and its key in the
		// per-principal limits: it must name one token.
		if t.Name == "" || names[t.Name] {
			return fmt.Errorf("dashboard: tokens[%d]: a token needs a name of its own (%q is empty or used twice): %w", i, t.Name, yidu.ErrInvalid)
		}
		names[t.Name] = true
		if len(t.Token) < MinTokenLength {
			return fmt.Errorf("dashboard: tokens[%d] (%s): token must be at least %d characters", i, t.Name, MinTokenLength)
		}
	}
	for i, u := range o.Users {
		if strings.HasPrefix(u.Name, WeComUserPrefix) {
			return fmt.Errorf("dashboard: users[%d] (%s): a name may not start with %q (WeCom members' sessions): %w", i, u.Name, WeComUserPrefix, yidu.ErrInvalid)
		}
	}
	return nil
}

// NewIdentities checks the configured tokens and users and resolves
// their grants.
func NewIdentities(o IdentityOptions) (*Identities, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	opt.Clock(&o.Now)
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.Sessions == nil {
		o.Sessions = newMemSessions(o.Now)
	}
	a := &Identities{
		now: o.Now, ttl: o.SessionTTL, users: map[string]*userEntry{}, sessions: o.Sessions, wecom: o.WeCom,
		byAddr: newBuckets(perAddress, true), byPair: newBuckets(perPair, true), byName: newBuckets(perName, false),
	}
	for i, t := range o.Tokens {
		p, err := configured(t.Name, KindToken, t.Corps, t.Grant)
		if err != nil {
			return nil, fmt.Errorf("dashboard: tokens[%d] (%s): %w", i, t.Name, err)
		}
		a.tokens = append(a.tokens, tokenEntry{sum: sha256.Sum256([]byte(t.Token)), p: p})
	}
	cost := bcrypt.DefaultCost
	for i, u := range o.Users {
		c, err := bcrypt.Cost([]byte(u.PasswordHash))
		if err != nil {
			return nil, fmt.Errorf("dashboard: users[%d] (%s): password_hash is not bcrypt: %w", i, u.Name, err)
		}
		if i == 0 || c > cost {
			cost = c
		}
		p, err := configured(u.Name, KindUser, u.Corps, u.Grant)
		if err != nil {
			return nil, fmt.Errorf("dashboard: users[%d] (%s): %w", i, u.Name, err)
		}
		a.users[u.Name] = &userEntry{hash: []byte(u.PasswordHash), p: p}
	}
	// The users' cost, so an unknown name costs what a known one does.
	h, err := bcrypt.GenerateFromPassword([]byte("yidu-dummy-password"), cost)
	if err != nil {
		return nil, fmt.Errorf("access: dummy hash: %w", err)
	}
	a.dummyHash = h
	return a, nil
}

// configured resolves one configured user's or token's grants.
func configured(name string, kind Kind, corps []string, g Grant) (*Principal, error) {
	gs, all, err := ConfigGrants(corps, g.Role, g.Scope.Corp, g.Scope.Apps, g.Scope.Departments)
	if err != nil {
		return nil, err
	}
	if au := g.Scope.Audience; au.Limited() {
		// A sender kept to an audience (issue 41): the scope says so.
		if len(gs) == 0 {
			return nil, fmt.Errorf("audience applies to a sender only: %w", yidu.ErrInvalid)
		}
		for i := range gs {
			gs[i].Scope.Audience = au
			if err := gs[i].Scope.Validate(gs[i].Role); err != nil {
				return nil, err
			}
		}
	}
	return NewPrincipal(name, kind, all, gs), nil
}

// TTL is how long a session lasts.
func (a *Identities) TTL() time.Duration { return a.ttl }

// Known reports whether user is a configured password user: the audit
// names a configured user whose password was tried, and nobody else.
func (a *Identities) Known(user string) bool { return a.users[user] != nil }

// Configured returns the principal of the password user, else the
// token, named name as the configuration has it now (campaign checks a
// scheduled notice's author at its time); false for neither (a WeCom
// member's name, or one removed from the configuration).
func (a *Identities) Configured(name string) (*Principal, bool) {
	if u, ok := a.users[name]; ok {
		return u.p, true
	}
	for _, t := range a.tokens {
		if t.p.Name == name {
			return t.p, true
		}
	}
	return nil, false
}

// Bearer checks a bearer token against every configured token in
// constant time (hashes compared, so length leaks nothing).
func (a *Identities) Bearer(tok string) (*Principal, bool) {
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
	return found.p, true
}

// signIn checks a password and opens a session. The attempt is admitted
// (see perAddress, perPair, perName) before bcrypt runs, and holds a
// token of its (name, address) and its name while it does: concurrent
// guesses cannot all slip through. A success gives them back.
func (a *Identities) signIn(ctx context.Context, ip, user, password string) (id string, s *SignIn, err error) {
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
		return "", nil, ErrRateLimited
	}
	u := a.users[user]
	hash := a.dummyHash
	if u != nil {
		hash = u.hash
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || u == nil {
		return "", nil, ErrBadPassword
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
		return "", nil, fmt.Errorf("access: store session: %w", err)
	}
	return id, &SignIn{Principal: u.p, CSRF: csrf, Expires: st.Expires}, nil
}

// Lookup returns the live session id names, resolved against the current
// users and, for a WeCom member, the directory of now: a session of a
// user no longer configured, or of a member who left or lost every role,
// is over (and deleted).
func (a *Identities) Lookup(ctx context.Context, id string) (*SignIn, bool, error) {
	st, ok, err := a.sessions.Get(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("access: load session: %w", err)
	}
	if !ok {
		return nil, false, nil
	}
	if rest, ok := strings.CutPrefix(st.User, WeComUserPrefix); ok && a.wecom != nil {
		corp, userID, _ := strings.Cut(rest, ":")
		p, err := a.wecom.WeCom(ctx, corp, userID)
		if errors.Is(err, ErrNotMember) || errors.Is(err, ErrNoRole) || (err == nil && !a.now().Before(st.Expires)) {
			return nil, false, a.SignOut(ctx, id)
		}
		if err != nil {
			return nil, false, fmt.Errorf("access: resolve wecom member: %w", err)
		}
		return &SignIn{Principal: p, CSRF: st.CSRF, Expires: st.Expires}, true, nil
	}
	u := a.users[st.User]
	if u == nil || !a.now().Before(st.Expires) || subtle.ConstantTimeCompare([]byte(st.Cred), []byte(credOf(u.hash))) != 1 {
		return nil, false, a.SignOut(ctx, id)
	}
	return &SignIn{Principal: u.p, CSRF: st.CSRF, Expires: st.Expires}, true, nil
}

// OpenWeCom opens a session for a WeCom member of corp whose sign-in
// WeCom proved (Access.WeCom resolved it); every request resolves the
// member again.
func (a *Identities) OpenWeCom(ctx context.Context, corp, userID string) (string, *SignIn, error) {
	id, csrf := randomToken(), randomToken()
	st := Session{User: WeComUserPrefix + corp + ":" + userID, CSRF: csrf, Expires: a.now().Add(a.ttl)}
	if err := a.sessions.Put(ctx, id, st, a.ttl); err != nil {
		return "", nil, fmt.Errorf("access: store session: %w", err)
	}
	return id, &SignIn{CSRF: csrf, Expires: st.Expires}, nil
}

// SignOut ends the session id names, on every replica.
func (a *Identities) SignOut(ctx context.Context, id string) error {
	if err := a.sessions.Delete(ctx, id); err != nil {
		return fmt.Errorf("access: delete session: %w", err)
	}
	return nil
}

// Key names the principal in the dashboard's per-principal limits: a
// token by its name, a person by theirs (all their sessions together, so
// signing in again gains nothing).
func (p *Principal) Key() string {
	switch p.Kind {
	case KindToken:
		return "token:" + p.Name
	case KindWeCom:
		return "user:" + WeComUserPrefix + p.Corp + ":" + p.UserID
	}
	return "user:" + p.Name
}

// By is what a notice's versions record as their author (created_by):
// a token as "token:<name>", a password user by name, a WeCom member as
// "wecom:<corp>:<UserID>".
func (p *Principal) By() string { return strings.TrimPrefix(p.Key(), "user:") }

// Corps are the corps in which p holds any role (admin, sender or
// viewer): where it may look a notice up at all. nil is every corp; an
// empty slice none.
func (p *Principal) Corps() []string {
	if p.allCorps {
		return nil
	}
	out := []string{}
	for _, g := range p.grants {
		if !slices.Contains(out, g.Scope.Corp) {
			out = append(out, g.Scope.Corp)
		}
	}
	return out
}

// credOf names a password hash without being one.
func credOf(hash []byte) string {
	sum := sha256.Sum256(hash)
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}
