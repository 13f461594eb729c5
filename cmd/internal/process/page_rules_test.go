package process

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// pageProcesses runs yidu serve with the reading page on a fake WeCom of
// zhangsan and lisi; edit may change the configuration further.
func pageProcesses(t *testing.T, apps []fakewecom.App, edit func(*config.Config)) (*Main, *fakewecom.Server, string) {
	t.Helper()
	addr := freeAddr(t)
	for i := range apps {
		apps[i].RedirectDomain = addr
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp, Apps: apps,
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}, {UserID: "lisi", Name: "李四", Departments: []int{1}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
		if edit != nil {
			edit(c)
		}
	})
	return m, fake, addr
}

// TestStaleAcknowledgementRefused (issue 46, finding 5): a member opens
// version 1 and reads it to the end; HR publishes a material version 2;
// the member's acknowledgement of version 1 with the page's old view is
// decided against the notice as it is now: 409 stale_version, nothing
// recorded, not counted. Version 2, read and acknowledged, counts.
func TestStaleAcknowledgementRefused(t *testing.T) {
	m, _, addr := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}}, nil)
	reg := map[string]any{"msgid": "stale-2026", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "# 第一条\n\n九点上班。"}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	const page = "/r/hr/stale-2026"
	zs := newReader(t, addr, "zhangsan")
	v1 := zs.open(page)
	if code, e := zs.event(page, "read_to_end", 1, v1); code != 200 {
		t.Fatalf("read_to_end v1 = %d %s", code, e)
	}
	if code := api(t, m, "PATCH", "/messages/stale-2026", map[string]any{"content": map[string]any{"markdown": "# 第一条\n\n八点半上班。"}, "reacknowledge": true}, nil); code != http.StatusOK {
		t.Fatalf("PATCH (material) = %d; want 200", code)
	}
	if code, e := zs.event(page, "acknowledged", 1, v1); code != http.StatusConflict || e != "stale_version" {
		t.Fatalf("acknowledged v1 after a material v2 = %d %q; want 409 stale_version", code, e)
	}
	// read_to_end of the old view is stale too.
	if code, e := zs.event(page, "read_to_end", 1, v1); code != http.StatusConflict || e != "stale_version" {
		t.Errorf("read_to_end v1 after a material v2 = %d %q; want 409 stale_version", code, e)
	}
	time.Sleep(500 * time.Millisecond) // flushd's interval is 200 ms
	var p struct {
		Read     int            `json:"read"`
		BySignal map[string]int `json:"by_signal"`
	}
	if code := api(t, m, "GET", "/messages/stale-2026/progress", nil, &p); code != 200 || p.Read != 0 || p.BySignal["acknowledged"] != 0 {
		t.Errorf("progress after the stale acknowledgement = %d %+v; want nothing read", code, p)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM page_signals WHERE msgid = 'stale-2026' AND source = 6"); n[0] != 0 {
		t.Errorf("page_signals acknowledgements = %d; want none", n[0])
	}
	// The current version, read and acknowledged, counts.
	v2 := zs.open(page)
	if code, e := zs.event(page, "read_to_end", 2, v2); code != 200 {
		t.Fatalf("read_to_end v2 = %d %s", code, e)
	}
	if code, e := zs.event(page, "acknowledged", 2, v2); code != 200 {
		t.Fatalf("acknowledged v2 = %d %s", code, e)
	}
	testenv.WaitFor(t, 10*time.Second, "v2's acknowledgement counted", func() bool {
		p.BySignal = nil
		return api(t, m, "GET", "/messages/stale-2026/progress", nil, &p) == 200 && p.Read == 1 && p.BySignal["acknowledged"] == 1
	})
}

