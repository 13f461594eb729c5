package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/yidu-io/yidu/internal/testenv"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

// TestDemoExitWhenDone runs the demo as `yidu-demo -employees 200 -speed 50
// -exit-when-done` on the embedded servers (whatever YIDU_* says) and
// checks that Run returns with the dashboard answering before the notice
// exists, that every read, and only those, reached the dashboard and
// MySQL, that this round's steps followed (the hosted notice's page
// counts, a member's evidence PDF, the notice to 全员 held until its
// approval card was pressed and then sent once, the ledger verified
// clean), that nothing logged a warning or an error (yidu's slog, or
// go-mysql-server's logrus), and that Close stops every server.
func TestDemoExitWhenDone(t *testing.T) {
	out := &testenv.SyncBuffer{}
	logrus.SetOutput(out)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })
	m := NewMain()
	m.Stdout, m.Stderr = out, out
	m.Getenv = func(string) string { return "" }
	m.Logger = slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m.EvidenceDir = t.TempDir()
	err := m.ParseFlags([]string{"-employees", "200", "-speed", "50", "-exit-when-done", "-timeout", "45s",
		"-listen-dashboard", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Second)
	defer cancel()
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
		if t.Failed() {
			t.Logf("demo output:\n%s", out)
		}
	}()
	if err := m.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Run returns once the dashboard answers; the sync and the
	// registration follow in the background.
	if resp, err := http.Get(m.DashboardURL + "login"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /login right after Run = %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(out.String(), m.DashboardURL) || !strings.Contains(out.String(), m.Password) {
		t.Errorf("Run returned without printing the URL and the login:\n%s", out)
	}
	if err := m.Wait(ctx); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if !strings.Contains(m.statusLine(), "every read") {
		t.Errorf("status line at the end = %q; want it to say every read arrived", m.statusLine())
	}

	pl, st := m.plan, m.prog.last()
	readers := readerSet(pl)
	if len(readers) != pl.readers {
		t.Fatalf("plan: %d distinct readers in its items; says %d", len(readers), pl.readers)
	}
	if pl.readers < 160 || pl.readers > 195 {
		t.Errorf("plan: %d of 200 read; want about 92%%", pl.readers)
	}
	if !st.Exact() || st.Dashboard != int64(pl.readers) || st.MySQL != int64(pl.readers) || st.Recipients != 200 {
		t.Errorf("final status %s; want dashboard = MySQL = %d of 200", st, pl.readers)
	}
	if st.Retries < int64(pl.flaky) || st.Duplicates != int64(pl.duplicates) || st.Failures != 0 || pl.flaky == 0 || pl.duplicates == 0 {
		t.Errorf("WeCom played %s; want ≥ %d retries, %d duplicates, no failures", st, pl.flaky, pl.duplicates)
	}
	// Every card of the notice the fake WeCom got shows the notice's text
	// (this round's notices follow it).
	cards := m.Fake.Sent()
	if len(cards) == 0 {
		t.Error("no card was sent")
	}
	for _, c := range cards {
		var b struct {
			TemplateCard struct {
				TaskID       string `json:"task_id"`
				SubTitleText string `json:"sub_title_text"`
			} `json:"template_card"`
		}
		err := json.Unmarshal(c.Raw, &b)
		if err == nil && !sameMsg(b.TemplateCard.TaskID, m.MsgID) {
			continue
		}
		if err != nil || b.TemplateCard.SubTitleText != demoBody {
			t.Errorf("card %s: sub_title_text = %q, %v; want the notice's body", c.Raw, b.TemplateCard.SubTitleText, err)
			break
		}
	}
	// Every card press answered 200 carried the passive reply that turns
	// the member's button to "read" (doc path 90241), and WeCom could use
	// every reply it got.
	if presses := int64(pl.readers - pl.enterOnly); st.Replies < presses || st.BadReplies != 0 {
		t.Errorf("replies %d, unusable %d; want ≥ %d (one per card press) and 0", st.Replies, st.BadReplies, presses)
	}

	// MySQL holds exactly the planned readers, by name, with both sources.
	rows, err := m.App.DB.QueryContext(ctx, `SELECT u.userid, r.source FROM message_read_record r
		JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
		WHERE r.corp_id = ? AND r.msgid = ? AND r.is_read = 1`, demoCorp, m.MsgID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	sources := map[int]int{}
	for rows.Next() {
		var u string
		var src int
		if err := rows.Scan(&u, &src); err != nil {
			t.Fatal(err)
		}
		got[u] = true
		sources[src]++
	}
	rows.Close()
	if !maps.Equal(got, readers) {
		t.Errorf("MySQL readers (%d) differ from the planned readers (%d)", len(got), len(readers))
	}
	if sources[1] == 0 || sources[2] == 0 {
		t.Errorf("MySQL reads by source = %v; want card (1) and enter_agent (2)", sources)
	}
	var name string
	if err := m.App.DB.QueryRowContext(ctx, "SELECT name FROM users WHERE corp_id = ? AND userid = ?", demoCorp, wecomsim.UserID(0)).Scan(&name); err != nil || name != "王伟" {
		t.Errorf("name of %s = %q, %v; want 王伟 from the directory sync", wecomsim.UserID(0), name, err)
	}

	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") ||
			strings.Contains(line, "level=error") || strings.Contains(line, "level=warning") {
			t.Errorf("logged: %s", line)
		}
	}

	// This round's steps: the hosted notice opened by 5 members on the
	// reading page, 4 of whom read it to the end and acknowledged it;
	// the first one's evidence saved; the notice to 全员 held until
	// approved by the approval card's 批准 pressed twice, then sent once;
	// the ledger clean.
	r := m.Round
	want := struct{ link, end, ack int64 }{roundAcks + 1, roundAcks, roundAcks}
	if b := r.BySignal; b.Link != want.link || b.ReadToEnd != want.end || b.Acknowledged != want.ack || b.Button != 0 {
		t.Errorf("hosted notice's by_signal = %+v; want link %d, read_to_end %d, acknowledged %d", b, want.link, want.end, want.ack)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("by_signal: link %d, read_to_end %d, acknowledged %d", want.link, want.end, want.ack)) {
		t.Error("the output does not print the hosted notice's by_signal")
	}
	if pdf, err := os.ReadFile(r.EvidencePDF); err != nil || !bytes.HasPrefix(pdf, []byte("%PDF-")) || !r.EvidenceAcked || filepath.Dir(r.EvidencePDF) != m.EvidenceDir {
		t.Errorf("evidence PDF %q: %v (acknowledged in the record: %v); want a PDF in %s", r.EvidencePDF, err, r.EvidenceAcked, m.EvidenceDir)
	}
	if !r.Held || !r.SentOnce {
		t.Errorf("approval: held %v, sent once %v; want both", r.Held, r.SentOnce)
	}
	if !r.JoinerCarded || r.PendingJoiners != 1 {
		t.Errorf("standing notice: joiner carded %v, pending %d; want the new hire carded, 1 pending", r.JoinerCarded, r.PendingJoiners)
	}
	var readingPage bool
	for _, c := range m.Fake.Sent() {
		readingPage = readingPage || bytes.Contains(c.Raw, []byte(`/r/hr/`+r.MsgID+`?to=`))
	}
	if !readingPage {
		t.Errorf("no card of %s opens the reading page", r.MsgID)
	}
	// Under read_rule acknowledged the card's button opens the page to
	// read and confirm: a 我已阅读 press there would count for nothing
	// (issue 49, finding 5).
	for _, c := range m.Fake.Sent() {
		var b struct {
			TemplateCard struct {
				TaskID     string `json:"task_id"`
				ButtonList []struct {
					Text string `json:"text"`
					Type int    `json:"type"`
					URL  string `json:"url"`
				} `json:"button_list"`
			} `json:"template_card"`
		}
		if json.Unmarshal(c.Raw, &b) != nil || !sameMsg(b.TemplateCard.TaskID, r.MsgID) {
			continue
		}
		bl := b.TemplateCard.ButtonList
		if len(bl) != 1 || bl[0].Type != 1 || bl[0].Text != "阅读并确认" || !strings.Contains(bl[0].URL, "/r/hr/"+r.MsgID) {
			t.Errorf("card of the acknowledged notice: buttons %+v; want one 阅读并确认 opening the reading page", bl)
			break
		}
	}
	if n := m.cardsOf(r.ApprovalMsgID); len(n) != 200 {
		t.Errorf("the approved notice reached %d people; want 200", len(n))
	}
	if r.Root.Size == 0 || r.Root.Size != uint64(r.Entries) || len(r.Problems) != 0 || !strings.Contains(out.String(), "verify: clean") {
		t.Errorf("ledger: day root %+v, %d entries checked, problems %v; want a root over every entry and verify: clean", r.Root, r.Entries, r.Problems)
	}

	// The pack checks, and a copy with one member's claim moved onto
	// another and rehashed is refused.
	if !r.PackChecked || r.PackFacts == 0 || len(r.ForgedProblems) == 0 || !strings.Contains(out.String(), "refused:") {
		t.Errorf("pack: checked %v (%d facts), forged copy's problems %q; want it checked and the forgery refused", r.PackChecked, r.PackFacts, r.ForgedProblems)
	}

	// The printed login opens the dashboard page.
	if !strings.Contains(out.String(), m.Password) || !strings.Contains(out.String(), m.DashboardURL) {
		t.Errorf("output lacks the dashboard URL or the password:\n%s", out)
	}
	if code := login(t, m.DashboardURL, m.User, m.Password); code != http.StatusOK {
		t.Errorf("GET / after login = %d; want 200", code)
	}

	// The banner's leader signs in with WeCom through the fake and sees
	// their department's subtree only.
	if m.Leader == "" || !strings.Contains(out.String(), "使用企业微信登录 → "+m.Leader+", leader of "+m.LeaderDept) {
		t.Errorf("the banner names no department leader to sign in as (%q):\n%s", m.Leader, out)
	} else {
		signInAsLeader(t, m)
	}

	addrs := []string{m.App.DashboardAddr, m.App.ReceiverAddr, m.Servers.RedisAddr, m.Servers.KafkaBrokers[0], m.fakeSrv.Addr, m.front.addr}
	closed = true
	if err := m.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	for _, a := range addrs {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listening after Close", a)
		}
	}
}

