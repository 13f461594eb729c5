package faulttest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestFollowUpRounds (issue 30): a notice to six members of 销售部 sent
// through `yidu dashboard` with the policy +3 s, +6 s and escalation after
// round 1 (min_reminder_delay 1s). Members press the card through `yidu
// receiver` between the rounds. Each round reaches exactly the
// non-readers of its moment, and 销售部's leader gets one digest after
// round 1 with the counts of that moment.
func TestFollowUpRounds(t *testing.T) {
	testenv.Long(t)
	members := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
	fr := newFollowRig(t, members)
	fake, db := fr.fake, fr.db
	_, rcv := fr.start("receiver", "receiver", "/healthz")
	_, dash := fr.start("dashboard", "dashboard", "/login")
	press := newWeCom(t, rcv)

	body, _ := json.Marshal(map[string]any{"msgid": "follow-1", "app": app.Name, "title": "新考勤制度",
		"audience": map[string]any{"userids": members}, "send": true,
		"follow_up": map[string]any{"reminders": []string{"3s", "6s"}, "escalate_after": 1}})
	req, _ := http.NewRequest(http.MethodPost, "http://"+dash+"/api/v1/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(out), `"follow_up"`) {
		t.Fatalf("POST = %d %s", resp.StatusCode, out)
	}
	pressAll := func(us ...string) {
		for _, u := range us {
			press.deliver(context.Background(), readEvent{MsgID: "follow-1", User: u, At: time.Now().Unix()})
		}
	}
	roundState := func(round int) string {
		var s string
		_ = db.QueryRow(`SELECT state FROM follow_up_rounds WHERE msgid = 'follow-1' AND round = ?`, round).Scan(&s)
		return s
	}
	// Two read before round 1, one more before round 2.
	pressAll("m0", "m1")
	if s := roundState(1); s != "" {
		t.Fatalf("round 1 is %q before its time", s)
	}
	testenv.WaitFor(t, 20*time.Second, "round 1 sent", func() bool { return roundState(1) == "sent" })
	pressAll("m2")
	testenv.WaitFor(t, 20*time.Second, "round 2 sent", func() bool { return roundState(2) == "sent" })

	// Rounds are reminder cards (task_id <msgid>@f<round>-<batch>); a
	// digest is a text message (tracker.Registry.Digest).
	to := map[string][][]string{} // task_id up to the batch -> each call's touser
	var digests []string          // "touser: content"
	for _, s := range fake.Sent() {
		if s.Body["msgtype"] == "text" {
			c, _ := s.Body["text"].(map[string]any)
			digests = append(digests, fmt.Sprint(s.Body["touser"])+": "+fmt.Sprint(c["content"]))
			continue
		}
		c, _ := s.Body["template_card"].(map[string]any)
		task := fmt.Sprint(c["task_id"])
		if i := strings.LastIndexByte(task, '-'); strings.Contains(task, "@f") && i > 0 {
			task = task[:i+1]
		}
		u := strings.Split(fmt.Sprint(s.Body["touser"]), "|")
		slices.Sort(u)
		to[task] = append(to[task], u)
	}
	want := map[string][][]string{
		"follow-1@0":   {members},
		"follow-1@f1-": {{"m2", "m3", "m4", "m5"}},
		"follow-1@f2-": {{"m3", "m4", "m5"}},
	}
	if fmt.Sprint(to) != fmt.Sprint(want) {
		t.Errorf("cards went to %v; want %v", to, want)
	}
	// lead leads 销售部, all six; ceo leads 总部, where no recipient is.
	if len(digests) != 1 || !strings.HasPrefix(digests[0], "lead: 您负责的 6 人中有 4 人未读《新考勤制度》") {
		t.Errorf("digests %q; want one to lead: 6 people, 4 unread", digests)
	}
	// The message JSON reports both rounds.
	req, _ = http.NewRequest(http.MethodGet, "http://"+dash+"/api/v1/messages/follow-1", nil)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		FollowUp struct {
			Rounds []struct {
				Round     int  `json:"round"`
				SentTo    int  `json:"sent_to"`
				Escalated bool `json:"escalated"`
			} `json:"rounds"`
		} `json:"follow_up"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if r := m.FollowUp.Rounds; len(r) != 2 || r[0].SentTo != 4 || !r[0].Escalated || r[1].SentTo != 3 || r[1].Escalated {
		t.Errorf("message JSON rounds %+v; want round 1 to 4 escalated, round 2 to 3", r)
	}
}

// followRig is a follow-up scenario's deployment: a fake WeCom (behind
// slowWeCom) whose 销售部 (members, led by "lead") sits under 总部 (led
// by "ceo"), the directory synced into MySQL, and start, which runs a
// yidu role on the shared configuration (min_reminder_delay 1s).
type followRig struct {
	fake  *fakewecom.Server
	slow  *slowWeCom
	db    *sql.DB
	start func(name, role, path string) (*rig.Proc, string)
	// rdb and prefix are the Redis the processes use, and their keys'
	// prefix.
	rdb    *redis.Client
	prefix string
}

func newFollowRig(t *testing.T, members []string) *followRig {
	t.Helper()
	const secret = "follow-secret"
	all := append(slices.Clone(members), "lead", "ceo")
	var users []fakewecom.User
	for _, u := range members {
		users = append(users, fakewecom.User{UserID: u, Name: u, Departments: []int{2}})
	}
	users = append(users, fakewecom.User{UserID: "lead", Name: "lead", Departments: []int{1}}, fakewecom.User{UserID: "ceo", Name: "ceo", Departments: []int{1}})
	fake := fakewecom.New(fakewecom.Corp{CorpID: app.CorpID, Apps: []fakewecom.App{{AgentID: app.AgentID, Secret: secret}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部", Leaders: []string{"ceo"}}, {ID: 2, ParentID: 1, Name: "销售部", Leaders: []string{"lead"}}},
		Users:       users})
	slow := &slowWeCom{h: fake, calls: map[string]int{}}
	hs := httptest.NewServer(slow)
	t.Cleanup(hs.Close)

	dsn := testenv.MySQLDSN(t)
	db := openUTC(t, dsn)
	rdb, prefix := testenv.Redis(t)
	// The directory as a sync leaves it (department/list's
	// department_leader, doc path 90208).
	dir, err := idmap.New(db, idmap.Options{})
	testenv.Check(t, "idmap", err)
	uids, err := dir.Assign(context.Background(), app.CorpID, all)
	testenv.Check(t, "seed members", err)
	exec := func(q string, args ...any) {
		t.Helper()
		_, err := db.Exec(q, args...)
		testenv.Check(t, q, err)
	}
	exec(`UPDATE users SET status = 1, name = userid WHERE corp_id = ?`, app.CorpID)
	exec(`INSERT INTO departments (corp_id, dept_id, parent_id, name) VALUES (?, 1, 0, '总部'), (?, 2, 1, '销售部')`, app.CorpID, app.CorpID)
	for i, u := range all {
		d := 2
		if u == "lead" || u == "ceo" {
			d = 1
		}
		exec(`INSERT INTO user_departments (corp_id, dept_id, uid) VALUES (?, ?, ?)`, app.CorpID, d, uids[all[i]])
	}
	exec(`INSERT INTO department_leaders (corp_id, dept_id, uid) VALUES (?, 1, ?), (?, 2, ?)`, app.CorpID, uids["ceo"], app.CorpID, uids["lead"])

	kafka := startKafka(t, 1)
	cfg := map[string]any{
		// The receiver's spool in the test's own directory, not the
		// runner's default (a soak or another test may hold that).
		"data_dir": t.TempDir(),
		"receiver": map[string]any{"listen": "127.0.0.1:0", "member_rate": 1000, "member_burst": 1000},
		"dashboard": map[string]any{"listen": "127.0.0.1:0", "min_reminder_delay": "1s",
			"tokens": []map[string]any{{"name": "faulttest", "token": apiToken, "corps": []string{app.CorpID}}}},
		"redis": map[string]any{"addr": testenv.RedisAddr(t), "prefix": prefix},
		"mysql": map[string]any{"dsn": dsn},
		"kafka": map[string]any{"brokers": []string{kafka.addr()}, "topic": topic, "group": group},
		"wecom": map[string]any{"api_base": hs.URL},
		"apps": []map[string]any{{"name": app.Name, "corp_id": app.CorpID, "agent_id": app.AgentID, "token": app.Token,
			"encoding_aes_key": app.EncodingAESKey, "read_button_key": app.ReadButtonKey, "secret": secret}},
	}
	b, err := yaml.Marshal(cfg)
	testenv.Check(t, "config", err)
	cfgPath := filepath.Join(t.TempDir(), "yidu.yaml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &followRig{fake: fake, slow: slow, db: db, rdb: rdb, prefix: prefix}
	r.start = func(name, role, path string) (*rig.Proc, string) {
		var addr string
		p, err := rig.StartReady(rig.Spec{Name: name, Path: yiduBin, Args: []string{role, "--config", cfgPath}, Env: os.Environ()},
			func(rp *rig.Proc) error {
				what := role
				if role == "serve" {
					what = "dashboard" // every role: the API is the dashboard's
				}
				a, err := rp.Addr(context.Background(), what, 15*time.Second)
				if err != nil {
					return err
				}
				addr = a
				return rp.WaitHTTP(context.Background(), "http://"+a+path, 15*time.Second)
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("--- %s log (tail) ---\n%s", name, p.Tail(20))
			}
			_ = p.Stop(5 * time.Second)
		})
		return p, addr
	}
	return r
}

// postNotice posts body to the dashboard at addr and wants 201.
func postNotice(t *testing.T, addr string, body map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/messages", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST = %d %s", resp.StatusCode, out)
	}
}

// TestFollowUpRoundKill (issue 30): 2,500 members, 100 of whom read
// before the round; round 1 is three batches of message/send, each call
// 1 s. The replica sending it is killed with -9 during its second batch
// and two new replicas start: the round finishes once its lease has
// expired, each batch is delivered once, and every non-reader, and only
// they, is reminded exactly once.
func TestFollowUpRoundKill(t *testing.T) {
	testenv.Long(t)
	members := make([]string, 2500)
	for i := range members {
		members[i] = userIDs.ID(i)
	}
	fr := newFollowRig(t, members)
	_, rcv := fr.start("receiver", "receiver", "/healthz")
	a, dash := fr.start("dashboard-a", "dashboard", "/login")
	press := newWeCom(t, rcv)
	postNotice(t, dash, map[string]any{"msgid": "follow-kill", "app": app.Name, "title": "全员通知",
		"audience": map[string]any{"userids": members}, "send": true,
		"follow_up": map[string]any{"reminders": []string{"4s"}}})
	for _, u := range members[:100] {
		press.deliver(context.Background(), readEvent{MsgID: "follow-kill", User: u, At: time.Now().Unix()})
	}
	fr.slow.mu.Lock()
	fr.slow.delay = time.Second
	fr.slow.mu.Unlock()
	testenv.WaitFor(t, 20*time.Second, "round 1's second batch in flight", func() bool {
		fr.slow.mu.Lock()
		defer fr.slow.mu.Unlock()
		return fr.slow.calls["follow-kill@f1-1"] > 0
	})
	a.Kill()
	fr.start("dashboard-b", "dashboard", "/login")
	fr.start("dashboard-c", "dashboard", "/login")
	testenv.WaitFor(t, 60*time.Second, "round 1 finished by a new replica", func() bool {
		var s string
		_ = fr.db.QueryRow(`SELECT state FROM follow_up_rounds WHERE msgid = 'follow-kill' AND round = 1`).Scan(&s)
		return s == "sent"
	})
	delivered := map[string]int{}
	reminded := map[string]int{}
	for _, s := range fr.fake.Sent() {
		c, _ := s.Body["template_card"].(map[string]any)
		task := fmt.Sprint(c["task_id"])
		if !strings.HasPrefix(task, "follow-kill@f1-") {
			continue
		}
		delivered[task]++
		for _, u := range strings.Split(fmt.Sprint(s.Body["touser"]), "|") {
			reminded[u]++
		}
	}
	for b := range 3 {
		if task := fmt.Sprintf("follow-kill@f1-%d", b); delivered[task] != 1 {
			t.Errorf("%s delivered %d times; want 1", task, delivered[task])
		}
	}
	for i, u := range members {
		want := 1
		if i < 100 {
			want = 0
		}
		if reminded[u] != want {
			t.Errorf("%s reminded %d times; want %d", u, reminded[u], want)
		}
	}
	if len(reminded) != len(members)-100 {
		t.Errorf("%d people reminded; want %d", len(reminded), len(members)-100)
	}
}

// TestServeSurvivesRounds (issue 46): one `yidu serve` (receiver,
// dashboard and flushd in one process) with five notices:
//   - "nobody", whose round 1 comes while nobody has read it (no read
//     key in Redis: a nil read set took the whole process down);
//   - "poison", whose stored policy cannot be read (it made every
//     planning of every notice fail, so no other round was ever planned),
//     and "poison-round", whose round fails each time (its recipients
//     are gone from Redis), beside "healthy", whose round must go all
//     the same;
//   - "crash", whose round is in flight when the process is killed with
//     -9: after the restart it completes, each person reminded once.
//
// The process answers throughout, "nobody"'s and "healthy"'s rounds
// reach everyone, the poisoned notice is counted in yidu_loop_item_failures_total.
func TestServeSurvivesRounds(t *testing.T) {
	testenv.Long(t)
	members := []string{"m0", "m1", "m2", "m3"}
	fr := newFollowRig(t, members)
	serve, dash := fr.start("serve", "serve", "/login")
	notice := func(msgID, after string) {
		postNotice(t, dash, map[string]any{"msgid": msgID, "app": app.Name, "title": "通知 " + msgID,
			"audience": map[string]any{"userids": members}, "send": true,
			"follow_up": map[string]any{"reminders": []string{after}}})
	}
	roundState := func(msgID string) string {
		var s string
		_ = fr.db.QueryRow(`SELECT state FROM follow_up_rounds WHERE msgid = ? AND round = 1`, msgID).Scan(&s)
		return s
	}
	answers := func(what string) {
		t.Helper()
		resp, err := http.Get("http://" + dash + "/login")
		if err != nil || !serve.Running() {
			t.Fatalf("%s: yidu serve does not answer (running %v): %v\n%s", what, serve.Running(), err, serve.Tail(30))
		}
		resp.Body.Close()
	}
	notice("nobody", "3s")
	testenv.WaitFor(t, 20*time.Second, "round 1 of the notice nobody read sent", func() bool {
		return roundState("nobody") == "sent" || !serve.Running()
	})
	answers("after a round of a notice nobody read")
	if s := roundState("nobody"); s != "sent" {
		t.Fatalf("round 1 of nobody is %q; want sent", s)
	}
	reminded := func(prefix string) map[string]int {
		out := map[string]int{}
		for _, s := range fr.fake.Sent() {
			c, _ := s.Body["template_card"].(map[string]any)
			if !strings.HasPrefix(fmt.Sprint(c["task_id"]), prefix) {
				continue
			}
			for _, u := range strings.Split(fmt.Sprint(s.Body["touser"]), "|") {
				out[u]++
			}
		}
		return out
	}
	if got := reminded("nobody@f1-"); len(got) != len(members) {
		t.Errorf("round 1 of nobody reminded %v; want every member once", got)
	}
	// A poisoned notice beside a healthy one: the healthy one's round is
	// planned and sent all the same.
	notice("poison", "1h")
	_, err := fr.db.Exec(`UPDATE follow_ups SET policy = '{"reminders": 5}' WHERE msgid = 'poison'`)
	testenv.Check(t, "poison the policy", err)
	// And a round that fails every time it runs: its notice's live
	// recipients are gone from Redis.
	notice("poison-round", "3s")
	testenv.Check(t, "poison the round", fr.rdb.Del(context.Background(), fr.prefix+":m:{"+app.CorpID+"/poison-round}:rcpt").Err())
	notice("healthy", "3s")
	testenv.WaitFor(t, 20*time.Second, "the healthy notice's round sent beside the poisoned one", func() bool {
		return roundState("healthy") == "sent" || !serve.Running()
	})
	answers("beside a poisoned notice")
	if s := roundState("healthy"); s != "sent" {
		t.Fatalf("round 1 of healthy is %q; want sent", s)
	}
	if s := roundState("poison-round"); s == "sent" {
		t.Errorf("round 1 of poison-round is sent without its recipients")
	}
	resp, err := http.Get("http://" + dash + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `yidu_loop_item_failures_total{loop="rounds"}`) ||
		strings.Contains(string(metrics), `yidu_loop_item_failures_total{loop="rounds"} 0`) {
		t.Errorf("the poisoned policy is not counted in yidu_loop_item_failures_total{loop=\"rounds\"}")
	}

	// A round in flight when the process dies completes once after the
	// restart (its lease, 30 s, runs out first).
	fr.slow.mu.Lock()
	fr.slow.delay = 3 * time.Second
	fr.slow.mu.Unlock()
	notice("crash", "2s")
	testenv.WaitFor(t, 20*time.Second, "the crash round in flight", func() bool {
		fr.slow.mu.Lock()
		defer fr.slow.mu.Unlock()
		return fr.slow.calls["crash@f1-0"] > 0
	})
	serve.Kill()
	fr.slow.mu.Lock()
	fr.slow.delay = 0
	fr.slow.mu.Unlock()
	serve, dash = fr.start("serve-2", "serve", "/login")
	testenv.WaitFor(t, 60*time.Second, "the crash round completed after the restart", func() bool {
		return roundState("crash") == "sent" || !serve.Running()
	})
	answers("after the restart")
	if s := roundState("crash"); s != "sent" {
		t.Fatalf("round 1 of crash is %q; want sent", s)
	}
	for _, u := range members {
		if n := reminded("crash@f1-")[u]; n != 1 {
			t.Errorf("%s reminded %d times by the interrupted round; want 1", u, n)
		}
	}
}
