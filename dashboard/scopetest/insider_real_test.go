package scopetest

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/bcrypt"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

const (
	senderITTok = "sender-it-token-0123456789"
	passUser    = "hr-anna"
)

// insiderCorp is corpOf with eng-dan in both 研发 (4) and 销售 (3): an
// in-scope person of department 4 with an out-of-scope department.
func insiderCorp(corp string, withLeader bool) fakewecom.Corp {
	c := corpOf(corp, withLeader)
	for i, u := range c.Users {
		if u.UserID == "eng-dan" {
			c.Users[i].Departments = []int{4, 3}
		}
	}
	return c
}

// insiderStack is a dashboard over real MariaDB and Redis, two apps (hr,
// it) in one corp, the callers of issue 38 and what the rows inspect.
type insiderStack struct {
	db       *sql.DB
	rdb      redis.UniversalClient
	prefix   string
	corp     string
	now      time.Time
	opts     func() deps
	h        http.Handler
	admin    caller
	senderIT caller
	viewer   caller
	leader   caller
	sync     func()
	reg      *tracker.Registry
	store    *bitmap.Store
	mapper   *idmap.Mapper
}

func mustRunInsider(t *testing.T) *insiderStack {
	t.Helper()
	ctx := context.Background()
	s := &insiderStack{db: testenv.MySQL(t), corp: testenv.RandomName("corp")}
	s.rdb, s.prefix = testenv.Redis(t)
	fake.SetCorp(insiderCorp(s.corp, true))
	mapper, err := idmap.New(s.db, idmap.Options{})
	testenv.Check(t, "idmap.New", err)
	wdir, err := wecom.NewDirectory(wecom.App{CorpID: s.corp, AgentID: hrAgent, Secret: hrSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "wecom.NewDirectory", err)
	syncer, err := idmap.NewSyncer(mapper, map[string]idmap.Directory{s.corp: wdir}, idmap.Options{})
	testenv.Check(t, "idmap.NewSyncer", err)
	s.sync = func() {
		t.Helper()
		if _, err := syncer.Sync(ctx, s.corp); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	s.sync()
	bms, err := bitmap.New(s.rdb, bitmap.Options{Prefix: s.prefix})
	testenv.Check(t, "bitmap.New", err)
	t.Cleanup(bms.Close)
	apps := []yidu.App{
		{Name: "hr", CorpID: s.corp, AgentID: hrAgent, ReadButtonKey: "read_ok"},
		{Name: "it", CorpID: s.corp, AgentID: itAgent, ReadButtonKey: "read_ok"},
	}
	wapps := []wecom.App{{CorpID: s.corp, AgentID: hrAgent, Secret: hrSecret}, {CorpID: s.corp, AgentID: itAgent, Secret: itSecret}}
	reg, err := tracker.New(s.db, mapper, bms, tracker.Options{Apps: apps,
		Sender: wecom.NewSender(wapps, wecom.SenderOptions{Rate: 1000, Burst: 100})})
	testenv.Check(t, "tracker.New", err)
	s.now = time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return s.now }
	acc, err := access.New(access.Config{LeadersSee: true}, mapper, clock)
	testenv.Check(t, "access.New", err)
	camps, err := store.New(s.db, store.Options{Directory: mapper, Apps: apps, Now: clock})
	testenv.Check(t, "store.New", err)
	hash, err := bcrypt.GenerateFromPassword([]byte("anna-password"), bcrypt.MinCost)
	testenv.Check(t, "bcrypt", err)
	aud := audit.NewMySQL(s.db)
	s.opts = func() deps {
		return deps{Access: acc, Campaigns: camps,
			FollowUps: &loops.Rounds{DB: s.db, Now: clock, MinGap: time.Minute, Log: slog.New(slog.DiscardHandler),
				Zone: func(string) *time.Location { return time.UTC }},
			Options: dashboard.Options{
				Apps: apps, Now: clock, PublicURL: publicURL, Audit: aud, AuditLog: aud,
				StreamRecheck: 100 * time.Millisecond,
				WeCom: &dashboard.WeComLogin{CorpID: s.corp, AgentID: hrAgent, Access: acc,
					Endpoints: access.Endpoints{OAuthBase: wecomBase, LoginBase: wecomBase},
					States:    access.NewStates(s.rdb, s.prefix), OAuth: wecom.NewOAuth(wapps)}},
			Sessions: webedge.DashboardSessions(s.rdb, s.prefix),
			Tokens: []access.Token{
				{Name: "v4", Token: viewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: s.corp, Departments: []int64{4}}}},
				{Name: "sit", Token: senderITTok, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: s.corp, Apps: []string{"it"}}}},
				{Name: "admin", Token: adminTok, Corps: []string{s.corp}},
			},
			Users: []access.User{{Name: passUser, PasswordHash: string(hash), Corps: []string{s.corp}}},
		}
	}
	s.reg, s.store, s.mapper = reg, bms, mapper
	srv, err := newServer(reg, bms, mapper, s.opts())
	testenv.Check(t, "dashboard.New", err)
	t.Cleanup(srv.Close)
	s.h = srv.Routes()
	s.admin = caller{name: "admin", token: adminTok}
	s.senderIT = caller{name: "sender of it", token: senderITTok}
	s.viewer = caller{name: "viewer token of 4", token: viewerTok}

	// Sent notices, oldest first: n1 (3 and 4, hr), nit (3 and 4, it),
	// then two notices to people outside department 4 (hr), titled 裁员,
	// newest.
	for i, n := range []struct{ msgid, app, title, audience string }{
		{"n1", "hr", "放假通知", `{"departments":[3,4]}`},
		{"nit", "it", "系统升级", `{"departments":[3,4]}`},
		{"cut-a", "hr", "裁员名单 A", `{"userids":["sales-amy","sales-bob"]}`},
		{"cut-b", "hr", "裁员名单 B", `{"userids":["sales-amy","boss-carl"]}`},
	} {
		at := s.now.Add(time.Duration(i-10) * time.Minute).Format(time.RFC3339)
		w := s.admin.do(t, s.h, "POST", "/api/v1/messages", `{"msgid":"`+n.msgid+`","app":"`+n.app+`","title":"`+n.title+`","sent_at":"`+at+`","audience":`+n.audience+`,"send":true}`)
		if w.Code != http.StatusCreated {
			t.Fatalf("register %s = %d %s", n.msgid, w.Code, w.Body)
		}
	}
	// Two notices the admin scheduled through hr.
	for _, id := range []string{"sched-hr-1", "sched-hr-2"} {
		w := s.admin.do(t, s.h, "POST", "/api/v1/messages", `{"msgid":"`+id+`","app":"hr","title":"年终奖","audience":{"userids":["eng-dan"]},"send":true,"send_at":"`+s.now.Add(time.Hour).Format(time.RFC3339)+`"}`)
		if w.Code != http.StatusCreated {
			t.Fatalf("schedule %s = %d %s", id, w.Code, w.Body)
		}
	}
	s.leader = signIn(t, s.h, leaderID)
	return s
}

