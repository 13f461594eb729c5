package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"github.com/yidu-io/yidu/evidence"
	"github.com/yidu-io/yidu/ledger"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/silenceper/wechat/v2/util"
	"golang.org/x/mod/sumdb/note"

	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/cmd/internal/config"
	"github.com/yidu-io/yidu/internal/testenv"
)

const (
	testToken  = "QDG6eK"
	testAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	testCorp   = "wx5823bf96d3bd56c7"
	testAgent  = 218
	apiToken   = "e2e-api-token-0123456789"
)

// testMembers are the members the directory of testCorp holds (a sync's
// work): a registration's audience is made of known members only.
var testMembers = []string{"zhangsan", "lisi", "wangwu", "mallory"}

// seedMembers puts userIDs in corp's directory, as a directory sync would.
func seedMembers(tb testing.TB, m *Main, corp string, userIDs ...string) {
	tb.Helper()
	if _, err := m.Mapper.Assign(context.Background(), corp, userIDs); err != nil {
		tb.Fatalf("seed members: %v", err)
	}
}

// MustRunMain starts every role against the real MariaDB and Redis and an
// in-process kfake cluster, on :0 addresses, and closes it at the end.
func MustRunMain(tb testing.TB) (*Main, config.Config) {
	tb.Helper()
	m := mustRunMainWith(tb, nil)
	return m, m.Config
}

