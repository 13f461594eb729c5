// Package fakewecom is a fake WeCom server API (qyapi.weixin.qq.com/cgi-bin)
// for tests: it speaks WeCom's JSON for the calls yidu makes, seeded from Go
// values, and records what it was sent. Tests never reach the real WeCom.
//
// silenceper/wechat/v2 has its URLs fixed to WeCom's host; point it here with
// util.SetURIModifier(fakewecom.URIModifier(srv.URL)). The modifier is
// process-wide: set it once (TestMain) and serve every corp of the test
// binary from one Server (New takes many corps) rather than swapping servers
// under parallel tests.
//
// Served (all but gettoken require the access_token gettoken handed out,
// else errcode 40014):
//
//	GET  /cgi-bin/gettoken?corpid=&corpsecret=
//	POST /cgi-bin/user/list_id          {cursor, limit ≤ 10000} cursor paging
//	GET  /cgi-bin/user/simplelist?department_id=   direct members
//	GET  /cgi-bin/department/simplelist?id=        id 0/absent: all
//	GET  /cgi-bin/department/list?id=              with names (48002 if Corp.NoDepartmentList)
//	POST /cgi-bin/message/send          recorded; invaliduser from Corp.InvalidUsers
//	GET  /cgi-bin/getcallbackip
//	GET  /cgi-bin/auth/getuserinfo?code=  and the older /cgi-bin/user/getuserinfo
package fakewecom

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Host is WeCom's API origin as silenceper/wechat/v2 writes it.
const Host = "https://qyapi.weixin.qq.com"

// WeCom error codes the fake answers with (global error codes,
// document/path/90313).
const (
	ErrInvalidCredential = 40001 // wrong corpsecret
	ErrInvalidCorpID     = 40013
	ErrInvalidToken      = 40014
	ErrInvalidCode       = 40029
	ErrBadParameter      = 40058
	ErrNoPermission      = 48002
	ErrDepartmentMissing = 60003
	ErrTaskIDReused      = 42014 // template card task_id used before (path 90236)
)

// Department is a seeded department.
type Department struct {
	ID       int
	ParentID int
	Name     string
	Order    int
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
	// Secret is the corpsecret gettoken accepts; empty accepts any.
	Secret      string
	Departments []Department
	Users       []User
	// InvalidUsers are answered in message/send's invaliduser.
	InvalidUsers []string
	// Codes maps OAuth2 codes to the UserID getuserinfo returns.
	Codes map[string]string
	// NoDepartmentList makes department/list answer 48002, as for apps not
	// allowed to read department names.
	NoDepartmentList bool
}

// Sent is one recorded message/send call.
type Sent struct {
	CorpID string
	Body   map[string]any
	Raw    []byte
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	mu     sync.Mutex
	corps  map[string]*Corp
	tokens map[string]string // access_token → corp_id
	issued int
	sent   []Sent
	tasks  map[string]bool // corp_id/task_id of template cards sent
	calls  map[string]int  // path → count
	// CallbackIPs is getcallbackip's answer.
	CallbackIPs []string
}

