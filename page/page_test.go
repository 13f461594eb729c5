package page

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
	"github.com/yidu-io/yidu/attachment"
	"github.com/yidu-io/yidu/audit"
	"github.com/yidu-io/yidu/bitmap"
	"github.com/yidu-io/yidu/content"
	"github.com/yidu-io/yidu/internal/clientip"
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
	"github.com/yidu-io/yidu/wecom"
)

const (
	corp      = "wx5823bf96d3bd56c7"
	wecomUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0 wxwork/4.1.20"
	desktopUA = "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0"
)

type fakeReaders struct{}

func (fakeReaders) Reader(_ context.Context, c, userID string, fresh bool) (Reader, bool, error) {
	switch userID {
	case "zhangsan":
		return Reader{UID: 1, Name: "张三"}, true, nil
	case "lisi":
		return Reader{UID: 2, Name: "李四"}, true, nil
	case "dave":
		return Reader{UID: 3, Name: "Dave", Left: true}, true, nil
	case "wangwu":
		return Reader{UID: 4, Name: "王五"}, true, nil
	case "eve":
		// Left, but a copy of the directory (idmap's roster) has not seen
		// it yet.
		return Reader{UID: 5, Name: "Eve", Left: fresh}, true, nil
	case "frank":
		// Left and came back.
		return Reader{UID: 6, Name: "Frank"}, true, nil
	}
	return Reader{}, false, nil
}

func (fakeReaders) QueueRecipient(_ context.Context, _ redis.Pipeliner, c, msgID string, uid uint32) func() (bool, error) {
	return func() (bool, error) {
		return (msgID == "perf" || msgID == "ops-notice") && (uid == 1 || uid == 3 || uid == 4 || uid == 5 || uid == 6), nil
	}
}

// NoticeApp: perf is hr's, ops-notice ops's.
func (fakeReaders) NoticeApp(_ context.Context, c, msgID string) (string, bool, error) {
	switch msgID {
	case "perf":
		return "hr", true, nil
	case "ops-notice":
		return "ops", true, nil
	}
	return "", false, nil
}

type fakeNotices struct{ versions []notice.Version }

func (f *fakeNotices) Get(_ context.Context, c, msgid string, n int) (notice.Version, error) {
	if msgid != "perf" || n > len(f.versions) {
		return notice.Version{}, notice.ErrNotFound
	}
	if n == 0 {
		n = len(f.versions)
	}
	return f.versions[n-1], nil
}

func (f *fakeNotices) List(_ context.Context, c, msgid string) ([]notice.Version, error) {
	if msgid != "perf" {
		return nil, nil
	}
	return f.versions, nil
}

type fakeBlobs struct{ dir string }

func (f fakeBlobs) Open(_ context.Context, sum content.Hash) (*os.File, error) {
	return os.Open(filepath.Join(f.dir, sum.String()))
}

// fakeReads records the page's signals; with fail set it refuses them
// (Kafka and the spool down).
type fakeReads struct {
	mu     sync.Mutex
	links  []string
	events []string // "<userid>/<msgid>/<signal>/v<N>/<ip>"
	fail   bool
	// refuse: the read path keeps nothing (not a recipient there).
	refuse bool
	// left is, per call, the time its context had left (-1: no
	// deadline).
	left []time.Duration
}

func (f *fakeReads) PageSignal(ctx context.Context, sig yidu.Signal, c string, agentID int64, userID, msgID string, _ time.Time, ev bitmap.PageEvent) (int, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		f.left = append(f.left, time.Until(d))
	} else {
		f.left = append(f.left, -1)
	}
	if f.fail {
		return 0, false, errors.New("kafka down")
	}
	if f.refuse {
		return 0, false, nil
	}
	if sig == yidu.SignalLink {
		f.links = append(f.links, userID+"/"+msgID)
		return 1, true, nil
	}
	f.events = append(f.events, fmt.Sprintf("%s/%s/%s/v%d/%s", userID, msgID, sig, ev.Version, ev.IP))
	return 0, true, nil
}