// TestWrongAppPage (issue 46, finding 6): a recipient of an ops notice
// who opens it under /r/hr/ is sent to /r/ops/, where its signals are
// recorded; events posted under hr are refused, record nothing and mark
// nothing done: the real page then takes the member's read_to_end and
// acknowledgement.
func TestWrongAppPage(t *testing.T) {
	const opsAgent = testAgent + 1
	m, _, addr := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}, {AgentID: opsAgent, Secret: pageSecret}}, func(c *config.Config) {
		c.Apps = append(c.Apps, config.App{Name: "ops", CorpID: testCorp, AgentID: opsAgent, Secret: pageSecret, Token: testToken, EncodingAESKey: testAESKey, ReadButtonKey: "yidu_read"})
	})
	reg := map[string]any{"msgid": "ops-2026", "app": "ops", "title": "机房巡检", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "# 巡检\n\n每周一次。"}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	zs := newReader(t, addr, "zhangsan")
	right := zs.open("/r/ops/ops-2026") // signs in, and a view of the right page

	// Under hr: a redirect to the notice's own app, not a page.
	jar := zs.c.Jar
	noFollow := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("GET", "http://"+addr+"/r/hr/ops-2026?v=1", nil)
	req.Header.Set("User-Agent", wecomUA)
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/r/ops/ops-2026?v=1" {
		t.Fatalf("/r/hr/ops-2026 = %d %q; want 302 to /r/ops/ops-2026?v=1", resp.StatusCode, resp.Header.Get("Location"))
	}
	// Events under hr: refused, nothing recorded, nothing marked.
	for _, ev := range []string{"read_to_end", "acknowledged"} {
		if code, _ := zs.event("/r/hr/ops-2026", ev, 1, right); code == 200 {
			t.Errorf("%s under hr = 200; want a refusal", ev)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM page_signals WHERE msgid = 'ops-2026' AND source IN (5, 6)"); n[0] != 0 {
		t.Errorf("page_signals after events under hr = %d; want none", n[0])
	}
	// The real page: not done, and it takes both.
	if _, body := openAs(t, addr, "http://"+addr+"/r/ops/ops-2026", "zhangsan"); strings.Contains(body, `data-ended="1"`) || strings.Contains(body, `data-acked="1"`) {
		t.Errorf("the ops page shows done what was never recorded")
	}
	if code, e := zs.event("/r/ops/ops-2026", "read_to_end", 1, right); code != 200 {
		t.Fatalf("read_to_end under ops = %d %s", code, e)
	}
	if code, e := zs.event("/r/ops/ops-2026", "acknowledged", 1, right); code != 200 {
		t.Fatalf("acknowledged under ops = %d %s; want 200", code, e)
	}
	testenv.WaitFor(t, 10*time.Second, "the acknowledgement under ops counted", func() bool {
		var p struct {
			Read int `json:"read"`
		}
		return api(t, m, "GET", "/messages/ops-2026/progress", nil, &p) == 200 && p.Read == 1
	})
}

// TestPageRecordsMemberAddress (issue 48): behind a trusted proxy
// (receiver.trusted_proxies), the page's signals, page_signals and the
// ledger's entries name the member's address from X-Forwarded-For, not
// the proxy's; a forwarded header from anyone else is ignored.
func TestPageRecordsMemberAddress(t *testing.T) {
	m, _, addr := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}}, func(c *config.Config) {
		c.Receiver.TrustedProxies = []string{"127.0.0.1/32"}
	})
	reg := map[string]any{"msgid": "ip-2026", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "九点上班。"}, "read_rule": "read_to_end"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	zs := newReader(t, addr, "zhangsan")
	zs.c.Transport = forwardedFor{"198.51.100.23"}
	view := zs.open("/r/hr/ip-2026")
	if code, e := zs.event("/r/hr/ip-2026", "read_to_end", 1, view); code != 200 {
		t.Fatalf("read_to_end = %d %s", code, e)
	}
	var ips []string
	testenv.WaitFor(t, 20*time.Second, "page_signals of the link and read_to_end", func() bool {
		ips = testenv.Column[string](t, m.DB, "SELECT ip FROM page_signals WHERE msgid = 'ip-2026' ORDER BY source")
		return len(ips) == 2
	})
	for _, ip := range ips {
		if ip != "198.51.100.23" {
			t.Errorf("page_signals ip = %q; want the member's 198.51.100.23", ip)
		}
	}
	es, err := m.Ledger.EntriesFor(t.Context(), testCorp, "ip-2026", "zhangsan")
	testenv.Check(t, "EntriesFor", err)
	n := 0
	for _, e := range es {
		if e.Kind == "page" {
			n++
			if !strings.Contains(string(e.Body), `"ip":"198.51.100.23"`) {
				t.Errorf("ledger page entry %s; want the member's address", e.Body)
			}
		}
	}
	if n == 0 {
		t.Error("no ledger page entry")
	}
}

// forwardedFor is a proxy in front of the receiver: it adds the client's
// address to X-Forwarded-For.
type forwardedFor struct{ client string }

func (f forwardedFor) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", f.client)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSignInFloodOneAddress (issue 46, finding 7): one client's flood of
// sign-ins (400 opens without a session, from one address behind the
// ingress) waits on 请稍候 (429), never 503, and a real member from
// another address still signs in and reads at once.
func TestSignInFloodOneAddress(t *testing.T) {
	m, _, addr := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}}, func(c *config.Config) {
		c.Receiver.TrustedProxies = []string{"127.0.0.1/32"}
	})
	reg := map[string]any{"msgid": "flood-2026", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "九点上班。"}, "read_rule": "link"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	flood := &http.Client{Transport: forwardedFor{"203.0.113.9"}, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	codes := map[int]int{}
	for range 400 {
		req, _ := http.NewRequest("GET", "http://"+addr+"/r/hr/flood-2026", nil)
		req.Header.Set("User-Agent", wecomUA)
		resp, err := flood.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
	if codes[http.StatusServiceUnavailable] != 0 || codes[http.StatusTooManyRequests] == 0 {
		t.Errorf("the flood's answers %v; want 302s then 429s, no 503", codes)
	}
	zs := newReader(t, addr, "zhangsan")
	zs.c.Transport = forwardedFor{"198.51.100.5"}
	zs.open("/r/hr/flood-2026") // fails the test unless 200 with the page
}