// New returns a Server seeded with corps.
func New(corps ...Corp) *Server {
	s := &Server{
		corps:       map[string]*Corp{},
		tokens:      map[string]string{},
		tasks:       map[string]bool{},
		calls:       map[string]int{},
		CallbackIPs: []string{"101.226.103.0/25", "140.207.54.76"},
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
// handed out stay valid.
func (s *Server) SetCorp(c Corp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := c
	cp.Departments = slices.Clone(c.Departments)
	cp.Users = slices.Clone(c.Users)
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
	out := s.serve(r)
	if _, ok := out["errcode"]; !ok {
		out["errcode"] = 0
		out["errmsg"] = "ok"
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	_ = json.NewEncoder(w).Encode(out)
}

func fail(code int, msg string) reply { return reply{"errcode": code, "errmsg": msg} }

func (s *Server) serve(r *http.Request) reply {
	q := r.URL.Query()
	if r.URL.Path == "/cgi-bin/gettoken" {
		c, ok := s.corps[q.Get("corpid")]
		if !ok {
			return fail(ErrInvalidCorpID, "invalid corpid")
		}
		if c.Secret != "" && q.Get("corpsecret") != c.Secret {
			return fail(ErrInvalidCredential, "invalid credential")
		}
		s.issued++
		tok := fmt.Sprintf("fake-token-%d", s.issued)
		s.tokens[tok] = c.CorpID
		return reply{"access_token": tok, "expires_in": 7200}
	}
	corpID, ok := s.tokens[q.Get("access_token")]
	if !ok {
		return fail(ErrInvalidToken, "invalid access_token")
	}
	c := s.corps[corpID]
	switch r.URL.Path {
	case "/cgi-bin/user/list_id":
		return s.listID(c, r)
	case "/cgi-bin/user/simplelist":
		id, err := strconv.Atoi(q.Get("department_id"))
		if err != nil || !hasDept(c, id) {
			return fail(ErrDepartmentMissing, "department not found")
		}
		list := []reply{}
		for _, u := range c.Users {
			if slices.Contains(u.Departments, id) {
				list = append(list, reply{"userid": u.UserID, "name": u.Name, "department": u.Departments})
			}
		}
		return reply{"userlist": list}
	case "/cgi-bin/department/simplelist", "/cgi-bin/department/list":
		if r.URL.Path == "/cgi-bin/department/list" && c.NoDepartmentList {
			return fail(ErrNoPermission, "api forbidden")
		}
		id, _ := strconv.Atoi(q.Get("id"))
		if id != 0 && !hasDept(c, id) {
			return fail(ErrDepartmentMissing, "department not found")
		}
		var list []reply
		for _, d := range subtree(c, id) {
			if r.URL.Path == "/cgi-bin/department/list" {
				list = append(list, reply{"id": d.ID, "name": d.Name, "parentid": d.ParentID, "order": d.Order, "department_leader": []string{}})
			} else {
				list = append(list, reply{"id": d.ID, "parentid": d.ParentID, "order": d.Order})
			}
		}
		if r.URL.Path == "/cgi-bin/department/list" {
			return reply{"department": list}
		}
		return reply{"department_id": list}
	case "/cgi-bin/message/send":
		return s.send(c, r)
	case "/cgi-bin/getcallbackip":
		return reply{"ip_list": s.CallbackIPs}
	case "/cgi-bin/auth/getuserinfo", "/cgi-bin/user/getuserinfo":
		id, ok := c.Codes[q.Get("code")]
		if !ok {
			return fail(ErrInvalidCode, "invalid code")
		}
		if r.URL.Path == "/cgi-bin/user/getuserinfo" {
			return reply{"UserId": id, "DeviceId": ""}
		}
		return reply{"userid": id}
	}
	return fail(ErrBadParameter, "fakewecom: unknown api "+r.URL.Path)
}

func hasDept(c *Corp, id int) bool {
	return slices.ContainsFunc(c.Departments, func(d Department) bool { return d.ID == id })
}

// subtree returns department id and its descendants (all for id 0), in
// seeded order.
func subtree(c *Corp, id int) []Department {
	if id == 0 {
		return c.Departments
	}
	in := map[int]bool{id: true}
	for changed := true; changed; {
		changed = false
		for _, d := range c.Departments {
			if in[d.ParentID] && !in[d.ID] {
				in[d.ID] = true
				changed = true
			}
		}
	}
	var out []Department
	for _, d := range c.Departments {
		if in[d.ID] {
			out = append(out, d)
		}
	}
	return out
}

// listID pages the user-department pairs; the cursor is the next pair's
// offset (opaque to clients, as WeCom's is).
func (s *Server) listID(c *Corp, r *http.Request) reply {
	var req struct {
		Cursor string `json:"cursor"`
		Limit  int    `json:"limit"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		return fail(ErrBadParameter, "bad json")
	}
	if req.Limit == 0 {
		req.Limit = 10000
	}
	if req.Limit < 1 || req.Limit > 10000 {
		return fail(ErrBadParameter, "invalid limit")
	}
	type pair struct {
		UserID     string `json:"userid"`
		Department int    `json:"department"`
	}
	var pairs []pair
	for _, u := range c.Users {
		for _, d := range u.Departments {
			pairs = append(pairs, pair{u.UserID, d})
		}
	}
	start := 0
	if req.Cursor != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(req.Cursor, "c"))
		if err != nil || !strings.HasPrefix(req.Cursor, "c") || n < 0 || n > len(pairs) {
			return fail(ErrBadParameter, "invalid cursor")
		}
		start = n
	}
	end := min(start+req.Limit, len(pairs))
	next := ""
	if end < len(pairs) {
		next = "c" + strconv.Itoa(end)
	}
	return reply{"next_cursor": next, "dept_user": pairs[start:end]}
}

func (s *Server) send(c *Corp, r *http.Request) reply {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 2<<20))
	if err != nil {
		return fail(ErrBadParameter, "read body")
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return fail(ErrBadParameter, "bad json")
	}
	if card, ok := body["template_card"].(map[string]any); ok {
		if task, ok := card["task_id"].(string); ok && task != "" {
			key := c.CorpID + "/" + task
			if s.tasks[key] {
				return fail(ErrTaskIDReused, "task_id already used")
			}
			s.tasks[key] = true
		}
	}
	s.sent = append(s.sent, Sent{CorpID: c.CorpID, Body: body, Raw: raw})
	var invalid []string
	if to, ok := body["touser"].(string); ok {
		for _, id := range strings.Split(to, "|") {
			if slices.Contains(c.InvalidUsers, id) {
				invalid = append(invalid, id)
			}
		}
	}
	out := reply{"invaliduser": strings.Join(invalid, "|"), "invalidparty": "", "invalidtag": "",
		"msgid": fmt.Sprintf("fake-msg-%d", len(s.sent))}
	if _, ok := body["template_card"]; ok {
		out["response_code"] = fmt.Sprintf("fake-rc-%d", len(s.sent))
	}
	return out
}