func (f *fakeReads) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// fakeArchive is page_signals: what flushd archived.
type fakeArchive struct {
	mu   sync.Mutex
	rows map[string]bool // "<uid>/<signal>/<version>"
}

func (f *fakeArchive) HasPageSignal(_ context.Context, c, msgID string, uid uint32, sig yidu.Signal, version int) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rows[fmt.Sprintf("%d/%s/%d", uid, sig, version)], nil
}

// fakeOAuth knows codes "code-<userid>", and "code-<userid>~<n>" for a
// member's later sign-ins (a code is used once).
type fakeOAuth struct{}

func (fakeOAuth) UserID(_ context.Context, c string, agentID int64, code string) (string, error) {
	if u, ok := strings.CutPrefix(code, "code-"); ok && c == corp && agentID == 1000002 {
		u, _, _ = strings.Cut(u, "~")
		if u == "outsider" {
			return "", nil
		}
		return u, nil
	}
	return "", errors.New("40029 invalid code")
}

type fakeAudit struct {
	mu     sync.Mutex
	events []audit.Event
}

func (f *fakeAudit) Record(_ context.Context, e audit.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
	return nil
}

type fixture struct {
	h       http.Handler
	reads   *fakeReads
	archive *fakeArchive
	rdb     redis.UniversalClient
	prefix  string
	now     *atomic.Int64 // unix ms
	audit   *fakeAudit
	pdf     []byte
	pdfAt   attachment.Attachment
	// marks counts the shared pipeline's uses (Options.Marks).
	marks *countingMarks
}

// countingMarks is the shared pipeline of the tests: each use a round
// trip of its own, counted.
type countingMarks struct {
	ownRoundTrip
	pipelined atomic.Int64
}

