// Package fakewecom is a fake WeCom server API (qyapi.weixin.qq.com/cgi-bin)
// for tests and the demo. It is a test double held to WeCom's documented
// rules, not a spec of its own: each corp has self-built apps, each with
// its own secret and visible range (可见范围), and optionally the
// contacts-sync secret (通讯录同步 secret); an access_token is bound to the
// secret it was issued for, and each API answers only the tokens WeCom
// lets call it, with WeCom's errcode otherwise. It records what it was
// sent. Tests never reach the real WeCom.
//
// silenceper/wechat/v2 has its URLs fixed to WeCom's host; point it here with
// util.SetURIModifier(fakewecom.URIModifier(srv.URL)). The modifier is
// process-wide: set it once (TestMain) and serve every corp of the test
// binary from one Server (New takes many corps) rather than swapping servers
// under parallel tests.
//
// Served, with who may call it (every call but gettoken needs a token
// gettoken handed out, else 40014; the wrong kind of token is 48002, doc
// path 90313):
//
//	GET  /cgi-bin/gettoken?corpid=&corpsecret=      app or contacts secret (doc path 91039)
//	POST /cgi-bin/user/list_id                      contacts secret only (doc path 96067)
//	GET  /cgi-bin/user/simplelist?department_id=    app (visible departments) or contacts (doc path 90200)
//	                                                (contacts: 60020 with ContactsIDsOnly)
//	GET  /cgi-bin/department/simplelist?id=         app (visible tree) or contacts (doc path 95350)
//	GET  /cgi-bin/department/list?id=               app or contacts, with names (doc path 90208)
//	                                                (contacts: 60020 with ContactsIDsOnly)
//	POST /cgi-bin/message/send                      app only, its own agentid (doc path 90236)
//	POST /cgi-bin/message/recall                    app only, its own messages, 24 h (doc path 96460)
//	GET  /cgi-bin/getcallbackip                     any (doc path 90238)
//	GET  /cgi-bin/auth/getuserinfo?code=            app only (doc path 91023)
//	GET  /cgi-bin/agent/get?agentid=                app only, its own agent (doc path 90227)
//	GET  /cgi-bin/tag/list                          app or contacts: every tag of the corp (doc path 90216)
//	GET  /cgi-bin/tag/get?tagid=                    app or contacts: only members in the caller's
//	                                                visible range (doc path 90213); 40068 unknown tagid
package fakewecom

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Host is WeCom's API origin as silenceper/wechat/v2 writes it.
const Host = "https://qyapi.weixin.qq.com"

// WeCom error codes the fake answers with (global error codes,
// doc path 90313).
const (
	ErrInvalidCredential = 40001 // wrong corpsecret
	ErrInvalidCorpID     = 40013
	ErrInvalidToken      = 40014
	ErrInvalidCode       = 40029
	ErrBadParameter      = 40058
	ErrNoPermission      = 48002 // api forbidden: this secret may not call this API
	ErrDepartmentMissing = 60003
	ErrNoPrivilege       = 60011  // the department or member is outside the app's visible range
	ErrUntrustedIP       = 60020  // not allowed from this IP
	ErrAllInvalid        = 82001  // every touser, toparty and totag invalid (doc path 90236)
	ErrAnotherAgent      = 301002 // the token's app is not the agentid asked for
	ErrTaskIDReused      = 42014  // template card task_id used before (doc path 90236)
	ErrInvalidTagID      = 40068  // tag/get of a tag that does not exist (doc path 90213)
)

// App is one self-built app of a corp.
type App struct {
	AgentID int64
	Secret  string
	// VisibleDepartments are the departments the app sees, each with its
	// subtree (可见范围); nil sees the whole corp.
	VisibleDepartments []int
	// VisibleUsers are members the app sees outside those departments.
	// message/send reaches them; user/simplelist lists a department's
	// members only for a visible department (60011 otherwise), so they
	// cannot be listed with the app's secret.
	VisibleUsers []string
	// NoDepartmentNames makes department/list answer without names, as for
	// apps WeCom no longer gives department names (doc path 90208: a
	// 代开发 app without the admin's authorization).
	NoDepartmentNames bool
	// NoMemberNames makes user/simplelist answer without names, likewise
	// (doc path 90200).
	NoMemberNames bool
	// ReportEnter is the app's 上报进入应用事件 switch (agent/get's
	// isreportenter).
	ReportEnter bool
	// RedirectDomain is the app's OAuth2 trusted domain (可信域名,
	// agent/get's redirect_domain): a host and port, or a host alone
	// for any of its ports.
	RedirectDomain string
}

