package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/yidu-io/yidu/idmap"
	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestActsOnceAcrossProcesses (issue 37): two `yidu dashboard` processes
// on one MySQL and Redis, and a WeCom that takes 300 ms a message/send,
// so each act lasts while the others arrive. 16 concurrent "remind
// unread" across them send one reminder (one 200, fifteen 429) and each
// of 1,500 unread people gets one card; 16 concurrent "send now" of a
// scheduled notice make it due once (one 202) and each recipient gets
// one card; 16 concurrent recalls ask WeCom to recall each card once.
func TestActsOnceAcrossProcesses(t *testing.T) {
	testenv.Long(t)
	const secret = "acts-secret"
	members := 1500
	users := make([]fakewecom.User, members)
	ids := make([]string, members)
	for i := range users {
		ids[i] = userIDs.ID(i)
		users[i] = fakewecom.User{UserID: ids[i], Name: ids[i], Departments: []int{1}}
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: app.CorpID, Apps: []fakewecom.App{{AgentID: app.AgentID, Secret: secret}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}}, Users: users})
	slow := &slowWeCom{h: fake, calls: map[string]int{}, delay: 300 * time.Millisecond}
	hs := httptest.NewServer(slow)
	t.Cleanup(hs.Close)

	dsn := testenv.MySQLDSN(t)
	db := openUTC(t, dsn)
	_, prefix := testenv.Redis(t)
	dir, err := idmap.New(db, idmap.Options{})
	testenv.Check(t, "idmap", err)
	_, err = dir.Assign(context.Background(), app.CorpID, ids)
	testenv.Check(t, "seed members", err)
	kafka := startKafka(t, 1)
	cfg := map[string]any{
		"dashboard": map[string]any{"listen": "127.0.0.1:0",
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
	var addrs []string
	for _, name := range []string{"dashboard-a", "dashboard-b"} {
		var addr string
		p, err := rig.StartReady(rig.Spec{Name: name, Path: yiduBin, Args: []string{"dashboard", "--config", cfgPath}, Env: os.Environ()},
			func(rp *rig.Proc) error {
				a, err := rp.Addr(context.Background(), "dashboard", 15*time.Second)
				if err != nil {
					return err
				}
				addr = a
				return rp.WaitHTTP(context.Background(), "http://"+a+"/login", 15*time.Second)
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Stop(5 * time.Second) })
		addrs = append(addrs, addr)
	}

	call := func(addr, method, path string, body any) (int, map[string]any) {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://"+addr+"/api/v1"+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+apiToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, path, err)
			return 0, nil
		}
		defer resp.Body.Close()
		out := map[string]any{}
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	// storm posts path 16 times at once, alternating between the
	// processes, and counts the answers by status.
	storm := func(path string) (map[int]int, []map[string]any) {
		codes := map[int]int{}
		var outs []map[string]any
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code, out := call(addrs[i%2], "POST", path, map[string]any{})
				mu.Lock()
				codes[code]++
				outs = append(outs, out)
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		return codes, outs
	}
	// cards counts per UserID the cards of task_ids starting with prefix
	// whose rest is all digits (the notice's batches) or, with rest,
	// starting with it.
	cards := func(prefix, rest string) map[string]int {
		out := map[string]int{}
		for _, s := range fake.Sent() {
			c, _ := s.Body["template_card"].(map[string]any)
			task, _ := c["task_id"].(string)
			tail, ok := strings.CutPrefix(task, prefix)
			if !ok || (rest == "" && strings.Trim(tail, "0123456789") != "") || (rest != "" && !strings.HasPrefix(tail, rest)) {
				continue
			}
			to, _ := s.Body["touser"].(string)
			for _, u := range strings.Split(to, "|") {
				out[u]++
			}
		}
		return out
	}
	once := func(what string, got map[string]int) {
		t.Helper()
		bad := 0
		for _, id := range ids {
			if got[id] != 1 {
				bad++
			}
		}
		if bad > 0 || len(got) != len(ids) {
			t.Errorf("%s: %d of %d people did not get exactly one card (%d got any)", what, bad, len(ids), len(got))
		}
	}

	if code, out := call(addrs[0], "POST", "/messages", map[string]any{"msgid": "acts-remind", "app": app.Name, "title": "全员通知",
		"audience": map[string]any{"userids": ids}, "send": true}); code != http.StatusCreated {
		t.Fatalf("register = %d %v", code, out)
	}
	codes, _ := storm("/messages/acts-remind/remind")
	if codes[http.StatusOK] != 1 || codes[http.StatusTooManyRequests] != 15 {
		t.Errorf("16 concurrent reminders on 2 processes answered %v; want one 200 and fifteen 429", codes)
	}
	once("reminder", cards("acts-remind@", "r"))

	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	if code, out := call(addrs[1], "POST", "/messages", map[string]any{"msgid": "acts-send", "app": app.Name, "title": "定时通知",
		"audience": map[string]any{"userids": ids}, "send": true, "send_at": at}); code != http.StatusCreated {
		t.Fatalf("schedule = %d %v", code, out)
	}
	codes, _ = storm("/messages/acts-send/send")
	if codes[http.StatusAccepted] != 1 || codes[http.StatusConflict] != 15 {
		t.Errorf("16 concurrent send now on 2 processes answered %v; want one 202 and fifteen 409", codes)
	}
	testenv.WaitFor(t, 30*time.Second, "the notice sent now", func() bool {
		var s string
		_ = db.QueryRow("SELECT state FROM campaigns WHERE msgid = 'acts-send'").Scan(&s)
		return s == "sent"
	})
	once("send now", cards("acts-send@", ""))

	sent := map[string]bool{}
	for _, s := range fake.Sent() {
		if c, _ := s.Body["template_card"].(map[string]any); strings.HasPrefix(fmt.Sprint(c["task_id"]), "acts-remind@") {
			sent[s.MsgID] = true
		}
	}
	before := len(fake.Recalled())
	codes, outs := storm("/messages/acts-remind/recall")
	recalling := 0
	for _, o := range outs {
		if n, _ := o["recalled"].(float64); n > 0 {
			recalling++
		}
	}
	got := fake.Recalled()[before:]
	uniq := slices.Compact(slices.Sorted(slices.Values(got)))
	if recalling != 1 || len(got) != len(sent) || len(uniq) != len(sent) || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 16 {
		t.Errorf("16 concurrent recalls: answers %v, %d recalled cards; WeCom asked to recall %d (%d distinct) of %d cards; want one recall of each card",
			codes, recalling, len(got), len(uniq), len(sent))
	}
}