// mustRunMainWith is MustRunMain with edit (may be nil) applied to the
// configuration before it is validated (the browser test adds a dashboard
// user, the hostile-input test a second corp).
func mustRunMainWith(tb testing.TB, edit func(*config.Config)) *Main {
	tb.Helper()
	cfg := config.Default()
	cfg.MySQL.DSN = testenv.MySQLDSN(tb)
	_, prefix := testenv.Redis(tb)
	cfg.Redis.Addr = testenv.RedisAddr(tb)
	cfg.Redis.Prefix = prefix
	cfg.Kafka.Brokers, cfg.Kafka.Topic = testenv.Topic(tb, "yidu.reads", 4)
	cfg.Kafka.Group = testenv.RandomName("yidu-flushd-")
	cfg.Flushd.Interval = config.Duration(200 * time.Millisecond)
	cfg.Receiver.Listen = "127.0.0.1:0"
	cfg.Dashboard.Listen = "127.0.0.1:0"
	cfg.Dashboard.Tokens = []config.Token{{Name: "e2e", Token: apiToken, Corps: []string{testCorp}}}
	cfg.Apps = []config.App{{Name: "hr", CorpID: testCorp, AgentID: testAgent, Token: testToken, EncodingAESKey: testAESKey, ReadButtonKey: "yidu_read"}}
	skey, _, err := note.GenerateKey(rand.Reader, "yidu.test")
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Ledger.SigningKey = skey
	if edit != nil {
		edit(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("config: %v", err)
	}
	m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := m.Run(context.Background(), All); err != nil {
		m.Close()
		tb.Fatalf("Run: %v", err)
	}
	seedMembers(tb, m, testCorp, testMembers...)
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return m
}

func api(tb testing.TB, m *Main, method, path string, body any, out any) int {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+m.DashboardAddr+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return resp.StatusCode
}

// deliver posts one signed, encrypted callback with plaintext xml.
func deliver(tb testing.TB, m *Main, xml string) int {
	tb.Helper()
	code, _ := deliverReply(tb, m, xml)
	return code
}

// deliverReply is deliver returning the answer's body too.
func deliverReply(tb testing.TB, m *Main, xml string) (int, []byte) {
	tb.Helper()
	c, err := wxcrypt.New(testToken, testAESKey, testCorp)
	if err != nil {
		tb.Fatal(err)
	}
	q, body, err := c.Post([]byte(xml), testAgent, strconv.FormatInt(time.Now().Unix(), 10), "n0nce")
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.Post("http://"+m.ReceiverAddr+"/wecom/callback/hr?"+q.Encode(), "text/xml", bytes.NewReader(body))
	if err != nil {
		tb.Fatalf("post callback: %v", err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, reply
}

// TestServePassiveReply: a recipient's press gets 200 with WeCom's
// encrypted update_button reply (doc path 90241), as WeCom decrypts it
// (silenceper's util), once the read is durable; the dashboard counts it.
func TestServePassiveReply(t *testing.T) {
	m, _ := MustRunMain(t)
	reg := map[string]any{"msgid": "notice-reply", "app": "hr", "title": "t",
		"audience": map[string]any{"userids": []string{"zhangsan"}}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	for range 2 { // a repeated press gets the same reply
		code, body := deliverReply(t, m, cardEvent("zhangsan", "notice-reply@0", time.Now().Unix()))
		if code != http.StatusOK {
			t.Fatalf("press = %d %q; want 200", code, body)
		}
		var env struct {
			Encrypt, MsgSignature, TimeStamp, Nonce string
		}
		if err := xml.Unmarshal(body, &env); err != nil {
			t.Fatalf("reply %q: %v", body, err)
		}
		if want := util.Signature(testToken, env.TimeStamp, env.Nonce, env.Encrypt); env.MsgSignature != want {
			t.Errorf("reply MsgSignature = %s; want %s", env.MsgSignature, want)
		}
		_, plain, err := util.DecryptMsg(testCorp, env.Encrypt, testAESKey)
		if err != nil {
			t.Fatalf("DecryptMsg: %v", err)
		}
		var ub struct {
			ToUserName, FromUserName, MsgType string
			ReplaceName                       string `xml:"Button>ReplaceName"`
		}
		if err := xml.Unmarshal(plain, &ub); err != nil {
			t.Fatal(err)
		}
		if ub.ToUserName != "zhangsan" || ub.FromUserName != testCorp || ub.MsgType != "update_button" || ub.ReplaceName != config.DefaultReadReply {
			t.Errorf("reply = %+v; want update_button %q to zhangsan from %s", ub, config.DefaultReadReply, testCorp)
		}
	}
	// A press yidu keeps nowhere gets 200 and an empty body: telling the
	// member "read" would be untrue (HR sees them unread, or not at all).
	for _, tc := range []struct{ name, user, taskID string }{
		{"non-recipient", "lisi", "notice-reply@0"},
		{"member unknown to the directory", "stranger", "notice-reply@0"},
		{"unknown message", "zhangsan", "no-such-notice@0"},
		{"another card's task id", "zhangsan", "notice-reply-0"},
	} {
		code, body := deliverReply(t, m, cardEvent(tc.user, tc.taskID, time.Now().Unix()))
		if code != http.StatusOK || len(body) != 0 {
			t.Errorf("%s: press = %d %q; want 200 and no passive reply", tc.name, code, body)
		}
	}
	var p progressJSON
	if code := api(t, m, "GET", "/messages/notice-reply/progress", nil, &p); code != http.StatusOK || p.Read != 1 {
		t.Errorf("progress = %d %+v; want 1 read", code, p)
	}
}

func cardEvent(user, taskID string, at int64) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[yidu_read]]></EventKey><TaskId><![CDATA[%s]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc]]></ResponseCode><AgentID>%d</AgentID></xml>`,
		testCorp, user, at, taskID, testAgent)
}

func enterAgent(user string, at int64) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[enter_agent]]></Event><EventKey><![CDATA[]]></EventKey><AgentID>%d</AgentID></xml>`,
		testCorp, user, at, testAgent)
}

type progressJSON struct {
	Recipients int64 `json:"recipients"`
	Read       int64 `json:"read"`
	Unread     int64 `json:"unread"`
	BySignal   struct {
		Button     int64 `json:"button"`
		Link       int64 `json:"link"`
		EnterAgent int64 `json:"enter_agent"`
	} `json:"by_signal"`
}