// login signs in through the form and returns the status of the page.
func login(t *testing.T, base, user, password string) int {
	t.Helper()
	var session *http.Cookie
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"login", url.Values{"username": {user}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == "yidu_session" {
			session = c
		}
	}
	if resp.StatusCode != http.StatusSeeOther || session == nil {
		t.Fatalf("POST /login = %d, session cookie %v; want 303 and a session", resp.StatusCode, session)
	}
	req, _ := http.NewRequest(http.MethodGet, base, nil)
	req.AddCookie(session)
	resp, err = noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !bytes.Contains(b, []byte(demoTitle)) {
		t.Errorf("dashboard page does not list %q", demoTitle)
	}
	return resp.StatusCode
}

// signInAsLeader signs in as the banner's leader through the fake
// WeCom's web login, as the browser would (redirects followed, cookies
// kept), and checks that the notice's progress covers the people of the
// department they lead, with its subtree, and nobody else.
func signInAsLeader(t *testing.T, m *Main) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(target string) (*http.Response, []byte) {
		t.Helper()
		resp, err := c.Get(target)
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	resp, page := get(m.DashboardURL + "login/wecom?next=" + url.QueryEscape("/m/"+m.MsgID))
	signIn := resp.Request.URL
	if resp.StatusCode != http.StatusOK || signIn.Host != m.fakeSrv.Addr || !bytes.Contains(page, []byte(`data-userid="`+m.Leader+`"`)) {
		t.Fatalf("sign-in with WeCom = %d at %s; want the fake's page listing %s", resp.StatusCode, signIn, m.Leader)
	}
	q := signIn.Query()
	q.Set("as", m.Leader)
	signIn.RawQuery = q.Encode()
	resp, _ = get(signIn.String())
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/m/"+m.MsgID {
		t.Fatalf("signing in as %s ended %d at %s; want the notice's page", m.Leader, resp.StatusCode, resp.Request.URL)
	}
	var led int
	if _, err := fmt.Sscanf(m.LeaderDept[strings.LastIndex(m.LeaderDept, "(")+1:], "%d)", &led); err != nil {
		t.Fatalf("leader's department %q: %v", m.LeaderDept, err)
	}
	subtree := map[int]bool{led: true}
	for changed := true; changed; {
		changed = false
		for _, d := range m.company.Departments {
			if subtree[d.ParentID] && !subtree[d.ID] {
				subtree[d.ID], changed = true, true
			}
		}
	}
	want := 0
	for _, u := range m.company.Users {
		if slices.ContainsFunc(u.Departments, func(d int) bool { return subtree[d] }) {
			want++
		}
	}
	resp, body := get(m.DashboardURL + "api/v1/messages/" + url.PathEscape(m.MsgID) + "/progress")
	var pr struct {
		Recipients int `json:"recipients"`
	}
	if err := json.Unmarshal(body, &pr); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the leader's /progress = %d %s: %v", resp.StatusCode, body, err)
	}
	if pr.Recipients != want || want == 0 || want == m.employees {
		t.Errorf("the leader's /progress counts %d recipients; want their subtree's %d (of %d)", pr.Recipients, want, m.employees)
	}
}

