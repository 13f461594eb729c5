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
	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/notice"
)

const (
	corp      = "wx5823bf96d3bd56c7"
	wecomUA   = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 MicroMessenger/8.0 wxwork/4.1.20"
	desktopUA = "Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0"
)

type fakeReaders struct{}

func (fakeReaders) Reader(_ context.Context, c, userID string) (Reader, bool, error) {
	switch userID {
	case "zhangsan":
		return Reader{UID: 1, Name: "张三"}, true, nil
	case "lisi":
		return Reader{UID: 2, Name: "李四"}, true, nil
	case "dave":
		return Reader{UID: 3, Name: "Dave", Left: true}, true, nil
	case "wangwu":
		return Reader{UID: 4, Name: "王五"}, true, nil
	}
	return Reader{}, false, nil
}

func (fakeReaders) IsRecipient(_ context.Context, c, msgID string, uid uint32) (bool, error) {
	return msgID == "perf" && (uid == 1 || uid == 3 || uid == 4), nil
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
	// left is, per call, the time its context had left (-1: no
	// deadline).
	left []time.Duration
}

func (f *fakeReads) PageSignal(ctx context.Context, sig yidu.Signal, c string, agentID int64, userID, msgID string, _ time.Time, ev bitmap.PageEvent) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		f.left = append(f.left, time.Until(d))
	} else {
		f.left = append(f.left, -1)
	}
	if f.fail {
		return 0, errors.New("kafka down")
	}
	if sig == yidu.SignalLink {
		f.links = append(f.links, userID+"/"+msgID)
		return 1, nil
	}
	f.events = append(f.events, fmt.Sprintf("%s/%s/%s/v%d/%s", userID, msgID, sig, ev.Version, ev.IP))
	return 0, nil
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

// fakeOAuth knows codes "code-<userid>".
type fakeOAuth struct{}

func (fakeOAuth) UserID(_ context.Context, c string, agentID int64, code string) (string, error) {
	if u, ok := strings.CutPrefix(code, "code-"); ok && c == corp && agentID == 1000002 {
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
	now     *atomic.Int64 // unix ms
	audit   *fakeAudit
	pdf     []byte
	pdfAt   attachment.Attachment
}

func newFixture(t *testing.T) *fixture {
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
			Settings: notice.Settings{ReadRule: yidu.ReadRuleAcknowledged, MinReadSeconds: 30}},
	}}
	f := &fixture{reads: &fakeReads{}, archive: &fakeArchive{rows: map[string]bool{}}, rdb: rdb, now: &atomic.Int64{}, audit: &fakeAudit{}, pdf: pdf, pdfAt: att}
	f.now.Store(time.Date(2026, 12, 3, 1, 5, 0, 0, time.UTC).UnixMilli())
	s, err := New(fakeReaders{}, ns, fakeBlobs{dir}, f.reads, fakeOAuth{}, f.audit, Options{
		PublicURL: "https://read.example.com", Apps: []App{{Name: "hr", CorpID: corp, AgentID: 1000002}},
		Endpoints: access.DefaultEndpoints, States: access.NewStates(rdb, prefix), Redis: rdb, Prefix: prefix,
		Archive: f.archive,
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
}

func (b *browser) get(t *testing.T, target string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", target, nil)
	r.Header.Set("User-Agent", b.ua)
	for _, c := range b.cookies {
		r.AddCookie(c)
	}
	w := httptest.NewRecorder()
	b.f.h.ServeHTTP(w, r)
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
func (b *browser) signIn(t *testing.T, target, userID string) *httptest.ResponseRecorder {
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
	return b.get(t, "/r/hr/signin?code=code-"+userID+"&state="+q.Get("state"))
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
			if w.Code != 404 || strings.Contains(w.Body.String(), "考核") {
				t.Fatalf("page = %d; want 404 without the text", w.Code)
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

// TestSignInRate: sign-ins started beyond the rate are 503, and write no
// state to Redis.
func TestSignInRate(t *testing.T) {
	rdb, prefix := testenv.Redis(t)
	s, err := New(fakeReaders{}, &fakeNotices{}, fakeBlobs{t.TempDir()}, &fakeReads{}, fakeOAuth{}, &fakeAudit{}, Options{
		PublicURL: "https://read.example.com", Apps: []App{{Name: "hr", CorpID: corp, AgentID: 1000002}},
		Endpoints: access.DefaultEndpoints, States: access.NewStates(rdb, prefix), Redis: rdb, Prefix: prefix, SignInRate: 0.5, Archive: &fakeArchive{},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Routes()
	codes := map[int]int{}
	for range 5 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/r/hr/perf", nil))
		codes[w.Code]++
	}
	if codes[302] != 1 || codes[503] != 4 {
		t.Fatalf("answers %v; want one 302 (burst 1) and four 503", codes)
	}
	if keys, _ := rdb.Keys(t.Context(), prefix+"*").Result(); len(keys) != 1 {
		t.Fatalf("Redis keys %v; want the one started sign-in's state", keys)
	}
}