// auditRows counts audit rows matching where (an SQL condition).
func (s *insiderStack) auditRows(t *testing.T, where string, args ...any) int {
	t.Helper()
	var n int
	testenv.Check(t, "count audit", s.db.QueryRow("SELECT COUNT(*) FROM audit_events WHERE "+where, args...).Scan(&n))
	return n
}

// cursorNames decodes a list cursor (the tracker's base64; campaign's is
// a msgid) and reports whether it names msgid.
func cursorNames(cursor, msgid string) bool {
	if cursor == "" {
		return false
	}
	if b, err := base64.RawURLEncoding.DecodeString(cursor); err == nil && strings.Contains(string(b), msgid) {
		return true
	}
	return strings.Contains(cursor, msgid)
}

// TestInsiderOnRealServices is issue 38's attacker's table: ordinary
// accounts (a viewer token of department 4, a department leader signed
// in with WeCom, a sender of app it, an outsider with a browser) against
// a dashboard with two apps in one corp, on MariaDB and Redis. Each row
// is one item of the issue; each failed on main before its fix.
func TestInsiderOnRealServices(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB and Redis")
	}
	s := mustRunInsider(t)
	ctx := context.Background()

	rows := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"1 a sender of it cannot take the msgid of hr's scheduled notice", func(t *testing.T) {
			w := s.senderIT.do(t, s.h, "POST", "/api/v1/messages", `{"msgid":"sched-hr-1","app":"it","title":"抢注","audience":{"userids":["eng-dan"]},"send":true}`)
			if w.Code != http.StatusConflict {
				t.Errorf("register hr's scheduled msgid through it = %d %s, want 409", w.Code, w.Body)
			}
			for _, whose := range []string{"hr", s.corp} {
				if strings.Contains(w.Body.String(), whose) {
					t.Errorf("the refusal says whose the msgid is (%q): %s", whose, w.Body)
				}
			}
			var n int
			testenv.Check(t, "count", s.db.QueryRow("SELECT COUNT(*) FROM messages WHERE msgid = 'sched-hr-1'").Scan(&n))
			if n != 0 {
				t.Errorf("sched-hr-1 is registered (%d rows): its send would fail as a conflict", n)
			}
			// Nor may another app's draft take a sent notice's msgid.
			w = s.senderIT.do(t, s.h, "POST", "/api/v1/messages", `{"msgid":"n1","app":"it","title":"t","audience":{"userids":["eng-dan"]},"draft":true}`)
			if w.Code != http.StatusConflict {
				t.Errorf("a draft of it with hr's msgid n1 = %d %s, want 409", w.Code, w.Body)
			}
		}},
		{"2 list cursors carry only what the caller may see", func(t *testing.T) {
			for _, q := range []struct {
				c      caller
				target string
				hidden []string
			}{
				{s.viewer, "/api/v1/messages?limit=1", []string{"cut-a", "cut-b"}},
				{s.viewer, "/api/v1/messages?limit=1&q=" + url.QueryEscape("裁员"), []string{"cut-a", "cut-b"}},
				{s.senderIT, "/api/v1/messages?state=scheduled&limit=1", []string{"sched-hr-1", "sched-hr-2"}},
			} {
				target, pages := q.target, 0
				for {
					w := q.c.do(t, s.h, "GET", target, "")
					var out struct {
						Messages []struct {
							MsgID string `json:"msgid"`
						}
						NextCursor string `json:"next_cursor"`
					}
					if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &out) != nil {
						t.Fatalf("%s: GET %s = %d %s", q.c.name, target, w.Code, w.Body)
					}
					for _, h := range q.hidden {
						if cursorNames(out.NextCursor, h) || strings.Contains(w.Body.String(), h) {
							t.Errorf("%s: GET %s tells of %s: %s", q.c.name, target, h, w.Body)
						}
					}
					if strings.Contains(q.target, "q=") && out.NextCursor != "" && len(out.Messages) == 0 {
						t.Errorf("%s: a search that matches nothing visible has a next page", q.c.name)
					}
					if out.NextCursor == "" || pages > 10 {
						break
					}
					pages++
					target = q.target + "&cursor=" + url.QueryEscape(out.NextCursor)
				}
			}
		}},
		{"4 every act and read of personal data has a named row", func(t *testing.T) {
			// PATCH of a scheduled notice's follow-up.
			before := s.auditRows(t, "action = 'follow_up_change' AND msgid = 'sched-hr-2'")
			if w := s.admin.do(t, s.h, "PATCH", "/api/v1/messages/sched-hr-2", `{"follow_up":{"reminders":["30m"]}}`); w.Code != 200 {
				t.Fatalf("PATCH follow_up = %d %s", w.Code, w.Body)
			}
			if got := s.auditRows(t, "action = 'follow_up_change' AND msgid = 'sched-hr-2' AND actor = 'admin'"); got != before+1 {
				t.Errorf("PATCH follow_up left %d follow_up_change rows, want %d", got, before+1)
			}
			// A replayed POST that changes the policy.
			if w := s.admin.do(t, s.h, "POST", "/api/v1/messages", `{"msgid":"n1","app":"hr","title":"放假通知","sent_at":"`+s.now.Add(-10*time.Minute).Format(time.RFC3339)+`","audience":{"departments":[3,4]},"follow_up":{"reminders":["2h"]}}`); w.Code != 200 {
				t.Fatalf("replayed POST = %d %s", w.Code, w.Body)
			}
			if got := s.auditRows(t, "action = 'follow_up_change' AND msgid = 'n1' AND actor = 'admin'"); got != 1 {
				t.Errorf("a replayed POST with follow_up left %d follow_up_change rows, want 1", got)
			}
			// Recipient pages and searches.
			for _, q := range []string{"", "?limit=1000", "?q=eng"} {
				if w := s.viewer.do(t, s.h, "GET", "/api/v1/messages/n1/recipients"+q, ""); w.Code != 200 {
					t.Fatalf("recipients%s = %d", q, w.Code)
				}
			}
			if got := s.auditRows(t, "action = 'recipients' AND actor = 'v4' AND msgid = 'n1'"); got != 3 {
				t.Errorf("3 recipient reads left %d rows, want 3", got)
			}
			// A write refused with 403.
			if w := s.viewer.do(t, s.h, "POST", "/api/v1/messages/n1/recall", "{}"); w.Code != http.StatusForbidden {
				t.Fatalf("viewer's recall = %d, want 403", w.Code)
			}
			if got := s.auditRows(t, "action = 'recall' AND actor = 'v4' AND outcome = 'refused' AND corp_id = ?", s.corp); got != 1 {
				t.Errorf("a refused recall left %d rows, want 1", got)
			}
			// Tokens without a name, or sharing one, do not start.
			for _, toks := range [][]access.Token{
				{{Token: "nameless-token-0123456789", Corps: []string{s.corp}}},
				{{Name: "twin", Token: "twin-token-a-0123456789", Corps: []string{s.corp}}, {Name: "twin", Token: "twin-token-b-0123456789", Corps: []string{s.corp}}},
			} {
				o := s.opts()
				o.Tokens = toks
				if srv, err := newServer(s.reg, s.store, s.mapper, o); err == nil {
					srv.Close()
					t.Errorf("dashboard.New with tokens %v started", []string{toks[0].Name})
				}
			}
		}},
		{"5 sign-in with WeCom is limited, forged states write nothing", func(t *testing.T) {
			before := s.auditRows(t, "action = 'sign_in_failed'")
			limited := false
			for i := range 300 {
				r := httptest.NewRequest("GET", "/login/wecom/callback?state=forged"+string(rune('a'+i%26))+"&code=made-up", nil)
				r.AddCookie(&http.Cookie{Name: "yidu_login", Value: "forged-nonce"})
				r.RemoteAddr = "198.51.100.7:4000"
				w := httptest.NewRecorder()
				s.h.ServeHTTP(w, r)
				limited = limited || w.Code == http.StatusTooManyRequests
			}
			if got := s.auditRows(t, "action = 'sign_in_failed'") - before; got != 0 {
				t.Errorf("300 forged callbacks wrote %d audit rows, want 0", got)
			}
			if !limited {
				t.Errorf("300 forged callbacks from one address were never refused 429")
			}
			for range 200 {
				r := httptest.NewRequest("GET", "/login/wecom?next=/", nil)
				r.RemoteAddr = "198.51.100.8:4000"
				s.h.ServeHTTP(httptest.NewRecorder(), r)
			}
			keys, err := s.rdb.Keys(ctx, s.prefix+"login:state:*").Result()
			testenv.Check(t, "keys", err)
			if len(keys) >= 100 {
				t.Errorf("200 starts from one address left %d sign-in states in Redis", len(keys))
			}
			// The password form records no actor a stranger typed.
			form := url.Values{"username": {"yidu.yaml"}, "password": {"x"}}
			r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = "198.51.100.9:4000"
			s.h.ServeHTTP(httptest.NewRecorder(), r)
			if got := s.auditRows(t, "actor = 'yidu.yaml'"); got != 0 {
				t.Errorf("a failed sign-in as %q wrote %d rows naming it", "yidu.yaml", got)
			}
		}},
		{"6 a live stream ends when its session does", func(t *testing.T) {
			c := signIn(t, s.h, leaderID)
			ts := httptest.NewServer(s.h)
			defer ts.Close()
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(sctx, "GET", ts.URL+"/api/v1/messages/n1/events", nil)
			req.AddCookie(c.cookie)
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stream = %v %v", resp, err)
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
			}
			if w := c.do(t, s.h, "POST", "/logout", ""); w.Code != http.StatusSeeOther {
				t.Fatalf("sign out = %d", w.Code)
			}
			ended := make(chan error, 1)
			go func() { _, err := io.Copy(io.Discard, resp.Body); ended <- err }()
			select {
			case err := <-ended:
				if err != nil && !errors.Is(err, io.EOF) {
					t.Errorf("stream broke instead of ending: %v", err)
				}
			case <-time.After(3 * time.Second):
				t.Errorf("the stream goes on 3 s after its session signed out")
			}
		}},
		{"7 /lang keeps back= on the site", func(t *testing.T) {
			for _, back := range []string{"/%09/evil.example/path", "//evil.example", "/%5cevil.example", "https://evil.example"} {
				r := httptest.NewRequest("GET", "/lang?to=en&back="+back, nil)
				w := httptest.NewRecorder()
				s.h.ServeHTTP(w, r)
				if loc := w.Header().Get("Location"); loc != "/" {
					t.Errorf("/lang back=%s goes to %q, want /", back, loc)
				}
			}
		}},
		{"8 departments within the scope only", func(t *testing.T) {
			for _, c := range []caller{s.viewer, s.leader} {
				for _, path := range []string{"/api/v1/messages/n1/recipients", "/api/v1/messages/n1/export.csv"} {
					w := c.do(t, s.h, "GET", path, "")
					if w.Code != 200 || !strings.Contains(w.Body.String(), "eng-dan") {
						t.Fatalf("%s: %s = %d %s", c.name, path, w.Code, w.Body)
					}
					if strings.Contains(w.Body.String(), "销售") {
						t.Errorf("%s: %s names 销售, an out-of-scope department of eng-dan:\n%s", c.name, path, w.Body)
					}
				}
				in := c.do(t, s.h, "GET", "/api/v1/messages/n1/recipients?department=3", "")
				none := c.do(t, s.h, "GET", "/api/v1/messages/n1/recipients?department=99", "")
				if in.Code != none.Code || strings.ReplaceAll(in.Body.String(), "3", "99") != none.Body.String() {
					t.Errorf("%s: department=3 (out of scope) = %d %s; department=99 = %d %s: want the same answer", c.name, in.Code, in.Body, none.Code, none.Body)
				}
			}
		}},
		{"9 a link on another site runs no export", func(t *testing.T) {
			before := s.auditRows(t, "action = 'export' AND actor = ?", leaderID)
			r := httptest.NewRequest("GET", "/api/v1/messages/n1/export.csv?state=unread&q=eng", nil)
			r.AddCookie(s.leader.cookie)
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Sec-Fetch-Mode", "navigate")
			w := httptest.NewRecorder()
			s.h.ServeHTTP(w, r)
			if w.Code == 200 {
				t.Errorf("a cross-site link's export = 200")
			}
			if got := s.auditRows(t, "action = 'export' AND actor = ?", leaderID); got != before {
				t.Errorf("a cross-site link wrote %d export rows in the leader's name", got-before)
			}
			// The page's own button (a same-origin link) still exports.
			r = httptest.NewRequest("GET", "/api/v1/messages/n1/export.csv?state=unread", nil)
			r.AddCookie(s.leader.cookie)
			r.Header.Set("Sec-Fetch-Site", "same-origin")
			w = httptest.NewRecorder()
			s.h.ServeHTTP(w, r)
			if w.Code != 200 {
				t.Errorf("the page's export = %d", w.Code)
			}
		}},
		{"10 the scope check comes before any restore", func(t *testing.T) {
			keys, err := s.rdb.Keys(ctx, s.prefix+":m:{"+s.corp+"/cut-a}:*").Result()
			testenv.Check(t, "keys", err)
			if len(keys) == 0 {
				t.Fatalf("cut-a has no keys to expire")
			}
			testenv.Check(t, "del", s.rdb.Del(ctx, keys...).Err())
			for _, path := range []string{"/api/v1/messages/cut-a", "/api/v1/messages/cut-a/progress", "/api/v1/messages/cut-a/recipients"} {
				if w := s.viewer.do(t, s.h, "GET", path, ""); w.Code != http.StatusNotFound {
					t.Errorf("viewer %s = %d, want 404", path, w.Code)
				}
			}
			if n, _ := s.rdb.Exists(ctx, keys...).Result(); n != 0 {
				t.Errorf("an out-of-scope caller's requests restored %d keys of cut-a", n)
			}
			if w := s.admin.do(t, s.h, "GET", "/api/v1/messages/cut-a/progress", ""); w.Code != 200 {
				t.Errorf("admin's progress of cut-a = %d", w.Code)
			}
		}},
		{"suspected: scoped callers hold at most half the live streams", func(t *testing.T) {
			o := s.opts()
			o.MaxStreams = 2
			srv, err := newServer(s.reg, s.store, s.mapper, o)
			testenv.Check(t, "dashboard.New", err)
			defer srv.Close()
			ts := httptest.NewServer(srv.Routes())
			defer ts.Close()
			open := func(c caller) *http.Response {
				t.Helper()
				req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/v1/messages/n1/events", nil)
				if c.token != "" {
					req.Header.Set("Authorization", "Bearer "+c.token)
				} else {
					req.AddCookie(c.cookie)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			first := open(s.leader)
			defer first.Body.Close()
			if first.StatusCode != 200 {
				t.Fatalf("the leader's stream = %d", first.StatusCode)
			}
			second := open(s.viewer)
			second.Body.Close()
			if second.StatusCode != http.StatusServiceUnavailable {
				t.Errorf("a second scoped stream of 2 slots = %d, want 503", second.StatusCode)
			}
			third := open(s.admin)
			third.Body.Close()
			if third.StatusCode != 200 {
				t.Errorf("the admin's stream beside a leader's = %d, want 200", third.StatusCode)
			}
		}},
		{"suspected: a password user removed and added again does not get the old sessions back", func(t *testing.T) {
			form := url.Values{"username": {passUser}, "password": {"anna-password"}}
			r := httptest.NewRequest("POST", "/login", strings.NewReader(form.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			r.RemoteAddr = "198.51.100.10:4000"
			w := httptest.NewRecorder()
			s.h.ServeHTTP(w, r)
			var sess *http.Cookie
			for _, c := range w.Result().Cookies() {
				if c.Name == "yidu_session" {
					sess = c
				}
			}
			if sess == nil {
				t.Fatalf("password sign-in = %d", w.Code)
			}
			anna := caller{name: passUser, cookie: sess}
			if w := anna.do(t, s.h, "GET", "/api/v1/messages/n1/progress", ""); w.Code != 200 {
				t.Fatalf("before: %d", w.Code)
			}
			// A new deploy: hr-anna is another person now, with her own
			// password; the sessions are in the same Redis.
			hash, err := bcrypt.GenerateFromPassword([]byte("the-new-anna"), bcrypt.MinCost)
			testenv.Check(t, "bcrypt", err)
			o := s.opts()
			o.Users = []access.User{{Name: passUser, PasswordHash: string(hash), Corps: []string{s.corp}}}
			srv, err := newServer(s.reg, s.store, s.mapper, o)
			testenv.Check(t, "dashboard.New", err)
			defer srv.Close()
			if w := anna.do(t, srv.Routes(), "GET", "/api/v1/messages/n1/progress", ""); w.Code != http.StatusUnauthorized {
				t.Errorf("the old session of a re-added user = %d, want 401", w.Code)
			}
		}},
	}
	for _, row := range rows {
		t.Run(row.name, row.run)
	}
}
