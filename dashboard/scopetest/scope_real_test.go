package scopetest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/silenceper/wechat/v2/util"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/campaign/store"
	"github.com/yidu-io/yidu/dashboard"
	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/webedge"
	"github.com/yidu-io/yidu/tracker"
	"github.com/yidu-io/yidu/wecom"
)

// The fake WeCom of every test of the binary: the wecom client (sync,
// send, OAuth) reaches it through silenceper's process-wide URI
// modifier; the sign-in pages are at wecomBase.
var (
	fake      = fakewecom.New()
	wecomBase string
)

func TestMain(m *testing.M) {
	srv := httptest.NewServer(fake)
	wecomBase = srv.URL
	util.SetURIModifier(fakewecom.URIModifier(srv.URL))
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

const (
	hrSecret   = "hr-secret"
	itSecret   = "it-secret"
	publicURL  = "https://yidu.example.com"
	viewerTok  = "viewer-4-token-0123456789"
	senderTok  = "sender-hr-token-0123456789"
	adminTok   = "admin-token-0123456789"
	leaderID   = "eng-lead"
	hrAgent    = 1000002
	itAgent    = 1000003
	dept4Count = 3 // eng-lead, eng-dan, eng-eve
)

// outside are the UserIDs and names of people outside department 4's
// subtree (销售 3 and 总部 1): none may appear in a scoped answer.
var outside = []string{"sales-amy", "sales-bob", "boss-carl", "销售艾米", "销售鲍勃", "老板卡尔"}

// corpOf is the seeded corp: 1 总部 ├ 3 销售 └ 4 研发 (led by eng-lead).
func corpOf(corp string, withLeader bool) fakewecom.Corp {
	c := fakewecom.Corp{CorpID: corp,
		Apps: []fakewecom.App{{AgentID: hrAgent, Secret: hrSecret, RedirectDomain: "yidu.example.com"}, {AgentID: itAgent, Secret: itSecret}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}, {ID: 3, ParentID: 1, Name: "销售"},
			{ID: 4, ParentID: 1, Name: "研发", Leaders: []string{leaderID}}},
		Users: []fakewecom.User{
			{UserID: "boss-carl", Name: "老板卡尔", Departments: []int{1}},
			{UserID: "sales-amy", Name: "销售艾米", Departments: []int{3}},
			{UserID: "sales-bob", Name: "销售鲍勃", Departments: []int{3}},
			{UserID: leaderID, Name: "研发主管", Departments: []int{4}},
			{UserID: "eng-dan", Name: "研发丹", Departments: []int{4}},
			{UserID: "eng-eve", Name: "研发伊芙", Departments: []int{4}},
		}}
	if !withLeader {
		c.Departments[2].Leaders = nil
		c.Users = slices.DeleteFunc(c.Users, func(u fakewecom.User) bool { return u.UserID == leaderID })
	}
	return c
}

// caller is one principal: a bearer token or a WeCom session.
type caller struct {
	name   string
	token  string
	cookie *http.Cookie
	csrf   string
}