// TestServeEndToEnd drives the whole pipeline as WeCom and HR would:
// register a notice through the API, deliver callbacks (including a
// duplicate, a non-recipient, a forged one and an enter_agent), and see
// exact numbers on the dashboard at once and in MySQL after one interval.
// Opening the app is recorded but is not a read (the default read
// signals): Alice reads only when she presses the button afterwards.
func TestServeEndToEnd(t *testing.T) {
	m, _ := MustRunMain(t)
	seedMembers(t, m, testCorp, "Alice")
	sentAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	reg := map[string]any{
		"msgid": "notice-e2e", "app": "hr", "title": "年度政策 / policy",
		"sent_at":  sentAt,
		"audience": map[string]any{"userids": []string{"zhangsan", "lisi", "wangwu", "Alice"}},
	}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusOK {
		t.Errorf("re-register = %d; want 200 (idempotent)", code)
	}
	conflict := map[string]any{"msgid": "notice-e2e", "app": "hr", "title": "other", "sent_at": sentAt,
		"audience": map[string]any{"userids": []string{"zhangsan"}}}
	if code := api(t, m, "POST", "/messages", conflict, nil); code != http.StatusConflict {
		t.Errorf("conflicting register = %d; want 409", code)
	}

	readAt := sentAt.Add(10 * time.Second).Unix()
	steps := []struct {
		name string
		xml  string
		want int
	}{
		{"card zhangsan", cardEvent("zhangsan", "notice-e2e@0", readAt), 200},
		{"card lisi", cardEvent("lisi", "notice-e2e@0", readAt+1), 200},
		{"duplicate zhangsan", cardEvent("zhangsan", "notice-e2e@0", readAt+5), 200},
		{"non-recipient", cardEvent("mallory", "notice-e2e@0", readAt), 200},
		{"unknown msgid", cardEvent("wangwu", "nosuch@0", readAt), 200},
		{"enter_agent Alice", enterAgent("Alice", readAt+2), 200},
		{"enter_agent before send", enterAgent("wangwu", sentAt.Unix()-30), 200},
	}
	for _, s := range steps {
		if got := deliver(t, m, s.xml); got != s.want {
			t.Errorf("%s: status %d; want %d", s.name, got, s.want)
		}
	}
	// A forged callback: signed with another token.
	forged, _ := wxcrypt.New("not-the-token", testAESKey, testCorp)
	q, body, _ := forged.Post([]byte(cardEvent("wangwu", "notice-e2e@0", readAt)), testAgent, strconv.FormatInt(time.Now().Unix(), 10), "n")
	resp, err := http.Post("http://"+m.ReceiverAddr+"/wecom/callback/hr?"+q.Encode(), "text/xml", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged callback = %d; want 401", resp.StatusCode)
	}

	var p progressJSON
	if code := api(t, m, "GET", "/messages/notice-e2e/progress", nil, &p); code != 200 {
		t.Fatalf("progress = %d", code)
	}
	if p.Recipients != 4 || p.Read != 2 || p.Unread != 2 || p.BySignal.Button != 2 || p.BySignal.EnterAgent != 1 || p.BySignal.Link != 0 {
		t.Errorf("progress = %+v; want 4 recipients, 2 read (enter_agent does not count), by_signal button 2, enter_agent 1", p)
	}
	if got := deliver(t, m, cardEvent("Alice", "notice-e2e@0", readAt+20)); got != 200 {
		t.Errorf("card Alice after enter_agent: status %d; want 200", got)
	}
	if api(t, m, "GET", "/messages/notice-e2e/progress", nil, &p); p.Read != 3 || p.BySignal.Button != 3 || p.BySignal.EnterAgent != 1 {
		t.Errorf("progress after Alice's press = %+v; want 3 read, by_signal button 3, enter_agent 1", p)
	}

	// MySQL holds exactly the same reads, with their own read times and
	// first signal, and each signal's first time, after one flush interval.
	waitRows(t, m, "notice-e2e", map[string]string{
		"zhangsan": fmt.Sprintf("read %d source 1 button %d", readAt, readAt),
		"lisi":     fmt.Sprintf("read %d source 1 button %d", readAt+1, readAt+1),
		"Alice":    fmt.Sprintf("read %d source 1 button %d enter %d", readAt+20, readAt+20, readAt+2),
		"wangwu":   "unread",
	})
	// The evidence ledger: flushd wrote one signal entry per read row in
	// the same transactions, and it agrees with them (issue 40).
	rep, err := m.Ledger.Verify(context.Background(), testCorp, "")
	if err != nil || len(rep.Problems) != 0 || rep.Facts < 3 {
		t.Errorf("ledger verify = %d entries, %d facts, %v, %v; want the 3 reads, clean", rep.Entries, rep.Facts, rep.Problems, err)
	}
	es, err := m.Ledger.EntriesFor(context.Background(), testCorp, "notice-e2e", "Alice")
	// Her read, and her entering the app before it (enter_at, which does
	// not count here): a seen entry (issue 48).
	kinds := map[ledger.Kind]string{}
	for _, e := range es {
		kinds[e.Kind] = string(e.Body)
	}
	if err != nil || len(es) != 2 || !strings.Contains(kinds[ledger.KindSignal], time.Unix(readAt+20, 0).UTC().Format(time.RFC3339)) ||
		!strings.Contains(kinds[ledger.KindSeen], `"signal":"enter_agent"`) {
		t.Errorf("Alice's entries = %v, %v; want her read and her entering the app", es, err)
	}
	// Her evidence record carries that entry with an inclusion proof that
	// holds against the day's root: the ledger is wired to the dashboard.
	var rec evidence.Record
	if code := api(t, m, "GET", "/messages/notice-e2e/evidence/Alice", nil, &rec); code != 200 {
		t.Fatalf("evidence = %d", code)
	}
	if !rec.LedgerConnected || len(rec.Ledger) != 2 || rec.Ledger[0].Proof == nil || rec.Ledger[1].Proof == nil {
		t.Fatalf("evidence ledger = %v, %+v; want her two entries with their proofs", rec.LedgerConnected, rec.Ledger)
	}
	e, pr := rec.Ledger[0], rec.Ledger[0].Proof
	leaf, root := unhex32(t, e.LeafHash), unhex32(t, pr.Root)
	path := make([][32]byte, len(pr.Path))
	for i, h := range pr.Path {
		path[i] = unhex32(t, h)
	}
	if err := evidence.VerifyInclusion(leaf, pr.Index, pr.TreeSize, path, root); err != nil || pr.Checkpoint == "" || rec.Checkpoint != pr.Checkpoint {
		t.Errorf("Alice's proof does not hold: %v (checkpoint %q, proof's %q)", err, rec.Checkpoint, pr.Checkpoint)
	}
}

