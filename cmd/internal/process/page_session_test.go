package process

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/fakewecom"
)

// mustRunReceiver starts a receiver alone on cfg (its own process, as a
// receiver replica or a restarted one runs).
func mustRunReceiver(tb testing.TB, cfg config.Config) *Main {
	tb.Helper()
	r := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := r.Run(context.Background(), Roles{Receiver: true}); err != nil {
		r.Close()
		tb.Fatalf("receiver Run: %v", err)
	}
	tb.Cleanup(func() { r.Close() })
	return r
}

// signIns counts a browser's trips to WeCom's sign-in.
type signIns struct{ n atomic.Int32 }

func (s *signIns) watch(rd *reader) {
	next := rd.c.CheckRedirect
	rd.c.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if strings.HasSuffix(r.URL.Path, "/connect/oauth2/authorize") && r.URL.Query().Get("as") == "" {
			s.n.Add(1)
		}
		return next(r, via)
	}
}

// TestReadingSessionLastsAndEnds (issue 50): one sign-in serves every
// notice of the corp, on a receiver restarted since (the session is in
// Redis, 30 days rolling by default), until the member leaves the
// company: change_contact delete_user ends their sessions, and signing in
// again they get 404.
func TestReadingSessionLastsAndEnds(t *testing.T) {
	pageAddr := freeAddr(t)
	m, _, _ := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}}, nil)
	// The fake WeCom takes the sign-ins' redirect to the page receiver.
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp, Apps: []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: pageAddr}},
		Users:       []fakewecom.User{{UserID: "zhangsan", Name: "张三", Departments: []int{1}}, {UserID: "lisi", Name: "李四", Departments: []int{1}}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	cfg := m.Config
	cfg.WeCom.APIBase, cfg.WeCom.OAuthBase, cfg.WeCom.LoginBase = base, base, base
	cfg.Receiver.Listen, cfg.Receiver.PublicURL = pageAddr, "http://"+pageAddr
	if got := cfg.Receiver.SessionTTL.D(); got != 30*24*time.Hour {
		t.Errorf("receiver.session_ttl default = %v; want 30 days", got)
	}
	for _, id := range []string{"session-a", "session-b"} {
		reg := map[string]any{"msgid": id, "app": "hr", "title": "考勤制度 " + id, "send": true,
			"audience": map[string]any{"userids": []string{"zhangsan"}},
			"content":  map[string]any{"markdown": "九点上班。"}, "read_rule": "link"}
		if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
			t.Fatalf("send %s = %d; want 201", id, code)
		}
	}
	first := mustRunReceiver(t, cfg)
	zs := newReader(t, pageAddr, "zhangsan")
	var trips signIns
	trips.watch(zs)
	zs.open("/r/hr/session-a")
	if trips.n.Load() != 1 {
		t.Fatalf("sign-ins = %d; want 1", trips.n.Load())
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close the receiver: %v", err)
	}
	mustRunReceiver(t, cfg) // restarted, same address
	zs.open("/r/hr/session-b")
	zs.open("/r/hr/session-a")
	if n := trips.n.Load(); n != 1 {
		t.Fatalf("sign-ins after a restart and another notice = %d; want still 1", n)
	}

	// zhangsan leaves: WeCom's change_contact delete_user.
	leave := fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType>delete_user</ChangeType><UserID><![CDATA[zhangsan]]></UserID><AgentID>%d</AgentID></xml>`,
		testCorp, time.Now().Unix(), testAgent)
	if code, _ := deliverReply(t, m, leave); code != http.StatusOK {
		t.Fatalf("delete_user callback = %d; want 200", code)
	}
	if keys, _ := m.Redis.Keys(t.Context(), cfg.Redis.Prefix+"page:session*").Result(); len(keys) != 0 {
		t.Errorf("session keys after leaving: %v; want none", keys)
	}
	resp, body := zs.getPage("/r/hr/session-a")
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "九点上班") {
		t.Errorf("the page after leaving = %d; want 404 without the text", resp.StatusCode)
	}
	if n := trips.n.Load(); n != 2 {
		t.Errorf("sign-ins after leaving = %d; want 2 (the session ended)", n)
	}
}

// getPage opens path and returns the last answer and its body.
func (rd *reader) getPage(path string) (*http.Response, string) {
	rd.t.Helper()
	req, _ := http.NewRequest("GET", rd.origin+path, nil)
	req.Header.Set("User-Agent", wecomUA)
	resp, err := rd.c.Do(req)
	if err != nil {
		rd.t.Fatalf("open %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var metaRefresh = regexp.MustCompile(`http-equiv="refresh" content="(\d+);url=([^"]+)"`)