// Department is a seeded department.
type Department struct {
	ID       int
	ParentID int
	Name     string
	Order    int
	// Leaders are the department's leaders' UserIDs (department/list's
	// department_leader, doc path 90208).
	Leaders []string
}

// Tag is a seeded tag (标签): users and departments (each with its
// subtree, for message/send's totag).
type Tag struct {
	ID          int
	Name        string
	UserIDs     []string
	Departments []int
}

// User is a seeded member; Departments lists every department they are in.
type User struct {
	UserID      string
	Name        string
	Departments []int
}

// Corp is one seeded corp.
type Corp struct {
	CorpID string
	// Apps are its self-built apps; gettoken accepts their secrets.
	Apps []App
	// ContactsSecret is the contacts-sync secret; empty: not enabled.
	ContactsSecret string
	// ContactsIDsOnly restricts the contacts-sync secret as WeCom has for
	// IPs added since 2022-08-15 (doc paths 90208, 96260): it reads ids
	// only (user/list_id, department/simplelist), and department/list and
	// user/simplelist answer 60020.
	ContactsIDsOnly bool
	Departments     []Department
	Users           []User
	Tags            []Tag
	// InvalidUsers are answered in message/send's invaliduser.
	InvalidUsers []string
	// UnlicensedUsers are answered in message/send's unlicenseduser
	// (members without a basic licence, doc path 90236): the call goes
	// on, they get nothing.
	UnlicensedUsers []string
	// Codes maps OAuth2 codes to the UserID getuserinfo returns.
	Codes map[string]string

	// userIx indexes Users by lower-cased UserID (userAt); nil until
	// first used, and again whenever Users changes.
	userIx map[string]int
}

// userAt is the index in Users of the member id names, matched as WeCom
// matches UserIDs, without case; -1 when there is none. A corp of
// 100,000 members answers message/send's touser in a map, not a scan.
func (c *Corp) userAt(id string) int {
	if c.userIx == nil {
		c.userIx = make(map[string]int, len(c.Users))
		for i, u := range c.Users {
			if _, dup := c.userIx[strings.ToLower(u.UserID)]; !dup {
				c.userIx[strings.ToLower(u.UserID)] = i
			}
		}
	}
	if i, ok := c.userIx[strings.ToLower(id)]; ok {
		return i
	}
	return -1
}

// Sent is one recorded message/send call: a delivery.
type Sent struct {
	CorpID string
	Body   map[string]any
	Raw    []byte
	// MsgID is the msgid the fake answered (message/recall takes it);
	// At when it was delivered (the fake's clock).
	MsgID string
	At    time.Time
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	mu     sync.Mutex
	corps  map[string]*Corp
	tokens map[string]issue // access_token → who it was issued to
	issued int
	sent   []Sent
	tasks  map[string]bool // corp_id/task_id of template cards sent
	calls  map[string]int  // path → count
	// CallbackIPs is getcallbackip's answer.
	CallbackIPs []string
	// codes are the codes the sign-in pages issued (signin.go).
	codes map[string]issuedCode
	messages
}

// New returns a Server seeded with corps.
func New(corps ...Corp) *Server {
	s := &Server{
		corps:       map[string]*Corp{},
		tokens:      map[string]issue{},
		tasks:       map[string]bool{},
		calls:       map[string]int{},
		CallbackIPs: []string{"101.226.103.0/25", "140.207.54.76"},
		messages:    newMessages(),
	}
	for _, c := range corps {
		s.SetCorp(c)
	}
	return s
}

// Start serves s on a 127.0.0.1 httptest server closed when tb ends and
// returns its URL.
func Start(tb testing.TB, s *Server) string {
	tb.Helper()
	hs := httptest.NewServer(s)
	tb.Cleanup(hs.Close)
	return hs.URL
}

// URIModifier rewrites WeCom URLs to base (a fake's URL), for
// silenceper/wechat/v2's util.SetURIModifier.
func URIModifier(base string) func(string) string {
	return func(uri string) string {
		if rest, ok := strings.CutPrefix(uri, Host); ok {
			return base + rest
		}
		return uri
	}
}

// SetCorp adds or replaces a corp (its directory, secret, …); tokens already
// handed out stay valid (while their app is there) and see the corp as it
// is now.
func (s *Server) SetCorp(c Corp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := c
	cp.Departments = slices.Clone(c.Departments)
	cp.Users = slices.Clone(c.Users)
	cp.userIx = nil
	cp.Apps = slices.Clone(c.Apps)
	s.corps[c.CorpID] = &cp
}