func (c *countingMarks) Pipelined(ctx context.Context, fn func(p redis.Pipeliner)) error {
	c.pipelined.Add(1)
	return c.ownRoundTrip.Pipelined(ctx, fn)
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	rdb, prefix := testenv.Redis(t)
	dir := t.TempDir()
	pdf := []byte("%PDF-1.7\n% the scoring table\n")
	sum := content.Sum(pdf)
	if err := os.WriteFile(filepath.Join(dir, sum.String()), pdf, 0o600); err != nil {
		t.Fatal(err)
	}
	att := attachment.Attachment{ID: "att_1", SHA256: sum.String(), Name: "评分表.pdf", Type: content.TypePDF, Size: int64(len(pdf))}
	html1, _ := content.Render("# 第四条\n\n考核周期为一年。")
	html2, _ := content.Render("# 第四条\n\n考核周期为半年。")
	ns := &fakeNotices{versions: []notice.Version{
		{N: 1, Title: "2026年度绩效考核办法", HTML: html1, Attachments: []attachment.Attachment{att}, SHA256: content.VersionHash("t", html1, nil)},
		{N: 2, Title: "2026年度绩效考核办法", HTML: html2, Attachments: []attachment.Attachment{att}, Reacknowledge: true,
			Settings: notice.Settings{ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 30}, Note: changeNote},
	}}
	f := &fixture{reads: &fakeReads{}, archive: &fakeArchive{rows: map[string]bool{}}, rdb: rdb, prefix: prefix, now: &atomic.Int64{}, audit: &fakeAudit{}, pdf: pdf, pdfAt: att,
		marks: &countingMarks{ownRoundTrip: ownRoundTrip{rdb}}}
	f.now.Store(time.Date(2026, 12, 3, 1, 5, 0, 0, time.UTC).UnixMilli())
	s, err := New(fakeReaders{}, ns, fakeBlobs{dir}, f.reads, fakeOAuth{}, f.audit, Options{
		PublicURL: "https://read.example.com", Apps: []App{{Name: "hr", CorpID: corp, AgentID: 1000002, ViewKey: testViewKey}},
		Endpoints: access.DefaultEndpoints, States: access.NewStates(rdb, prefix), Redis: rdb, Prefix: prefix,
		Archive: f.archive, Marks: f.marks,
		Now:     func() time.Time { return time.UnixMilli(f.now.Load()).UTC() },
		Records: fakeRecords{},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.h = s.Routes()
	return f
}

// browser is one browser's cookies against the fixture.
type browser struct {
	f       *fixture
	ua      string
	cookies map[string]*http.Cookie
	// againAfterRevoke: its sign-ins make the session a second time
	// (the member's sessions were revoked).
	againAfterRevoke int
}

func (b *browser) get(t testing.TB, target string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("User-Agent", b.ua)
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.f.h.ServeHTTP(w, r)
	// A page states its length (render.go): it must be the body's, and a
	// reader's escaped name or UserID must not change it.
	if n := w.Header().Get("Content-Length"); n != "" && n != strconv.Itoa(w.Body.Len()) {
		t.Fatalf("GET %s: Content-Length %s, body %d bytes", target, n, w.Body.Len())
	}
	for _, c := range w.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return w
}

// signIn opens target and goes through WeCom's sign-in as userID; it
// returns the answer of the sign-in's return.
func (b *browser) signIn(t testing.TB, target, userID string) *httptest.ResponseRecorder {
	t.Helper()
	return b.signInCode(t, target, "code-"+userID)
}

// signInCode is signIn with WeCom's code.
func (b *browser) signInCode(t testing.TB, target, code string) *httptest.ResponseRecorder {
	t.Helper()
	w := b.get(t, target)
	if w.Code != http.StatusFound {
		t.Fatalf("GET %s without a session = %d; want 302 to WeCom", target, w.Code)
	}
	to, err := url.Parse(w.Header().Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	q := to.Query()
	if q.Get("redirect_uri") != "https://read.example.com/r/hr/signin" || q.Get("appid") != corp || q.Get("agentid") != "1000002" {
		t.Fatalf("sign-in URL %s", to)
	}
	if strings.Contains(to.String(), "zhangsan") || strings.Contains(to.String(), "perf") {
		t.Fatalf("sign-in URL %s carries the page or an identity", to)
	}
	// The way back from WeCom: the state, the code and the new session
	// each in the read path's shared pipeline, no round trip of its own.
	var before int64
	if b.f.marks != nil {
		before = b.f.marks.pipelined.Load()
	}
	w = b.get(t, "/r/hr/signin?code="+url.QueryEscape(code)+"&state="+q.Get("state"))
	if w.Code == http.StatusFound && b.f.marks != nil {
		if n, want := b.f.marks.pipelined.Load()-before, 3+int64(b.againAfterRevoke); n != want {
			t.Errorf("a sign-in used the shared pipeline %d times; want %d (state, code, session, again after a revocation)", n, want)
		}
	}
	return w
}

func TestReadingPage(t *testing.T) {
	f := newFixture(t)

	t.Run("in WeCom: OAuth2, then the page", func(t *testing.T) {
		b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		w := b.get(t, "/r/hr/perf")
		if loc := w.Header().Get("Location"); w.Code != 302 || !strings.HasPrefix(loc, "https://open.weixin.qq.com/connect/oauth2/authorize?") || !strings.Contains(loc, "scope=snsapi_base") {
			t.Fatalf("GET = %d %s; want WeCom's OAuth2 (snsapi_base)", w.Code, loc)
		}
		b.cookies = map[string]*http.Cookie{}
		w = b.signIn(t, "/r/hr/perf", "zhangsan")
		if w.Code != 302 || w.Header().Get("Location") != "/r/hr/perf" {
			t.Fatalf("sign-in return = %d %q; want 302 to the page", w.Code, w.Header().Get("Location"))
		}
		c := b.cookies[sessionCookie]
		if c == nil || !c.HttpOnly || !c.Secure || c.Path != "/r/" || c.Domain != "" {
			t.Fatalf("session cookie = %+v; want HttpOnly, Secure, host-only, path /r/", c)
		}
		w = b.get(t, "/r/hr/perf")
		body := w.Body.String()
		if w.Code != 200 {
			t.Fatalf("page = %d: %s", w.Code, body)
		}
		for _, want := range []string{"2026年度绩效考核办法", "考核周期为半年。", `id="notice-end"`, `id="watermark"`, "张三 zhangsan 2026-12-03 09:05",
			`href="perf/a/` + f.pdfAt.SHA256 + `"`, "评分表.pdf", "第 2 版"} {
			if !strings.Contains(body, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if got := f.reads.links; len(got) != 1 || got[0] != "zhangsan/perf" {
			t.Errorf("link signals = %v; want one for zhangsan", got)
		}
		// Version 1 stays readable.
		if w := b.get(t, "/r/hr/perf?v=1"); w.Code != 200 || !strings.Contains(w.Body.String(), "考核周期为一年。") || !strings.Contains(w.Body.String(), "查看最新版") {
			t.Errorf("?v=1 = %d; want version 1 with a pointer to the latest", w.Code)
		}
		if w := b.get(t, "/r/hr/perf?v=3"); w.Code != 404 {
			t.Errorf("?v=3 = %d; want 404", w.Code)
		}
		// The attachment, from the cache, as the type sniffed.
		w = b.get(t, "/r/hr/perf/a/"+f.pdfAt.SHA256)
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/pdf" || w.Body.String() != string(f.pdf) {
			t.Errorf("attachment = %d %q", w.Code, w.Header().Get("Content-Type"))
		}
		if w := b.get(t, "/r/hr/perf/a/"+content.Sum([]byte("other")).String()); w.Code != 404 {
			t.Errorf("an attachment not of the notice = %d; want 404", w.Code)
		}
	})

	t.Run("desktop: WeCom's web login", func(t *testing.T) {
		b := &browser{f: f, ua: desktopUA, cookies: map[string]*http.Cookie{}}
		w := b.get(t, "/r/hr/perf")
		if loc := w.Header().Get("Location"); w.Code != 302 || !strings.HasPrefix(loc, "https://login.work.weixin.qq.com/wwlogin/sso/login?") {
			t.Fatalf("GET = %d %s; want WeCom's web login", w.Code, loc)
		}
	})

	for _, tc := range []struct{ name, userID, detail string }{
		{"a non-recipient", "lisi", "not a recipient"},
		{"a member who left", "dave", "left the company"},
		{"someone the directory lacks", "ghost", "not in the directory"},
	} {
		t.Run(tc.name+" gets 404 and an audit row", func(t *testing.T) {
			before, links := len(f.audit.events), len(f.reads.links)
			b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
			b.signIn(t, "/r/hr/perf", tc.userID)
			w := b.get(t, "/r/hr/perf")
			if w.Code != 404 || strings.Contains(w.Body.String(), "考核") || strings.Contains(w.Body.String(), "data-view") {
				t.Fatalf("page = %d; want 404 without the text or a view", w.Code)
			}
			if w := b.get(t, "/r/hr/perf/a/"+f.pdfAt.SHA256); w.Code != 404 {
				t.Errorf("attachment = %d; want 404", w.Code)
			}
			if len(f.audit.events) != before+2 {
				t.Fatalf("audit rows = %d; want 2 more", len(f.audit.events)-before)
			}
			e := f.audit.events[before]
			if e.Action != yidu.ActionPageDenied || e.Actor != tc.userID || e.MsgID != "perf" || e.Detail != tc.detail || e.Outcome != "denied" {
				t.Errorf("audit = %+v", e)
			}
			if len(f.reads.links) != links {
				t.Errorf("a refused visit recorded a link signal")
			}
		})
	}

	t.Run("hostile sign-ins make no session", func(t *testing.T) {
		// Another browser's state (no nonce cookie), a replayed code, an
		// outsider, a state for another page's path.
		victim := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		w := victim.get(t, "/r/hr/perf")
		to, _ := url.Parse(w.Header().Get("Location"))
		attacker := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		if w := attacker.get(t, "/r/hr/signin?code=code-zhangsan&state="+to.Query().Get("state")); w.Code != 400 || attacker.cookies[sessionCookie] != nil {
			t.Errorf("state without its nonce = %d; want 400 and no session", w.Code)
		}
		b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		b.signIn(t, "/r/hr/perf", "zhangsan")
		c := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		if w := c.signIn(t, "/r/hr/perf", "zhangsan"); w.Code != 400 || c.cookies[sessionCookie] != nil {
			t.Errorf("a replayed code = %d; want 400 and no session", w.Code)
		}
		d := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		if w := d.signIn(t, "/r/hr/perf", "outsider"); w.Code != 403 || d.cookies[sessionCookie] != nil {
			t.Errorf("an outsider = %d; want 403 and no session", w.Code)
		}
		// A forged session cookie is no session.
		g := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{sessionCookie: {Name: sessionCookie, Value: "forged"}}}
		if w := g.get(t, "/r/hr/perf"); w.Code != 302 {
			t.Errorf("a forged session = %d; want 302 to sign in", w.Code)
		}
		if w := g.get(t, "/r/hr/perf/a/"+f.pdfAt.SHA256); w.Code != 404 {
			t.Errorf("an attachment without a session = %d; want 404", w.Code)
		}
	})

	t.Run("unknown app or message", func(t *testing.T) {
		b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		for _, target := range []string{"/r/ops/perf", "/r/hr/bad%20id", "/r/hr/perf?v=x"} {
			if w := b.get(t, target); w.Code != 404 && w.Code != 400 {
				t.Errorf("GET %s = %d; want 404 or 400", target, w.Code)
			}
		}
	})

	t.Run("style sheet", func(t *testing.T) {
		b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
		w := b.get(t, "/r/static/page.css")
		if b, _ := io.ReadAll(w.Body); w.Code != 200 || !strings.Contains(string(b), "#watermark") {
			t.Errorf("page.css = %d", w.Code)
		}
	})
}

// TestSignInBounds (issues 46 and 50): sign-ins are bounded per client
// address (through trusted proxies) and in all, and a sign-in beyond a
// bound waits on 请稍候 (429, a page that comes back by itself), never
// 503; it writes no state. Another address still goes through. An
// address whose exchanges keep failing waits too, before anything is
// spent; others do not.
func TestSignInBounds(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	proxies, _ := clientip.ParseProxies([]string{"10.0.0.0/8"})
	s, err := New(fakeReaders{}, &fakeNotices{}, fakeBlobs{t.TempDir()}, &fakeReads{}, fakeOAuth{}, &fakeAudit{}, Options{
		PublicURL: "https://read.example.com", Apps: []App{{Name: "hr", CorpID: corp, AgentID: 1000002, ViewKey: testViewKey}},
		Endpoints: access.DefaultEndpoints, States: access.NewStates(rdb, prefix), Redis: rdb, Prefix: prefix,
		SignInRate: 5, ClientSignInRate: 0.25, TrustedProxies: proxies, Archive: &fakeArchive{},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Routes()
	from := func(target, client string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", target, nil)
		r.RemoteAddr = "10.1.2.3:4567" // the ingress
		r.Header.Set("X-Forwarded-For", client)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	codes := map[int]int{}
	var wait *httptest.ResponseRecorder
	for range 4 {
		w := from("/r/hr/perf", "198.51.100.7")
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests {
			wait = w
		}
	}
	if codes[302] != 1 || codes[429] != 3 {
		t.Fatalf("one address: answers %v; want one 302 (burst 1) and three 429", codes)
	}
	body := wait.Body.String()
	if !strings.Contains(body, "请稍候") || !strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, "url=/r/hr/perf") || wait.Header().Get("Retry-After") == "" {
		t.Errorf("the deferral = %s; want 请稍候 coming back to the page by itself", body)
	}
	if w := from("/r/hr/perf", "198.51.100.8"); w.Code != 302 {
		t.Errorf("another address behind the same proxy = %d; want 302 (its own bound)", w.Code)
	}
	if keys, _ := rdb.Keys(t.Context(), prefix+"*").Result(); len(keys) != 2 {
		t.Fatalf("Redis keys %v; want the two started sign-ins' states", keys)
	}
	// The receiver's bound (5/s, burst 10): many addresses, one each.
	codes = map[int]int{}
	for i := range 20 {
		codes[from("/r/hr/perf", fmt.Sprintf("198.51.101.%d", i)).Code]++
	}
	if codes[503] != 0 || codes[429] == 0 || codes[302] == 0 {
		t.Errorf("many addresses: answers %v; want 302s, then 429s, never 503", codes)
	}
	// Failed exchanges: 20 forged returns from one address, then it waits
	// (no state consumed); another address's return is still examined.
	for range 20 {
		if w := from("/r/hr/signin?code=forged&state=forged", "203.0.113.66"); w.Code != 400 {
			t.Fatalf("a forged return = %d; want 400", w.Code)
		}
	}
	if w := from("/r/hr/signin?code=forged&state=forged", "203.0.113.66"); w.Code != 429 || !strings.Contains(w.Body.String(), "请稍候") {
		t.Errorf("after 20 failures = %d; want 429 请稍候", w.Code)
	}
	if w := from("/r/hr/signin?code=forged&state=forged", "203.0.113.67"); w.Code != 400 {
		t.Errorf("another address's return = %d; want 400 (examined)", w.Code)
	}
}

// busyOAuth answers WeCom's 45009 (api freq out of limit) busy times,
// then the member.
type busyOAuth struct {
	busy  atomic.Int32
	calls atomic.Int32
}

func (o *busyOAuth) UserID(_ context.Context, c string, agentID int64, code string) (string, error) {
	o.calls.Add(1)
	if o.busy.Add(-1) >= 0 {
		return "", &wecom.APIError{API: "auth/getuserinfo", Code: 45009, Msg: "api freq out of limit"}
	}
	return strings.TrimPrefix(code, "code-"), nil
}

// TestSignInWeComBusy (issue 50): WeCom's 45009 on the code exchange is
// backed off and retried within the request, and the member is signed in;
// WeCom busy past the retries sends the member back to the page through
// 请稍候 (a fresh sign-in), never 503.
func TestSignInWeComBusy(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	oauth := &busyOAuth{}
	s, err := New(fakeReaders{}, &fakeNotices{}, fakeBlobs{t.TempDir()}, &fakeReads{}, oauth, &fakeAudit{}, Options{
		PublicURL: "https://read.example.com", Apps: []App{{Name: "hr", CorpID: corp, AgentID: 1000002, ViewKey: testViewKey}},
		Endpoints: access.DefaultEndpoints, States: access.NewStates(rdb, prefix), Redis: rdb, Prefix: prefix, Archive: &fakeArchive{},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{h: s.Routes()}
	oauth.busy.Store(2)
	b := &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	if w := b.signIn(t, "/r/hr/perf", "zhangsan"); w.Code != 302 || w.Header().Get("Location") != "/r/hr/perf" || b.cookies[sessionCookie] == nil {
		t.Fatalf("sign-in through two 45009s = %d %q; want 302 to the page with a session", w.Code, w.Header().Get("Location"))
	}
	if n := oauth.calls.Load(); n != 3 {
		t.Errorf("getuserinfo calls = %d; want 3 (two busy, one answered)", n)
	}
	oauth.busy.Store(10)
	b = &browser{f: f, ua: wecomUA, cookies: map[string]*http.Cookie{}}
	w := b.signIn(t, "/r/hr/perf", "wangwu") // a code not used yet
	if body := w.Body.String(); w.Code != http.StatusTooManyRequests || !strings.Contains(body, "请稍候") || !strings.Contains(body, "url=/r/hr/perf") {
		t.Errorf("sign-in while WeCom stays busy = %d %s; want 429 请稍候 back to the page", w.Code, body)
	}
}