// TestDeferredSignInCompletes (issue 50): a member whose sign-in meets a
// bound (here the address's, spent by a flood from the same NAT) gets
// 请稍候, never 503; following the page's own refresh, the sign-in
// completes by itself and the page opens.
func TestDeferredSignInCompletes(t *testing.T) {
	m, _, addr := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}}, func(c *config.Config) {
		c.Receiver.SignInClientRate = 0.5 // burst 2
	})
	reg := map[string]any{"msgid": "wait-2026", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": []string{"zhangsan"}},
		"content":  map[string]any{"markdown": "九点上班。"}, "read_rule": "link"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	// The flood from the same address spends its bucket.
	flood := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 5 {
		resp, err := flood.Get("http://" + addr + "/r/hr/wait-2026")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	zs := newReader(t, addr, "zhangsan")
	path := "/r/hr/wait-2026"
	waits := 0
	for {
		resp, body := zs.getPage(path)
		if resp.StatusCode == http.StatusOK && strings.Contains(body, "九点上班") {
			break
		}
		mm := metaRefresh.FindStringSubmatch(body)
		if resp.StatusCode != http.StatusTooManyRequests || mm == nil || !strings.Contains(body, "请稍候") {
			t.Fatalf("open = %d: %.300s; want the page or 429 请稍候 with a refresh", resp.StatusCode, body)
		}
		if waits++; waits > 10 {
			t.Fatal("still waiting after 10 refreshes")
		}
		secs, _ := strconv.Atoi(mm[1])
		if secs < 1 || secs > 4 || resp.Header.Get("Retry-After") != mm[1] {
			t.Errorf("refresh after %s s, Retry-After %q; want 1 to 4 s, the same", mm[1], resp.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(secs) * time.Second)
		path = strings.ReplaceAll(mm[2], "&amp;", "&")
	}
	if waits == 0 {
		t.Error("the sign-in was never deferred; the test shows nothing")
	}
	t.Logf("signed in after %d deferrals", waits)
}

// TestReadingSignInFromRosterEndsAtLeave (issue 50): on a receiver
// whose sign-ins are answered from idmap's roster in memory (no MySQL),
// a member who leaves through another process (its change_contact) is
// refused at once when they sign in again, though the roster has not yet
// seen it: the revocation's mark sends that sign-in to MySQL.
func TestReadingSignInFromRosterEndsAtLeave(t *testing.T) {
	pageAddr := freeAddr(t)
	m, _, _ := pageProcesses(t, []fakewecom.App{{AgentID: testAgent, Secret: pageSecret}}, nil)
	members := []string{"zhangsan", "lisi"}
	var users []fakewecom.User
	for _, u := range members {
		users = append(users, fakewecom.User{UserID: u, Departments: []int{1}})
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: testCorp, Apps: []fakewecom.App{{AgentID: testAgent, Secret: pageSecret, RedirectDomain: pageAddr}},
		Users: users, Departments: []fakewecom.Department{{ID: 1, Name: "总公司"}}})
	base := fakewecom.Start(t, fake)
	cfg := m.Config
	cfg.WeCom.APIBase, cfg.WeCom.OAuthBase, cfg.WeCom.LoginBase = base, base, base
	cfg.Receiver.Listen, cfg.Receiver.PublicURL = pageAddr, "http://"+pageAddr
	reg := map[string]any{"msgid": "roster-a", "app": "hr", "title": "考勤制度", "send": true,
		"audience": map[string]any{"userids": members},
		"content":  map[string]any{"markdown": "九点上班。"}, "read_rule": "link"}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("send = %d; want 201", code)
	}
	rcv := mustRunReceiver(t, cfg)
	// The first sign-in reads the roster in the background; the next
	// ones are answered from it.
	newReader(t, pageAddr, "lisi").open("/r/hr/roster-a")
	deadline := time.Now().Add(10 * time.Second)
	for counterOf(t, rcv, "yidu_idmap_members_total", "from", "roster") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no sign-in was answered from the roster")
		}
		time.Sleep(20 * time.Millisecond)
		newReader(t, pageAddr, "lisi").open("/r/hr/roster-a")
	}
	zs := newReader(t, pageAddr, "zhangsan")
	zs.open("/r/hr/roster-a")

	// zhangsan leaves, told to the other process (m), not to rcv.
	leave := fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType>delete_user</ChangeType><UserID><![CDATA[zhangsan]]></UserID><AgentID>%d</AgentID></xml>`,
		testCorp, time.Now().Unix(), testAgent)
	if code, _ := deliverReply(t, m, leave); code != http.StatusOK {
		t.Fatalf("delete_user callback = %d; want 200", code)
	}
	resp, body := zs.getPage("/r/hr/roster-a")
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, "九点上班") {
		t.Errorf("the page right after leaving = %d; want 404 without the text", resp.StatusCode)
	}
	// The others read on.
	if resp, _ := newReader(t, pageAddr, "lisi").getPage("/r/hr/roster-a"); resp.StatusCode != http.StatusOK {
		t.Errorf("lisi's page = %d; want 200", resp.StatusCode)
	}
}