func readerSet(p plan) map[string]bool {
	s := map[string]bool{}
	for _, it := range p.items {
		s[it.ev.UserID] = true
	}
	return s
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string // "" for none
		check   func(*Main) bool
	}{
		{"defaults", nil, "", func(m *Main) bool {
			return m.Employees == 0 && m.Departments == 60 && m.Speed == 1 && m.Send && !m.ExitWhenDone &&
				m.ListenDashboard == "127.0.0.1:8081" && m.ListenReceiver == "127.0.0.1:0"
		}},
		{"test run", []string{"-employees", "200", "-speed", "50", "-exit-when-done", "-timeout", "45s"}, "", func(m *Main) bool {
			return m.Employees == 200 && m.Speed == 50 && m.ExitWhenDone && m.Timeout == 45*time.Second
		}},
		{"no send", []string{"-send=false"}, "", func(m *Main) bool { return !m.Send }},
		{"help", []string{"-h"}, "help requested", nil},
		{"zero speed", []string{"-speed", "0"}, "-speed", nil},
		{"negative employees", []string{"-employees", "-1"}, "-employees", nil},
		{"no departments", []string{"-departments", "0"}, "-departments", nil},
		{"negative timeout", []string{"-timeout", "-1s"}, "-timeout", nil},
		{"stray argument", []string{"now"}, "unexpected arguments", nil},
		{"unknown flag", []string{"-users", "5"}, "not defined", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMain()
			var stderr bytes.Buffer
			m.Stderr = &stderr
			err := m.ParseFlags(tt.args)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ParseFlags(%q) = %v; want nil", tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ParseFlags(%q) = %v; want an error containing %q", tt.args, err, tt.wantErr)
			case tt.check != nil && !tt.check(m):
				t.Errorf("ParseFlags(%q) gave %+v", tt.args, m)
			}
			if tt.name == "help" && (!errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "-exit-when-done")) {
				t.Errorf("-h: err %v, usage %q; want flag.ErrHelp and the flags", err, stderr.String())
			}
		})
	}
}