// RevokeTokens forgets every access_token handed out, as if they expired:
// the next call answers 40014 and clients must call gettoken again.
func (s *Server) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// Sent returns the message/send calls so far.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// Calls returns how often path (e.g. "/cgi-bin/user/list_id") was called.
func (s *Server) Calls(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[path]
}

type reply map[string]any

// ServeHTTP answers like WeCom: HTTP 200 with errcode/errmsg in the body.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[r.URL.Path]++
	if s.signIn(w, r) {
		return
	}
	out := s.serve(r)
	if _, ok := out["errcode"]; !ok {
		out["errcode"] = 0
		out["errmsg"] = "ok"
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(out)
}

func fail(code int, msg string) reply { return reply{"errcode": code, "errmsg": msg} }

// issue is whom an access_token was issued to: one app of a corp, or the
// corp's contacts-sync secret.
type issue struct {
	corpID   string
	agentID  int64
	contacts bool
}

// grant is an issue resolved against the corps as they are now.
type grant struct {
	corp     *Corp
	app      *App // nil for the contacts secret
	contacts bool
}

// Which tokens may call an API.
type scope uint8

const (
	appOnly scope = iota + 1
	contactsOnly
	appOrContacts
)

// apis maps each path to who may call it (see the package doc).
var apis = map[string]scope{
	"/cgi-bin/user/list_id":          contactsOnly,
	"/cgi-bin/user/simplelist":       appOrContacts,
	"/cgi-bin/department/simplelist": appOrContacts,
	"/cgi-bin/department/list":       appOrContacts,
	"/cgi-bin/message/send":          appOnly,
	"/cgi-bin/message/recall":        appOnly,
	"/cgi-bin/getcallbackip":         appOrContacts,
	"/cgi-bin/auth/getuserinfo":      appOnly,
	"/cgi-bin/agent/get":             appOnly,
	"/cgi-bin/tag/list":              appOrContacts,
	"/cgi-bin/tag/get":               appOrContacts,
}

func (s *Server) gettoken(q map[string][]string) reply {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	c, ok := s.corps[get("corpid")]
	if !ok {
		return fail(ErrInvalidCorpID, "invalid corpid")
	}
	secret := get("corpsecret")
	is := issue{corpID: c.CorpID}
	switch {
	case secret != "" && secret == c.ContactsSecret:
		is.contacts = true
	default:
		i := slices.IndexFunc(c.Apps, func(a App) bool { return a.Secret == secret })
		if secret == "" || i < 0 {
			return fail(ErrInvalidCredential, "invalid credential")
		}
		is.agentID = c.Apps[i].AgentID
	}
	s.issued++
	tok := fmt.Sprintf("fake-token-%d", s.issued)
	s.tokens[tok] = is
	return reply{"access_token": tok, "expires_in": 7200}
}

func (s *Server) serve(r *http.Request) reply {
	q := r.URL.Query()
	if r.URL.Path == "/cgi-bin/gettoken" {
		return s.gettoken(q)
	}
	g, ok := s.grant(q.Get("access_token"))
	if !ok {
		return fail(ErrInvalidToken, "invalid access_token")
	}
	sc, known := apis[r.URL.Path]
	switch {
	case !known:
		return fail(ErrBadParameter, "fakewecom: unknown api "+r.URL.Path)
	case sc == appOnly && g.contacts, sc == contactsOnly && !g.contacts:
		return fail(ErrNoPermission, "api forbidden")
	}
	if code, ok := s.takeFailure(r.URL.Path); ok {
		return fail(code, "fakewecom: failure set by the test")
	}
	c := g.corp
	if g.contacts && c.ContactsIDsOnly && (r.URL.Path == "/cgi-bin/user/simplelist" || r.URL.Path == "/cgi-bin/department/list") {
		return fail(ErrUntrustedIP, "not allow to access from your ip")
	}
	switch r.URL.Path {
	case "/cgi-bin/user/list_id":
		return s.listID(c, r)
	case "/cgi-bin/user/simplelist":
		return simpleList(c, g, q)
	case "/cgi-bin/department/simplelist", "/cgi-bin/department/list":
		return departments(c, g, q, r.URL.Path == "/cgi-bin/department/list")
	case "/cgi-bin/tag/list":
		return tagList(c)
	case "/cgi-bin/tag/get":
		return tagGet(c, g, q)
	case "/cgi-bin/message/send":
		return s.send(g, r)
	case "/cgi-bin/message/recall":
		return s.recall(g, r)
	case "/cgi-bin/getcallbackip":
		return reply{"ip_list": s.CallbackIPs}
	case "/cgi-bin/agent/get":
		return agentGet(g, q)
	case "/cgi-bin/auth/getuserinfo":
		return s.getUserInfo(c, q)
	}
	return fail(ErrBadParameter, "fakewecom: unknown api "+r.URL.Path)
}