// unhex32 decodes a hex SHA-256.
func unhex32(t *testing.T, s string) [32]byte {
	t.Helper()
	var h [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("hash %q: %v", s, err)
	}
	copy(h[:], b)
	return h
}

// TestServeEnterAgentCounts: an app that lists enter_agent in its
// read_signals counts an app entry after the send as a read.
func TestServeEnterAgentCounts(t *testing.T) {
	m := mustRunMainWith(t, func(c *config.Config) { c.Apps[0].ReadSignals = []string{"button", "link", "enter_agent"} })
	seedMembers(t, m, testCorp, "Alice")
	sentAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	reg := map[string]any{"msgid": "notice-enter", "app": "hr", "title": "t", "sent_at": sentAt,
		"audience": map[string]any{"userids": []string{"zhangsan", "Alice"}}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	at := sentAt.Add(10 * time.Second).Unix()
	for _, xml := range []string{enterAgent("Alice", at), cardEvent("Alice", "notice-enter@0", at+5), enterAgent("zhangsan", at+1)} {
		if got := deliver(t, m, xml); got != 200 {
			t.Fatalf("deliver = %d; want 200", got)
		}
	}
	var p progressJSON
	if api(t, m, "GET", "/messages/notice-enter/progress", nil, &p); p.Read != 2 || p.BySignal.EnterAgent != 2 || p.BySignal.Button != 1 {
		t.Errorf("progress = %+v; want 2 read, by_signal enter_agent 2, button 1", p)
	}
	waitRows(t, m, "notice-enter", map[string]string{
		"Alice":    fmt.Sprintf("read %d source 2 button %d enter %d", at, at+5, at),
		"zhangsan": fmt.Sprintf("read %d source 2 enter %d", at+1, at+1),
	})
}

// waitRows waits until message_read_record of msgID says want, by UserID:
// "unread", or "read <read_time> source <n>" followed by each signal's
// first time ("button", "link", "enter"), all in unix seconds.
func waitRows(t *testing.T, m *Main, msgID string, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := map[string]string{}
		rows, err := m.DB.Query(`SELECT u.userid, r.is_read, UNIX_TIMESTAMP(r.read_time), r.source,
			UNIX_TIMESTAMP(r.button_at), UNIX_TIMESTAMP(r.link_at), UNIX_TIMESTAMP(r.enter_at)
			FROM message_read_record r JOIN users u ON u.corp_id = r.corp_id AND u.uid = r.uid
			WHERE r.corp_id = ? AND r.msgid = ?`, testCorp, msgID)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var u string
			var read bool
			var source int
			var at, button, link, enter sql.NullFloat64
			if err := rows.Scan(&u, &read, &at, &source, &button, &link, &enter); err != nil {
				t.Fatal(err)
			}
			s := "unread"
			if read {
				s = fmt.Sprintf("read %d source %d", int64(at.Float64), source)
			}
			for _, c := range []struct {
				name string
				t    sql.NullFloat64
			}{{"button", button}, {"link", link}, {"enter", enter}} {
				if c.t.Valid && read {
					s += fmt.Sprintf(" %s %d", c.name, int64(c.t.Float64))
				}
			}
			got[u] = s
		}
		rows.Close()
		if fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("MySQL rows = %v; want %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServeUnknownUserIDs: made-up UserIDs in a registration are reported
// back and never become members, so a later "all" audience is the
// directory's (issue: made-up UserIDs inflated later audiences).
func TestServeUnknownUserIDs(t *testing.T) {
	m, _ := MustRunMain(t)
	var got struct {
		Recipients     int64    `json:"recipients"`
		UnknownUserIDs []string `json:"unknown_userids"`
	}
	reg := map[string]any{"msgid": "notice-made-up", "app": "hr", "title": "t",
		"audience": map[string]any{"userids": []string{"zhangsan", "ghost-1", "ghost-2", "LISI"}}}
	if code := api(t, m, "POST", "/messages", reg, &got); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	if got.Recipients != 2 || !slices.Equal(got.UnknownUserIDs, []string{"ghost-1", "ghost-2"}) {
		t.Errorf("register = %+v; want 2 recipients (LISI is lisi) and ghost-1, ghost-2 unknown", got)
	}
	all := map[string]any{"msgid": "notice-all", "app": "hr", "title": "t", "audience": map[string]any{"all": true}}
	if code := api(t, m, "POST", "/messages", all, &got); code != http.StatusCreated || got.Recipients != int64(len(testMembers)) {
		t.Errorf("register all = %d %+v; want %d recipients, the directory's", code, got, len(testMembers))
	}
	only := map[string]any{"msgid": "notice-ghosts", "app": "hr", "title": "t",
		"audience": map[string]any{"userids": []string{"ghost-3"}}}
	if code := api(t, m, "POST", "/messages", only, nil); code != http.StatusBadRequest {
		t.Errorf("register of nobody known = %d; want 400", code)
	}
}
