package process

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

const pageSecret = "page-app-secret"

// TestReadingPageEndToEnd: a notice sent with full text is read on the
// receiver's reading page by a recipient signed in through (the fake)
// WeCom's OAuth2, inside WeCom's browser: the page shows the text under
// their watermark, and the dashboard counts the signal link. A member the
// notice was not sent to gets 404 and an audit row.
func TestReadingPageEndToEnd(t *testing.T) {
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:        []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}, {UserID: "lisi", Name: "李四", Departments: []int{1}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	reg := map[string]any{"msgid": "perf-2026", "app": "hr", "title": "2026年度绩效考核办法", "send": true,
		"audience":  map[string]any{"userids": []string{"zhangsan"}},
		"content":   map[string]any{"markdown": "# 第四条\n\n考核周期为一年。<script>alert(1)</script>"},
		"read_rule": "link"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send with content = %d; want 201", code)
	}

	// The card opens the reading page, through the tracked link.
	sent := fake.Sent()
	if len(sent) != 1 {
		t.Fatalf("message/send deliveries = %d; want 1", len(sent))
	}
	var card struct {
		TemplateCard struct {
			CardAction struct {
				URL string `json:"url"`
			} `json:"card_action"`
		} `json:"template_card"`
	}
	if err := json.Unmarshal(sent[0].Raw, &card); err != nil {
		t.Fatal(err)
	}
	cardURL := card.TemplateCard.CardAction.URL
	link, err := url.Parse(cardURL)
	if err != nil || link.Query().Get("to") != "http://"+addr+"/r/hr/perf-2026" || link.Query().Get("sig") == "" {
		t.Fatalf("card url = %q; want the tracked link to the reading page", cardURL)
	}

	// A url of its own beside full text is refused.
	bad := map[string]any{"app": "hr", "title": "t", "send": true, "url": "https://intranet.example.com/p/1",
		"audience": map[string]any{"userids": []string{"zhangsan"}}, "content": map[string]any{"markdown": "x"}}
	if code := api(t, m, "POST", "/messages", bad, nil); code != http.StatusBadRequest {
		t.Errorf("full text with a url of its own = %d; want 400", code)
	}

	open := func(userID string) (*http.Response, string) { return openAs(t, addr, cardURL, userID) }

	resp, body := open("zhangsan")
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/r/hr/perf-2026" {
		t.Fatalf("page = %d at %s: %.300s", resp.StatusCode, resp.Request.URL, body)
	}
	for _, want := range []string{"2026年度绩效考核办法", "考核周期为一年。", `id="watermark"`, "zhangsan", `id="notice-end"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("a script from the Markdown reached the page")
	}
	// read_rule link: the page opened is the read.
	testenv.WaitFor(t, 10*time.Second, "the link signal on the dashboard, counted as read", func() bool {
		var p struct {
			Read     int            `json:"read"`
			BySignal map[string]int `json:"by_signal"`
		}
		return api(t, m, "GET", "/messages/perf-2026/progress", nil, &p) == http.StatusOK && p.BySignal["link"] == 1 && p.Read == 1
	})

	// flushd keeps the page's event and its read in one transaction with
	// their ledger entries: the signal entry of the read names the
	// version, the client and its User-Agent, the page entry likewise,
	// and verify is clean.
	testenv.WaitFor(t, 10*time.Second, "the page event in page_signals", func() bool {
		var n int
		return m.DB.QueryRow("SELECT COUNT(*) FROM page_signals WHERE corp_id = ? AND msgid = 'perf-2026'", testCorp).Scan(&n) == nil && n == 1
	})
	es, err := m.Ledger.EntriesFor(context.Background(), testCorp, "perf-2026", "zhangsan")
	testenv.Check(t, "EntriesFor", err)
	var kinds []string
	for _, e := range es {
		if e.Kind == "signal" || e.Kind == "page" {
			kinds = append(kinds, string(e.Kind))
			for _, want := range []string{`"signal":"link"`, `"version":1`, `"ua":"Mozilla/5.0 (iPhone)`, `"ip":"`} {
				if !strings.Contains(string(e.Body), want) {
					t.Errorf("%s entry %s lacks %s", e.Kind, e.Body, want)
				}
			}
		}
	}
	if strings.Join(kinds, ",") != "signal,page" {
		t.Errorf("zhangsan's entries of the page: %v; want a signal and a page entry", kinds)
	}
	if rep, err := m.Ledger.Verify(context.Background(), testCorp, ""); err != nil || len(rep.Problems) != 0 {
		t.Errorf("ledger verify = %v, %v; want clean", rep.Problems, err)
	}

	resp, body = open("lisi")
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "考核") {
		t.Fatalf("a non-recipient's page = %d; want 404 without the text", resp.StatusCode)
	}
	rows := testenv.Column[string](t, m.DB, "SELECT actor FROM audit_events WHERE action = 'page_denied' AND msgid = 'perf-2026'")
	if len(rows) != 1 || rows[0] != "lisi" {
		t.Errorf("page_denied audit rows = %v; want one for lisi", rows)
	}
}

// openAs follows the redirects of one browser inside WeCom from a card's
// url, signing in as userID on the fake's OAuth2 page (wecom.oauth_base);
// it returns the last answer and its body. addr is the receiver's.
func openAs(t *testing.T, addr, cardURL, userID string) (*http.Response, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		// The tracked link names wecom.oauth_base, the fake.
		if r.URL.Host == "open.weixin.qq.com" {
			t.Errorf("the tracked link went to WeCom's own host, not wecom.oauth_base: %s", r.URL)
		}
		if strings.HasSuffix(r.URL.Path, "/connect/oauth2/authorize") && r.URL.Query().Get("as") == "" {
			q := r.URL.Query()
			q.Set("as", userID)
			r.URL.RawQuery = q.Encode()
		}
		if strings.Contains(r.URL.String(), userID) && r.URL.Host == addr {
			t.Errorf("the UserID travels in a URL of the receiver: %s", r.URL)
		}
		return nil
	}}
	req, _ := http.NewRequest("GET", cardURL, nil)
	req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone) AppleWebKit/605.1.15 MicroMessenger/8.0 wxwork/4.1.20")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("open the page as %s: %v", userID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// cardURL is the url of the card of the i-th message/send delivery.
func cardURL(t *testing.T, fake *fakewecom.Server, i int) string {
	t.Helper()
	sent := fake.Sent()
	if len(sent) <= i {
		t.Fatalf("message/send deliveries = %d; want more than %d", len(sent), i)
	}
	var card struct {
		TemplateCard struct {
			CardAction struct {
				URL string `json:"url"`
			} `json:"card_action"`
		} `json:"template_card"`
	}
	if err := json.Unmarshal(sent[i].Raw, &card); err != nil {
		t.Fatal(err)
	}
	return card.TemplateCard.CardAction.URL
}

// TestScheduledContentEndToEnd: a notice scheduled with its full text
// and read rule keeps them until its time; the Runner then publishes
// them as version 1 and sends its card, which opens the reading page
// showing the text, and the page's open counts under the rule.
func TestScheduledContentEndToEnd(t *testing.T) {
	addr := freeAddr(t)
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp,
		Apps:        []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: addr}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.WeCom.APIBase, c.WeCom.OAuthBase, c.WeCom.LoginBase = base, base, base
		c.Apps[0].Secret = pageSecret
		c.Receiver.Listen = addr
		c.Receiver.PublicURL = "http://" + addr
	})
	at := time.Now().Add(3 * time.Second).UTC()
	reg := map[string]any{"msgid": "perf-later", "app": "hr", "title": "2026年度绩效考核办法", "send": true, "send_at": at.Format(time.RFC3339Nano),
		"audience":  map[string]any{"userids": []string{"zhangsan"}},
		"content":   map[string]any{"markdown": "# 第四条\n\n考核周期为一年。"},
		"read_rule": "link"}
	var created struct {
		State    string `json:"state"`
		ReadRule string `json:"read_rule"`
		URL      string `json:"url"`
	}
	if code := api(t, m, "POST", "/messages", reg, &created); code != http.StatusCreated || created.State != "scheduled" || created.ReadRule != "link" ||
		created.URL != "http://"+addr+"/r/hr/perf-later" {
		t.Fatalf("schedule with content = %d %+v; want 201, scheduled, its rule and its page", code, created)
	}
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM notice_versions WHERE msgid = 'perf-later'"); n[0] != 0 {
		t.Fatalf("%d versions before its time; want none", n[0])
	}
	var got struct {
		State string `json:"state"`
	}
	testenv.WaitFor(t, 20*time.Second, "the scheduled notice sent", func() bool {
		return api(t, m, "GET", "/messages/perf-later", nil, &got) == http.StatusOK && got.State == "sent"
	})
	if n := testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM notice_versions WHERE msgid = 'perf-later' AND version = 1 AND read_rule = 'link'"); n[0] != 1 {
		t.Fatalf("version 1 rows = %d; want 1 with its rule", n[0])
	}
	link, err := url.Parse(cardURL(t, fake, 0))
	if err != nil || link.Query().Get("to") != "http://"+addr+"/r/hr/perf-later" {
		t.Fatalf("card url = %v; want the tracked link to the reading page", link)
	}
	resp, body := openAs(t, addr, link.String(), "zhangsan")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "考核周期为一年。") || !strings.Contains(body, `id="watermark"`) {
		t.Fatalf("page = %d: %.300s; want the text under the watermark", resp.StatusCode, body)
	}
	testenv.WaitFor(t, 10*time.Second, "the link signal, counted as read (read_rule link)", func() bool {
		var p struct {
			Read int `json:"read"`
		}
		return api(t, m, "GET", "/messages/perf-later/progress", nil, &p) == http.StatusOK && p.Read == 1
	})
}