func TestMakePlan(t *testing.T) {
	tests := []struct {
		name      string
		employees int
		speed     float64
	}{
		{"tiny", 3, 1},
		{"test run", 200, 50},
		{"default", 2000, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			corp := wecomsim.Company("c", 1000002, "s", tt.employees, 60)
			cards := map[string]card{}
			for i, u := range corp.Users {
				cards[u.UserID] = card{TaskID: wecomsim.TaskID("m", i), Key: "k"}
			}
			p := makePlan(corp.Users, cards, 60, tt.speed, 7)
			again := makePlan(corp.Users, cards, 60, tt.speed, 7)
			if fmt.Sprint(p) != fmt.Sprint(again) {
				t.Error("makePlan is not deterministic for a seed")
			}
			if got := len(readerSet(p)); got != p.readers {
				t.Errorf("distinct users in items = %d; readers = %d", got, p.readers)
			}
			if !slices.IsSortedFunc(p.items, func(a, b item) int { return int(a.at - b.at) }) {
				t.Error("items are not in time order")
			}
			limit := time.Duration(float64(maxDelay+6*time.Second) / tt.speed)
			seen := map[int]bool{}
			var dups, lost, cards2 int
			for _, it := range p.items {
				if it.at < 0 || it.at > limit {
					t.Errorf("item at %v; want within [0, %v]", it.at, limit)
				}
				if it.dup {
					dups++
					if !seen[it.id] {
						t.Errorf("duplicate of callback %d comes before it", it.id)
					}
				}
				seen[it.id] = true
				if it.lost {
					lost++
				}
				if it.ev.Kind == wecomsim.KindCard {
					cards2++
					if c := cards[it.ev.UserID]; it.ev.TaskID != c.TaskID || it.ev.EventKey != "k" {
						t.Errorf("card of %s = %q/%q; want %q/k", it.ev.UserID, it.ev.TaskID, it.ev.EventKey, c.TaskID)
					}
				}
			}
			if p.callbacks > 0 && (dups != p.duplicates || dups < 1 || lost != p.flaky || lost < 1) {
				t.Errorf("duplicates %d (plan %d), lost %d (plan %d); want at least one of each", dups, p.duplicates, lost, p.flaky)
			}
			if len(p.items) != p.callbacks+p.duplicates {
				t.Errorf("%d items; want %d callbacks + %d duplicates", len(p.items), p.callbacks, p.duplicates)
			}
			if tt.employees >= 2000 {
				share := float64(p.readers) / float64(tt.employees)
				if share < 0.9 || share > 0.94 || p.enterOnly == 0 || cards2 == 0 {
					t.Errorf("readers %.3f of employees, %d enter-only, %d cards; want about 0.92 and both kinds", share, p.enterOnly, cards2)
				}
			}
		})
	}
}

