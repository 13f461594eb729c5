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

// slowWeCom counts every message/send call per task_id (a resend under
// the duplicate check is a call but not a delivery) and delays each call.
type slowWeCom struct {
	h     http.Handler
	delay time.Duration
	mu    sync.Mutex
	calls map[string]int
}

func (s *slowWeCom) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/message/send") {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			Card struct {
				TaskID string `json:"task_id"`
			} `json:"template_card"`
		}
		_ = json.Unmarshal(body, &m)
		s.mu.Lock()
		s.calls[m.Card.TaskID]++
		d := s.delay
		s.mu.Unlock()
		time.Sleep(d)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	s.h.ServeHTTP(w, r)
}

// TestCampaignExactlyOnce: two `yidu dashboard` replicas on one MySQL and
// a fake WeCom. 20 notices scheduled 2 s ahead each reach message/send
// once per batch; then a replica is killed with -9 in the middle of a
// 5,000-recipient send and the other finishes it without a duplicate
// delivery.
func TestCampaignExactlyOnce(t *testing.T) {
	testenv.Long(t)
	const secret = "campaign-secret"
	members := 5000
	users := make([]fakewecom.User, members)
	ids := make([]string, members)
	for i := range users {
		ids[i] = userIDs.ID(i)
		users[i] = fakewecom.User{UserID: ids[i], Name: ids[i], Departments: []int{1}}
	}
	fake := fakewecom.New(fakewecom.Corp{CorpID: app.CorpID, Apps: []fakewecom.App{{AgentID: app.AgentID, Secret: secret}},
		Departments: []fakewecom.Department{{ID: 1, Name: "总部"}}, Users: users})
	slow := &slowWeCom{h: fake, calls: map[string]int{}}
	hs := httptest.NewServer(slow)
	t.Cleanup(hs.Close)

	dsn := testenv.MySQLDSN(t)
	db := openUTC(t, dsn)
	rdb, prefix := testenv.Redis(t)
	_ = rdb
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
	start := func(name string) (*rig.Proc, string) {
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
		return p, addr
	}
	a, addrA := start("dashboard-a")
	bp, addrB := start("dashboard-b")

	post := func(addr string, body map[string]any) {
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
			t.Fatalf("schedule = %d %s", resp.StatusCode, out)
		}
	}
	state := func(id string) string {
		var s string
		_ = db.QueryRow("SELECT state FROM campaigns WHERE msgid = ?", id).Scan(&s)
		return s
	}

	// Part 1: 20 notices to 10 members each, 2 s ahead, posted to either replica.
	at := time.Now().Add(2 * time.Second).Format(time.RFC3339Nano)
	for i := range 20 {
		addr := addrA
		if i%2 == 1 {
			addr = addrB
		}
		post(addr, map[string]any{"msgid": fmt.Sprintf("camp-%d", i), "app": app.Name, "title": fmt.Sprintf("通知 %d", i),
			"audience": map[string]any{"userids": ids[i*10 : i*10+10]}, "send": true, "send_at": at})
	}
	testenv.WaitFor(t, 30*time.Second, "20 notices sent", func() bool {
		for i := range 20 {
			if state(fmt.Sprintf("camp-%d", i)) != "sent" {
				return false
			}
		}
		return true
	})
	slow.mu.Lock()
	for i := range 20 {
		task := fmt.Sprintf("camp-%d@0", i)
		if n := slow.calls[task]; n != 1 {
			t.Errorf("%s reached message/send %d times, want 1", task, n)
		}
	}
	slow.mu.Unlock()

	// Part 2: 5,000 recipients (5 batches), each call 1.5 s; kill the
	// replica sending it after its second batch.
	slow.mu.Lock()
	slow.delay = 1500 * time.Millisecond
	slow.mu.Unlock()
	post(addrA, map[string]any{"msgid": "camp-big", "app": app.Name, "title": "全员通知",
		"audience": map[string]any{"userids": ids}, "send": true, "send_at": time.Now().Add(2 * time.Second).Format(time.RFC3339Nano)})
	testenv.WaitFor(t, 30*time.Second, "the big send to start its second batch", func() bool {
		slow.mu.Lock()
		defer slow.mu.Unlock()
		return slow.calls["camp-big@1"] > 0
	})
	var owner string
	_ = db.QueryRow("SELECT COALESCE(owner, '') FROM campaigns WHERE msgid = 'camp-big'").Scan(&owner)
	victim := a
	if strings.Contains(owner, fmt.Sprintf("-%d-", bp.Pid())) {
		victim = bp
	}
	t.Logf("killing %s (owner %s) with -9", victim.Name(), owner)
	victim.Kill()
	testenv.WaitFor(t, 80*time.Second, "the other replica to finish the big send", func() bool { return state("camp-big") == "sent" })

	delivered := map[string]int{}
	for _, s := range fake.Sent() {
		if c, ok := s.Body["template_card"].(map[string]any); ok {
			delivered[fmt.Sprint(c["task_id"])]++
		}
	}
	for n := range 5 {
		task := fmt.Sprintf("camp-big@%d", n)
		if delivered[task] != 1 {
			t.Errorf("%s delivered %d times, want 1", task, delivered[task])
		}
	}
}
