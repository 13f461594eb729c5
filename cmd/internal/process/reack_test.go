package process

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// reader is a member's browser inside WeCom on the reading page, over
// plain HTTP: it signs in through the fake WeCom as its user.
type reader struct {
	t      *testing.T
	c      *http.Client
	origin string
}

func newReader(t *testing.T, addr, userID string) *reader {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if strings.HasSuffix(r.URL.Path, "/connect/oauth2/authorize") && r.URL.Query().Get("as") == "" {
			q := r.URL.Query()
			q.Set("as", userID)
			r.URL.RawQuery = q.Encode()
		}
		return nil
	}}
	return &reader{t: t, c: c, origin: "http://" + addr}
}

var viewToken = regexp.MustCompile(`data-view="([^"]+)"`)

// open opens the page path; it returns the page's view token.
func (rd *reader) open(path string) string {
	rd.t.Helper()
	req, _ := http.NewRequest("GET", rd.origin+path, nil)
	req.Header.Set("User-Agent", wecomUA)
	resp, err := rd.c.Do(req)
	if err != nil {
		rd.t.Fatalf("open %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := viewToken.FindSubmatch(b)
	if resp.StatusCode != http.StatusOK || m == nil {
		rd.t.Fatalf("open %s = %d: %.200s", path, resp.StatusCode, b)
	}
	return string(m[1])
}

// event posts a page event as the page's script does.
func (rd *reader) event(msgPath, event string, version int, view string) (int, string) {
	rd.t.Helper()
	body, _ := json.Marshal(map[string]any{"event": event, "version": version, "view": view})
	req, _ := http.NewRequest("POST", rd.origin+msgPath+"/events", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", rd.origin)
	req.Header.Set("User-Agent", wecomUA)
	resp, err := rd.c.Do(req)
	if err != nil {
		rd.t.Fatalf("event %s: %v", event, err)
	}
	defer resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error
}

// TestMaterialVersion: under read_rule acknowledged, a material version 2
// makes version 1's acknowledgement stop counting until the member
// acknowledges version 2; a non-material version 3 changes no count; an
// acknowledgement of version 1 after version 2 is out is archived as
// version 1's and does not count; MySQL agrees, and page_signals keeps
// every version's acknowledgement.
func TestMaterialVersion(t *testing.T) {
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
	reg := map[string]any{"msgid": "rule-2026", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan", "lisi"}},
		"content":  map[string]any{"markdown": "# 第一条\n\n九点上班。"}, "read_rule": "acknowledged"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	const page = "/r/hr/rule-2026"
	type progress struct {
		Read     int            `json:"read"`
		BySignal map[string]int `json:"by_signal"`
	}
	waitRead := func(what string, read, acked int) {
		t.Helper()
		var p progress
		testenv.WaitFor(t, 10*time.Second, what, func() bool {
			p = progress{}
			return api(t, m, "GET", "/messages/rule-2026/progress", nil, &p) == http.StatusOK && p.Read == read && p.BySignal["acknowledged"] == acked
		})
		t.Logf("%s: %+v", what, p)
	}
	ack := func(rd *reader, path string, version int) {
		t.Helper()
		view := rd.open(path)
		if code, e := rd.event(page, "read_to_end", version, view); code != 200 {
			t.Fatalf("read_to_end v%d = %d %s", version, code, e)
		}
		if code, e := rd.event(page, "acknowledged", version, view); code != 200 {
			t.Fatalf("acknowledged v%d = %d %s", version, code, e)
		}
	}
	zs, ls := newReader(t, addr, "zhangsan"), newReader(t, addr, "lisi")
	ack(zs, page, 1)
	waitRead("zhangsan's acknowledgement of v1 counts", 1, 1)
	// flushd has it before the material version (an acknowledgement
	// still in flight to MySQL when one is made may keep counting: see
	// docs/api.md).
	testenv.WaitFor(t, 20*time.Second, "v1's acknowledgement in MySQL", func() bool {
		return testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'rule-2026' AND is_read = 1")[0] == 1
	})

	patch := func(md string, material bool) {
		t.Helper()
		if code := api(t, m, "PATCH", "/messages/rule-2026", map[string]any{"content": map[string]any{"markdown": md}, "reacknowledge": material}, nil); code != http.StatusOK {
			t.Fatalf("PATCH (material %v) = %d; want 200", material, code)
		}
	}
	cards := func() []string {
		var out []string
		for _, d := range fake.Sent() {
			if strings.Contains(string(d.Raw), "通知已更新，请重新确认") {
				out = append(out, string(d.Raw))
			}
		}
		return out
	}
	patch("# 第一条\n\n八点半上班。", true)
	waitRead("v2 is material: v1's acknowledgement no longer counts", 0, 0)
	if got := cards(); len(got) != 1 || !strings.Contains(got[0], `"touser":"zhangsan"`) {
		t.Fatalf("update cards = %q; want one, to zhangsan", got)
	}
	// The same PATCH again (a client's retry) makes no version and sends
	// no second card.
	patch("# 第一条\n\n八点半上班。", true)
	if got := cards(); len(got) != 1 {
		t.Errorf("update cards after a replayed PATCH = %d; want still 1", len(got))
	}
	testenv.WaitFor(t, 10*time.Second, "MySQL: no read", func() bool {
		return testenv.Column[int](t, m.DB, "SELECT COUNT(*) FROM message_read_record WHERE msgid = 'rule-2026' AND is_read = 1")[0] == 0
	})

	// lisi reads version 1 (?v=1) after version 2 is out: stale (issue
	// 46), refused, nothing recorded.
	old := ls.open(page + "?v=1")
	for _, ev := range []string{"read_to_end", "acknowledged"} {
		if code, e := ls.event(page, ev, 1, old); code != 409 || e != "stale_version" {
			t.Errorf("lisi's %s of v1 after v2 = %d %s; want 409 stale_version", ev, code, e)
		}
	}
	waitRead("an acknowledgement of v1 after v2 does not count", 0, 0)
	// zhangsan acknowledges v1 again: stale now, refused.
	if code, e := zs.event(page, "acknowledged", 1, zs.open(page+"?v=1")); code != 409 || e != "stale_version" {
		t.Errorf("zhangsan's second ack of v1 = %d %s; want 409 stale_version", code, e)
	}
	ack(zs, page, 2)
	waitRead("zhangsan's acknowledgement of v2 counts", 1, 1)

	patch("# 第一条\n\n八点半上班。\n\n（错别字修正）", false)
	time.Sleep(300 * time.Millisecond)
	waitRead("a non-material v3 changes no count", 1, 1)
	if got := cards(); len(got) != 1 {
		t.Errorf("update cards after a non-material version = %d; want still 1", len(got))
	}

	var read, acks []string
	defer func() { t.Logf("MySQL: read %v, acknowledgements %v", read, acks) }()
	testenv.WaitFor(t, 20*time.Second, "MySQL: zhangsan read by acknowledging v2; page_signals keeps each version", func() bool {
		read = testenv.Column[string](t, m.DB, "SELECT CONCAT(u.userid, '/', r.source) FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid WHERE r.msgid = 'rule-2026' AND r.is_read = 1")
		acks = testenv.Column[string](t, m.DB, "SELECT CONCAT(u.userid, '/', p.version) FROM page_signals p JOIN users u ON u.corp_id = p.corp_id AND u.uid = p.uid WHERE p.msgid = 'rule-2026' AND p.source = 6 ORDER BY u.userid, p.version")
		return len(read) == 1 && read[0] == "zhangsan/6" && strings.Join(acks, ",") == "zhangsan/1,zhangsan/2"
	})
	// Progress per version: version 1 acknowledged by two, version 2 by
	// one (the current material version's count is progress's).
	var c struct {
		ByVersion []struct {
			Version, Link, ReadToEnd, Acknowledged int
		} `json:"by_version"`
	}
	if code := api(t, m, "GET", "/messages/rule-2026/content", nil, &c); code != http.StatusOK || len(c.ByVersion) != 2 ||
		c.ByVersion[0].Version != 1 || c.ByVersion[0].Acknowledged != 1 || c.ByVersion[1].Version != 2 || c.ByVersion[1].Acknowledged != 1 {
		t.Errorf("content by_version = %d %+v; want v1 acknowledged by 1, v2 by 1", code, c.ByVersion)
	}
}