func (c caller) do(t *testing.T, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.cookie != nil {
		r.AddCookie(c.cookie)
		r.Header.Set("X-CSRF-Token", c.csrf)
		r.Header.Set("Sec-Fetch-Site", "same-origin") // the page's own requests
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var csrfMeta = regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`)

// signIn signs userID in through the fake WeCom's OAuth page (inside
// WeCom's browser) and returns its session.
func signIn(t *testing.T, h http.Handler, userID string) caller {
	t.Helper()
	r := httptest.NewRequest("GET", "/login/wecom?next=/", nil)
	r.Header.Set("User-Agent", "Mozilla/5.0 wxwork/4.1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusFound || len(w.Result().Cookies()) == 0 {
		t.Fatalf("start sign-in = %d %s", w.Code, w.Body)
	}
	nonce := w.Result().Cookies()[0]
	to, _ := url.Parse(w.Header().Get("Location"))
	q := to.Query()
	q.Set("as", userID)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(wecomBase + to.Path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, _ := url.Parse(resp.Header.Get("Location"))
	cb := httptest.NewRequest("GET", "/login/wecom/callback?"+back.RawQuery, nil)
	cb.AddCookie(nonce)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, cb)
	var sess *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == "yidu_session" && c.Value != "" {
			sess = c
		}
	}
	if w.Code != http.StatusSeeOther || sess == nil {
		t.Fatalf("sign-in callback = %d %s", w.Code, w.Body)
	}
	page := httptest.NewRequest("GET", "/", nil)
	page.AddCookie(sess)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, page)
	m := csrfMeta.FindStringSubmatch(w.Body.String())
	if m == nil {
		t.Fatalf("list page = %d without a CSRF token", w.Code)
	}
	return caller{name: "leader of 4 (WeCom)", cookie: sess, csrf: m[1]}
}

// firstEvent reads the first progress event of target's stream.
func firstEvent(t *testing.T, h http.Handler, c caller, target string) (int, map[string]any) {
	t.Helper()
	ts := httptest.NewServer(h)
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+target, nil)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else {
		req.AddCookie(c.cookie)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var p map[string]any
			_ = json.Unmarshal([]byte(d), &p)
			return resp.StatusCode, p
		}
	}
	return resp.StatusCode, nil
}

// TestScopeOnRealServices is issue 31's attacker's table on real
// services. A notice to departments 3 and 4, two of whose people read
// it (one in each); a notice to department 3 alone; a notice of another
// app. A department leader of 4 signed in with WeCom and a token
// {role: viewer, corp, departments: [4]} get exactly department 4's
// numbers and rows from every endpoint, equal to each other, and no
// UserID or name of anyone else; the notice to 3 is 404 to them; only
// the leader may remind, and its reminder reaches its unread people
// only (what the fake WeCom was sent); neither may recall, change,
// cancel or send. A sender of hr cannot send, remind, recall or manage
// anything through it. No audit row of a scoped principal claims more
// people than its scope. The leader, once the directory says they left,
// is signed out at the next sync.
func TestScopeOnRealServices(t *testing.T) {
	if !testenv.Real() {
		t.Skip("YIDU_TEST_REAL=1 runs it against MariaDB and Redis")
	}
	ctx := context.Background()
	db := testenv.MySQL(t)
	rdb, prefix := testenv.Redis(t)
	corp := testenv.RandomName("corp")
	fake.SetCorp(corpOf(corp, true))

	mapper, err := idmap.New(db, idmap.Options{})
	testenv.Check(t, "idmap.New", err)
	wdir, err := wecom.NewDirectory(wecom.App{CorpID: corp, AgentID: hrAgent, Secret: hrSecret}, wecom.DirectoryOptions{})
	testenv.Check(t, "wecom.NewDirectory", err)
	syncer, err := idmap.NewSyncer(mapper, map[string]idmap.Directory{corp: wdir}, idmap.Options{})
	testenv.Check(t, "idmap.NewSyncer", err)
	sync := func() {
		t.Helper()
		if _, err := syncer.Sync(ctx, corp); err != nil {
			t.Fatalf("sync: %v", err)
		}
	}
	sync()

	bms, err := bitmap.New(rdb, bitmap.Options{Prefix: prefix})
	testenv.Check(t, "bitmap.New", err)
	t.Cleanup(bms.Close)
	apps := []yidu.App{
		{Name: "hr", CorpID: corp, AgentID: hrAgent, ReadButtonKey: "read_ok"},
		{Name: "it", CorpID: corp, AgentID: itAgent, ReadButtonKey: "read_ok"},
	}
	wapps := []wecom.App{{CorpID: corp, AgentID: hrAgent, Secret: hrSecret}, {CorpID: corp, AgentID: itAgent, Secret: itSecret}}
	reg, err := tracker.New(db, mapper, bms, tracker.Options{Apps: apps,
		Sender: wecom.NewSender(wapps, wecom.SenderOptions{Rate: 1000, Burst: 100})})
	testenv.Check(t, "tracker.New", err)
	now := time.Now().UTC().Truncate(time.Second)
	clock := func() time.Time { return now }
	acc, err := access.New(access.Config{LeadersSee: true}, mapper, clock)
	testenv.Check(t, "access.New", err)
	camps, err := store.New(db, store.Options{Directory: mapper, Apps: apps, Now: clock})
	testenv.Check(t, "store.New", err)
	aud := audit.NewMySQL(db)
	ledger, err := store.NewReminderLog(db, "", 0, clock, nil)
	testenv.Check(t, "store.NewReminderLog", err)
	srv, err := newServer(reg, bms, mapper, deps{
		Access: acc, Ledger: ledger, Sessions: webedge.DashboardSessions(rdb, prefix),
		Tokens: []access.Token{
			{Name: "v4", Token: viewerTok, Grant: access.Grant{Role: yidu.RoleViewer, Scope: yidu.Scope{Corp: corp, Departments: []int64{4}}}},
			{Name: "shr", Token: senderTok, Grant: access.Grant{Role: yidu.RoleSender, Scope: yidu.Scope{Corp: corp, Apps: []string{"hr"}}}},
			{Name: "admin", Token: adminTok, Corps: []string{corp}},
		},
		Campaigns: camps,
		Options: dashboard.Options{Apps: apps, Now: clock, PublicURL: publicURL, Audit: aud, AuditLog: aud,
			WeCom: &dashboard.WeComLogin{CorpID: corp, AgentID: hrAgent, Access: acc,
				Endpoints: access.Endpoints{OAuthBase: wecomBase, LoginBase: wecomBase},
				States:    access.NewStates(rdb, prefix), OAuth: wecom.NewOAuth(wapps)}},
	})
	testenv.Check(t, "dashboard.New", err)
	t.Cleanup(srv.Close)
	h := srv.Routes()

	admin := caller{name: "admin", token: adminTok}
	sender := caller{name: "sender of hr", token: senderTok}
	viewer := caller{name: "viewer token of 4", token: viewerTok}

	// The notices, sent through the fake WeCom by the admin.
	for _, n := range []struct{ msgid, app, audience string }{
		{"n1", "hr", `{"departments":[3,4]}`},
		{"n3", "hr", `{"departments":[3]}`},
		{"nit", "it", `{"departments":[3,4]}`},
		{"nrecall", "hr", `{"userids":["eng-dan","sales-amy"]}`},
	} {
		w := admin.do(t, h, "POST", "/api/v1/messages", `{"msgid":"`+n.msgid+`","app":"`+n.app+`","title":"放假通知 `+n.msgid+`","audience":`+n.audience+`,"send":true}`)
		if w.Code != http.StatusCreated {
			t.Fatalf("register %s = %d %s", n.msgid, w.Code, w.Body)
		}
	}
	// sales-amy and eng-dan read n1 (flushed to MySQL as flushd does, and
	// into the live bitmaps).
	uid := func(userID string) uint32 {
		u, ok, err := mapper.Lookup(ctx, corp, userID)
		if err != nil || !ok {
			t.Fatalf("Lookup(%s) = %v %v", userID, ok, err)
		}
		return u
	}
	_, err = db.ExecContext(ctx, `UPDATE message_read_record SET is_read = 1, source = 1, read_time = ?, button_at = read_time
		WHERE corp_id = ? AND msgid = 'n1' AND uid IN (?, ?)`, now.Add(-time.Minute), corp, uid("sales-amy"), uid("eng-dan"))
	testenv.Check(t, "flush reads", err)
	m1, rec, read, signals, ok, err := reg.LoadReads(ctx, corp, "n1")
	if err != nil || !ok || read.GetCardinality() != 2 {
		t.Fatalf("LoadReads = %v %v, %d read", ok, err, read.GetCardinality())
	}
	testenv.Check(t, "RestoreReads", bms.RestoreReads(ctx, m1, rec, read, signals))

	leader := signIn(t, h, leaderID)
	scopedCallers := []caller{leader, viewer}

	// Every GET of n1, for comparing the two scoped callers.
	gets := []string{
		"/api/v1/messages", "/api/v1/messages?q=" + url.QueryEscape("放假"), "/api/v1/messages/n1", "/api/v1/messages/n1/progress",
		"/api/v1/messages/n1/departments", "/api/v1/messages/n1/recipients", "/api/v1/messages/n1/recipients?state=unread",
		"/api/v1/messages/n1/recipients?state=read", "/api/v1/messages/n1/recipients?q=" + url.QueryEscape("销售"),
		"/api/v1/messages/n1/recipients?q=sales", "/api/v1/messages/n1/export.csv", "/api/v1/messages/n1/export.csv?state=unread",
		"/api/v1/messages?state=scheduled",
	}
	answers := map[string][]string{}
	for _, c := range scopedCallers {
		t.Run(c.name, func(t *testing.T) {
			noneOutside := func(what, body string) {
				t.Helper()
				for _, who := range outside {
					if strings.Contains(body, who) {
						t.Errorf("%s holds %s (outside department 4):\n%s", what, who, body)
					}
				}
			}
			for _, path := range gets {
				w := c.do(t, h, "GET", path, "")
				if w.Code != http.StatusOK {
					t.Errorf("GET %s = %d %s", path, w.Code, w.Body)
				}
				noneOutside("GET "+path, w.Body.String())
				answers[c.name] = append(answers[c.name], path+" "+w.Body.String())
			}
			var list struct {
				Messages []struct {
					MsgID      string `json:"msgid"`
					Recipients int64  `json:"recipients"`
				} `json:"messages"`
			}
			_ = json.Unmarshal(c.do(t, h, "GET", "/api/v1/messages", "").Body.Bytes(), &list)
			got := map[string]int64{}
			for _, m := range list.Messages {
				got[m.MsgID] = m.Recipients
			}
			if want := map[string]int64{"n1": dept4Count, "nit": dept4Count, "nrecall": 1}; !mapsEqual(got, want) {
				t.Errorf("list = %v, want %v (n3 has nobody of department 4)", got, want)
			}
			var p struct {
				Recipients, Read int64
				BySignal         yidu.SignalCounts `json:"by_signal"`
				Curve            []struct{ Reads int64 }
			}
			_ = json.Unmarshal(c.do(t, h, "GET", "/api/v1/messages/n1/progress", "").Body.Bytes(), &p)
			curve := int64(0)
			for _, pt := range p.Curve {
				curve += pt.Reads
			}
			if p.Recipients != dept4Count || p.Read != 1 || p.BySignal.Button != 1 || curve != 1 {
				t.Errorf("progress = %+v (curve %d), want 1 of 3 read, 1 button, 1 on the curve", p, curve)
			}
			var ds struct {
				Departments []struct {
					ID               int64
					Recipients, Read int64
				}
			}
			_ = json.Unmarshal(c.do(t, h, "GET", "/api/v1/messages/n1/departments", "").Body.Bytes(), &ds)
			if len(ds.Departments) != 1 || ds.Departments[0].ID != 4 || ds.Departments[0].Recipients != dept4Count || ds.Departments[0].Read != 1 {
				t.Errorf("departments = %+v, want department 4 only, 1 of 3", ds.Departments)
			}
			var rs struct {
				Items []struct {
					UserID string `json:"userid"`
				}
			}
			_ = json.Unmarshal(c.do(t, h, "GET", "/api/v1/messages/n1/recipients", "").Body.Bytes(), &rs)
			var ids []string
			for _, it := range rs.Items {
				ids = append(ids, it.UserID)
			}
			slices.Sort(ids)
			if want := []string{"eng-dan", leaderID, "eng-eve"}; !slices.Equal(ids, sorted(want)) {
				t.Errorf("recipients = %v, want %v", ids, sorted(want))
			}
			if w := c.do(t, h, "GET", "/api/v1/messages/n1/export.csv", ""); strings.Count(strings.TrimSpace(w.Body.String()), "\n") != dept4Count {
				t.Errorf("export.csv has %d lines after the header, want %d:\n%s", strings.Count(strings.TrimSpace(w.Body.String()), "\n"), dept4Count, w.Body)
			}
			if code, ev := firstEvent(t, h, c, "/api/v1/messages/n1/events"); code != 200 || ev["recipients"] != float64(dept4Count) || ev["read"] != float64(1) {
				t.Errorf("SSE first event = %d %v, want 1 of 3", code, ev)
			}
			if code, _ := firstEvent(t, h, c, "/api/v1/messages/n3/events"); code != http.StatusNotFound {
				t.Errorf("SSE of n3 = %d, want 404", code)
			}
			// n3 (department 3 only) is missing to them, everywhere.
			for _, rt := range []struct{ method, path, body string }{
				{"GET", "/api/v1/messages/n3", ""}, {"GET", "/api/v1/messages/n3/progress", ""},
				{"GET", "/api/v1/messages/n3/departments", ""}, {"GET", "/api/v1/messages/n3/recipients", ""},
				{"GET", "/api/v1/messages/n3/recipients?q=sales", ""}, {"GET", "/api/v1/messages/n3/export.csv", ""},
				{"GET", "/api/v1/messages/n3/follow_up", ""}, {"POST", "/api/v1/messages/n3/remind", "{}"},
				{"POST", "/api/v1/messages/n3/recall", "{}"}, {"PATCH", "/api/v1/messages/n3", `{"title":"x"}`},
				{"POST", "/api/v1/messages/n3/cancel", ""}, {"POST", "/api/v1/messages/n3/send", ""},
				{"PUT", "/api/v1/messages/n3/follow_up", `{"reminders":1}`},
			} {
				w := c.do(t, h, rt.method, rt.path, rt.body)
				if w.Code != http.StatusNotFound {
					t.Errorf("%s %s = %d, want 404", rt.method, rt.path, w.Code)
				}
				noneOutside(rt.method+" "+rt.path, w.Body.String())
			}
			// Reading only: no change to n1, no sending, no audit.
			for _, rt := range []struct{ method, path, body string }{
				{"POST", "/api/v1/messages/n1/recall", "{}"}, {"PATCH", "/api/v1/messages/n1", `{"title":"x"}`},
				{"POST", "/api/v1/messages/n1/cancel", ""}, {"POST", "/api/v1/messages/n1/send", ""},
				{"GET", "/api/v1/messages/n1/follow_up", ""}, {"PUT", "/api/v1/messages/n1/follow_up", `{"reminders":1}`},
				{"GET", "/api/v1/audit", ""},
			} {
				if w := c.do(t, h, rt.method, rt.path, rt.body); w.Code != http.StatusForbidden {
					t.Errorf("%s %s = %d, want 403", rt.method, rt.path, w.Code)
				}
			}
			if c.cookie != nil {
				// The pages: the list and the notice's, in Chinese, show
				// nobody outside; a leader composes nothing.
				for _, rt := range []struct {
					path string
					want int
				}{{"/", 200}, {"/m/n1", 200}, {"/m/n3", 404}, {"/new", 403}} {
					r := httptest.NewRequest("GET", rt.path, nil)
					r.AddCookie(c.cookie)
					r.Header.Set("Accept-Language", "zh-CN")
					w := httptest.NewRecorder()
					h.ServeHTTP(w, r)
					if w.Code != rt.want || !strings.Contains(w.Body.String(), `lang="zh-CN"`) {
						t.Errorf("page %s = %d, want %d in zh-CN", rt.path, w.Code, rt.want)
					}
					noneOutside("page "+rt.path, w.Body.String())
					if rt.path == "/" && strings.Contains(w.Body.String(), `id="new-notice"`) {
						t.Errorf("the list page offers a leader a new notice")
					}
				}
			}
			for _, rt := range []struct{ method, path, body string }{
				{"POST", "/api/v1/messages", `{"msgid":"x-` + c.name[:1] + `","app":"hr","title":"t","audience":{"userids":["eng-dan"]},"send":true}`},
				{"GET", "/api/v1/directory/people?app=hr&q=sales", ""}, {"GET", "/api/v1/directory/departments?app=hr", ""},
				{"POST", "/api/v1/audience/preview", `{"app":"hr","audience":{"all":true}}`},
			} {
				if w := c.do(t, h, rt.method, rt.path, rt.body); w.Code != http.StatusBadRequest {
					t.Errorf("%s %s = %d, want 400 (no app of theirs)", rt.method, rt.path, w.Code)
				}
			}
		})
	}
	if a, b := answers[leader.name], answers[viewer.name]; !slices.Equal(a, b) {
		t.Errorf("a scoped token and a leader of the same scope answer differently:\n%q\n%q", a, b)
	}

	t.Run("remind", func(t *testing.T) {
		if w := viewer.do(t, h, "POST", "/api/v1/messages/n1/remind", "{}"); w.Code != http.StatusForbidden {
			t.Errorf("viewer token's remind = %d, want 403 (a viewer reads only)", w.Code)
		}
		before := len(fake.Sent())
		w := leader.do(t, h, "POST", "/api/v1/messages/n1/remind", "{}")
		var out struct{ Reminded int }
		if json.Unmarshal(w.Body.Bytes(), &out) != nil || w.Code != http.StatusOK || out.Reminded != 2 {
			t.Fatalf("leader's remind = %d %s, want 2 reminded", w.Code, w.Body)
		}
		var to []string
		for _, s := range fake.Sent()[before:] {
			if s.CorpID == corp {
				to = append(to, strings.Split(s.Body["touser"].(string), "|")...)
			}
		}
		slices.Sort(to)
		if want := sorted([]string{leaderID, "eng-eve"}); !slices.Equal(to, want) {
			t.Errorf("the leader's reminder went to %v, want its unread people %v", to, want)
		}
	})

	t.Run("sender of hr", func(t *testing.T) {
		for _, rt := range []struct {
			method, path, body string
			want               int
		}{
			{"GET", "/api/v1/messages/nit", "", 404},
			{"GET", "/api/v1/messages/nit/progress", "", 404},
			{"POST", "/api/v1/messages/nit/remind", "{}", 404},
			{"POST", "/api/v1/messages/nit/recall", "{}", 404},
			{"POST", "/api/v1/messages", `{"msgid":"s-it","app":"it","title":"t","audience":{"userids":["eng-dan"]},"send":true}`, 400},
			{"POST", "/api/v1/messages", `{"msgid":"s-it2","app":"it","title":"t","audience":{"userids":["eng-dan"]},"send":true,"send_at":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`, 400},
			{"GET", "/api/v1/directory/people?app=it&q=eng", "", 400},
			{"GET", "/api/v1/audit", "", 403},
			{"GET", "/api/v1/messages/n1/progress", "", 200},
			{"POST", "/api/v1/messages/nrecall/recall", "{}", 200},
			{"POST", "/api/v1/messages", `{"msgid":"s-hr","app":"hr","title":"t","audience":{"userids":["eng-dan"]},"send":true}`, 201},
			// Its own app's scheduled notice is its to manage.
			{"POST", "/api/v1/messages", `{"msgid":"sched-hr","app":"hr","title":"t","audience":{"userids":["eng-dan"]},"send":true,"send_at":"` + now.Add(time.Hour).Format(time.RFC3339) + `"}`, 201},
			{"PATCH", "/api/v1/messages/sched-hr", `{"title":"改"}`, 200},
			{"GET", "/api/v1/messages/sched-hr", "", 200},
			{"POST", "/api/v1/messages/sched-hr/cancel", "", 200},
		} {
			if w := sender.do(t, h, rt.method, rt.path, rt.body); w.Code != rt.want {
				t.Errorf("%s %s = %d, want %d: %s", rt.method, rt.path, w.Code, rt.want, w.Body)
			}
		}
		// A notice the admin scheduled through it: missing to the sender.
		at := now.Add(time.Hour).Format(time.RFC3339)
		if w := admin.do(t, h, "POST", "/api/v1/messages", `{"msgid":"sched-it","app":"it","title":"t","audience":{"userids":["eng-dan"]},"send":true,"send_at":"`+at+`"}`); w.Code != http.StatusCreated {
			t.Fatalf("admin schedules through it = %d %s", w.Code, w.Body)
		}
		for _, rt := range []struct{ method, path, body string }{
			{"GET", "/api/v1/messages/sched-it", ""}, {"PATCH", "/api/v1/messages/sched-it", `{"title":"x"}`},
			{"POST", "/api/v1/messages/sched-it/cancel", ""}, {"POST", "/api/v1/messages/sched-it/send", ""},
		} {
			if w := sender.do(t, h, rt.method, rt.path, rt.body); w.Code != http.StatusNotFound {
				t.Errorf("%s %s = %d, want 404", rt.method, rt.path, w.Code)
			}
			for _, c := range scopedCallers {
				if w := c.do(t, h, rt.method, rt.path, rt.body); w.Code != http.StatusNotFound {
					t.Errorf("%s: %s %s = %d, want 404", c.name, rt.method, rt.path, w.Code)
				}
			}
		}
		if w := sender.do(t, h, "GET", "/api/v1/messages?state=scheduled", ""); strings.Contains(w.Body.String(), "sched-it") {
			t.Errorf("the sender's scheduled list shows it's notice: %s", w.Body)
		}
		// ... and the admin's own.
		if w := admin.do(t, h, "GET", "/api/v1/messages/sched-it", ""); w.Code != http.StatusOK {
			t.Errorf("admin GET sched-it = %d", w.Code)
		}
	})

	t.Run("admin sees everyone", func(t *testing.T) {
		var p struct{ Recipients, Read int64 }
		_ = json.Unmarshal(admin.do(t, h, "GET", "/api/v1/messages/n1/progress", "").Body.Bytes(), &p)
		if p.Recipients != 5 || p.Read != 2 {
			t.Errorf("admin's progress = %+v, want 2 of 5", p)
		}
		if w := admin.do(t, h, "GET", "/api/v1/messages/n3/export.csv", ""); w.Code != 200 || !strings.Contains(w.Body.String(), "sales-amy") {
			t.Errorf("admin's export of n3 = %d %s", w.Code, w.Body)
		}
	})

	t.Run("audit rows claim no more than the scope", func(t *testing.T) {
		rows, err := db.QueryContext(ctx, `SELECT actor, action, people, outcome FROM audit_events WHERE actor IN (?, ?)`, leaderID, "v4")
		testenv.Check(t, "query audit", err)
		defer rows.Close()
		exports := map[string]int{}
		n := 0
		for rows.Next() {
			var actor, action, outcome string
			var people int64
			testenv.Check(t, "scan", rows.Scan(&actor, &action, &people, &outcome))
			n++
			if people > dept4Count {
				t.Errorf("audit row %s %s %s claims %d people, more than the scope's %d", actor, action, outcome, people, dept4Count)
			}
			if action == string(yidu.ActionExport) && outcome == "ok" {
				exports[actor]++
			}
			if action == string(yidu.ActionRemind) && outcome == "ok" && (actor != leaderID || people != 2) {
				t.Errorf("remind row %s %d, want the leader's of 2", actor, people)
			}
		}
		testenv.Check(t, "rows", rows.Err())
		if exports[leaderID] == 0 || exports["v4"] == 0 {
			t.Errorf("export rows by actor = %v, want the exports of both", exports)
		}
	})

	t.Run("a leader who left is signed out at the next sync", func(t *testing.T) {
		if w := leader.do(t, h, "GET", "/api/v1/messages/n1/progress", ""); w.Code != http.StatusOK {
			t.Fatalf("before leaving: %d", w.Code)
		}
		fake.SetCorp(corpOf(corp, false))
		sync()
		if w := leader.do(t, h, "GET", "/api/v1/messages/n1/progress", ""); w.Code != http.StatusUnauthorized {
			t.Errorf("after leaving: API = %d, want 401", w.Code)
		}
		if w := leader.do(t, h, "GET", "/", ""); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/login") {
			t.Errorf("after leaving: page = %d to %q, want a redirect to /login", w.Code, w.Header().Get("Location"))
		}
	})
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