// grant resolves tok; ok is false for a token never issued or revoked, or
// whose corp, app or contacts secret is gone.
func (s *Server) grant(tok string) (grant, bool) {
	is, ok := s.tokens[tok]
	if !ok {
		return grant{}, false
	}
	c := s.corps[is.corpID]
	if c == nil {
		return grant{}, false
	}
	g := grant{corp: c, contacts: is.contacts}
	if is.contacts {
		return g, c.ContactsSecret != ""
	}
	i := slices.IndexFunc(c.Apps, func(a App) bool { return a.AgentID == is.agentID })
	if i < 0 {
		return grant{}, false
	}
	g.app = &c.Apps[i]
	return g, true
}

// seesDept reports whether the token's holder sees department id: the
// contacts secret sees all; an app its visible departments' subtrees.
func (g grant) seesDept(id int) bool {
	if g.contacts || g.app.VisibleDepartments == nil {
		return true
	}
	for _, top := range g.app.VisibleDepartments {
		if slices.ContainsFunc(subtree(g.corp, top), func(d Department) bool { return d.ID == id }) {
			return true
		}
	}
	return false
}

// seesUser reports whether the token's holder sees member u.
func (g grant) seesUser(u User) bool {
	if g.contacts || g.app.VisibleDepartments == nil || slices.Contains(g.app.VisibleUsers, u.UserID) {
		return true
	}
	return slices.ContainsFunc(u.Departments, g.seesDept)
}

func (s *Server) send(g grant, r *http.Request) reply {
	c := g.corp
	raw, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		return fail(ErrBadParameter, "read body")
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return fail(ErrBadParameter, "bad json")
	}
	if agent, _ := body["agentid"].(float64); int64(agent) != g.app.AgentID {
		return fail(ErrAnotherAgent, "not allow operate another agent with this accesstoken")
	}
	dup, out, err := s.duplicate(g, body, raw)
	if err != nil {
		return fail(ErrBadParameter, err.Error())
	}
	if dup {
		// The same request again inside the interval: answered, not
		// delivered twice (doc path 90236).
		return out
	}
	if card, ok := body["template_card"].(map[string]any); ok {
		if code, msg := checkCard(card); code != 0 {
			return fail(code, msg)
		}
		if task, ok := card["task_id"].(string); ok && task != "" {
			key := c.CorpID + "/" + task
			if s.tasks[key] {
				return fail(ErrTaskIDReused, "task_id already used")
			}
			s.tasks[key] = true
		}
	}
	// Members WeCom does not know, or outside the app's visible range, are
	// invaliduser, lower-cased (doc path 90236); when nobody is left the
	// whole call is refused.
	// Members without a basic licence are listed in unlicenseduser as
	// the doc's example lists them (doc path 90236: 没有基础接口许可(包含
	// 已过期)的userid); the doc says nothing of their case, so the fake
	// keeps the UserID as sent.
	var invalid, unlicensed []string
	valid := 0
	if to, ok := body["touser"].(string); ok {
		for _, id := range strings.Split(to, "|") {
			i := c.userAt(id)
			switch {
			case slices.Contains(c.InvalidUsers, id) || len(c.Users) > 0 && (i < 0 || !g.seesUser(c.Users[i])):
				invalid = append(invalid, strings.ToLower(id))
			case slices.Contains(c.UnlicensedUsers, id):
				unlicensed = append(unlicensed, id)
			default:
				valid++
			}
		}
	}
	if valid == 0 {
		return fail(ErrAllInvalid, "All touser & toparty & totag invalid")
	}
	msgID := fmt.Sprintf("fake-msg-%d", len(s.sent)+1)
	s.sent = append(s.sent, Sent{CorpID: c.CorpID, Body: body, Raw: raw, MsgID: msgID, At: s.now()})
	out = reply{"invaliduser": strings.Join(invalid, "|"), "invalidparty": "", "invalidtag": "", "msgid": msgID}
	if len(unlicensed) > 0 {
		out["unlicenseduser"] = strings.Join(unlicensed, "|")
	}
	if _, ok := body["template_card"]; ok {
		out["response_code"] = fmt.Sprintf("fake-rc-%d", len(s.sent))
	}
	s.delivered(g, body, raw, msgID, out)
	return out
}