// TestFrontLosesFirstAnswer checks the simulated internet: a marked
// callback's first answer is lost, alternately before and after the
// receiver saw it, and the retry goes through.
func TestFrontLosesFirstAnswer(t *testing.T) {
	var hits atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer rcv.Close()
	f, err := startFront(strings.TrimPrefix(rcv.URL, "http://"), 2, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer f.close(context.Background())
	post := func(u string) int {
		resp, err := http.Post(u, "text/xml", strings.NewReader("<xml/>"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	base := "http://" + f.addr + "/wecom/callback/hr?msg_signature="
	f.loseFirstAnswer(base + "a")
	f.loseFirstAnswer(base + "b")
	steps := []struct {
		url      string
		wantCode int
		wantHits int64
	}{
		{base + "a", http.StatusBadGateway, 0},     // lost before the receiver
		{base + "a", http.StatusOK, 1},             // WeCom's retry
		{base + "b", http.StatusGatewayTimeout, 2}, // lost after the receiver
		{base + "b", http.StatusOK, 3},
		{base + "c", http.StatusOK, 4}, // unmarked
	}
	for i, s := range steps {
		if got := post(s.url); got != s.wantCode || hits.Load() != s.wantHits {
			t.Errorf("step %d: status %d, receiver hits %d; want %d, %d", i, got, hits.Load(), s.wantCode, s.wantHits)
		}
	}
}
