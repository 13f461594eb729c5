package process

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/testenv"
)

// mustRunReplica starts a second dashboard on m's MySQL, Redis and
// configuration, as a second replica behind one address would run
// (docs/deploy.md): its own HTTP server, pools, campaign Runner and
// follow-up rounds, sharing nothing with m but the databases.
func mustRunReplica(tb testing.TB, m *Main) *Main {
	tb.Helper()
	cfg := m.Config
	cfg.Dashboard.Listen = "127.0.0.1:0"
	r := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := r.Run(context.Background(), Roles{Dashboard: true}); err != nil {
		r.Close()
		tb.Fatalf("replica Run: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.Close(); err != nil {
			tb.Errorf("replica Close: %v", err)
		}
	})
	return r
}

// storm sends n concurrent POSTs of path, alternating between the
// replicas, and returns their status codes and answers.
func storm(tb testing.TB, replicas []*Main, n int, path string) ([]int, []map[string]any) {
	tb.Helper()
	codes, outs := make([]int, n), make([]map[string]any, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			codes[i], outs[i] = apiRaw(tb, replicas[i%len(replicas)], "POST", path, "application/json", []byte("{}"))
		}()
	}
	close(start)
	wg.Wait()
	return codes, outs
}

func countCodes(codes []int) map[int]int {
	out := map[int]int{}
	for _, c := range codes {
		out[c]++
	}
	return out
}

// cardsTo counts, per UserID, the cards of msgID whose task_id starts
// with msgID+"@"+kind (kind "r" for reminders, "" for the notice's
// batches: digits only) that the fake WeCom received.
func cardsTo(fake *fakewecom.Server, msgID, kind string) map[string]int {
	out := map[string]int{}
	for _, s := range fake.Sent() {
		card, _ := s.Body["template_card"].(map[string]any)
		task, _ := card["task_id"].(string)
		rest, ok := strings.CutPrefix(task, msgID+"@")
		// kind "": the notice's own batches (<msgid>@<n>), not a
		// reminder's, round's, digest's or approval card's (@r, @f, @d, @a).
		batch := rest != "" && !strings.ContainsFunc(rest, func(r rune) bool { return r < '0' || r > '9' })
		if !ok || (kind == "" && !batch) || (kind != "" && !strings.HasPrefix(rest, kind)) {
			continue
		}
		to, _ := s.Body["touser"].(string)
		for _, u := range strings.Split(to, "|") {
			out[u]++
		}
	}
	return out
}

// TestReplicasActOnce (issue 37): with two dashboard replicas on one
// MySQL and Redis, 16 concurrent "remind unread" across them send one
// reminder (one 200, fifteen 429) and each unread person gets one
// reminder card; 16 concurrent "send now" of a scheduled notice make it
// due once (one 202) and it is sent once; 16 concurrent recalls ask
// WeCom to recall each card once.
func TestReplicasActOnce(t *testing.T) {
	m, fake, _ := mustRunCampaign(t)
	replicas := []*Main{m, mustRunReplica(t, m)}
	everyone := []string{"lisi", "mallory", "wangwu", "zhangsan"}

	t.Run("remind", func(t *testing.T) {
		if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "rep-remind", "app": "hr", "title": "提醒测试",
			"audience": map[string]any{"userids": everyone}, "send": true}, nil); code != http.StatusCreated {
			t.Fatalf("register = %d; want 201", code)
		}
		// zhangsan reads: three people are unread.
		if code := deliver(t, m, cardEvent("zhangsan", "rep-remind@0", time.Now().Unix())); code != http.StatusOK {
			t.Fatalf("callback = %d", code)
		}
		testenv.WaitFor(t, 10*time.Second, "zhangsan's read counted", func() bool {
			var p progressJSON
			return api(t, m, "GET", "/messages/rep-remind/progress", nil, &p) == http.StatusOK && p.Read == 1
		})
		codes, _ := storm(t, replicas, 16, "/messages/rep-remind/remind")
		if got := countCodes(codes); got[http.StatusOK] != 1 || got[http.StatusTooManyRequests] != 15 {
			t.Errorf("16 concurrent reminders on 2 replicas answered %v; want one 200 and fifteen 429", got)
		}
		got := cardsTo(fake, "rep-remind", "r")
		want := map[string]int{"lisi": 1, "mallory": 1, "wangwu": 1}
		if len(got) != len(want) || got["lisi"] != 1 || got["mallory"] != 1 || got["wangwu"] != 1 {
			t.Errorf("reminder cards per person = %v; want %v (each unread person once, zhangsan read)", got, want)
		}
	})

	t.Run("send now", func(t *testing.T) {
		at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		if code := api(t, m, "POST", "/messages", map[string]any{"msgid": "rep-send", "app": "hr", "title": "立即发送",
			"audience": map[string]any{"userids": everyone}, "send": true, "send_at": at}, nil); code != http.StatusCreated {
			t.Fatalf("schedule = %d; want 201", code)
		}
		codes, _ := storm(t, replicas, 16, "/messages/rep-send/send")
		if got := countCodes(codes); got[http.StatusAccepted] != 1 || got[http.StatusConflict] != 15 {
			t.Errorf("16 concurrent send now on 2 replicas answered %v; want one 202 and fifteen 409", got)
		}
		var n struct {
			State string `json:"state"`
		}
		testenv.WaitFor(t, 20*time.Second, "the notice sent", func() bool {
			return api(t, m, "GET", "/messages/rep-send", nil, &n) == http.StatusOK && n.State == "sent"
		})
		got := cardsTo(fake, "rep-send", "")
		for _, u := range everyone {
			if got[u] != 1 {
				t.Errorf("cards of the notice per person = %v; want each of %v once", got, everyone)
				break
			}
		}
		acts := testenv.Column[int](t, m.DB, `SELECT COUNT(*) FROM audit_events WHERE msgid = 'rep-send' AND detail = 'send_now' AND outcome = 'ok'`)
		if acts[0] != 1 {
			t.Errorf("%d send_now audit rows; want one act", acts[0])
		}
	})

	t.Run("recall", func(t *testing.T) {
		before := len(fake.Recalled())
		batches := 0
		for _, s := range fake.Sent() {
			card, _ := s.Body["template_card"].(map[string]any)
			if task, _ := card["task_id"].(string); strings.HasPrefix(task, "rep-remind@") {
				batches++
			}
		}
		codes, outs := storm(t, replicas, 16, "/messages/rep-remind/recall")
		recalled := 0
		for i, c := range codes {
			switch {
			case c == http.StatusOK && outs[i]["recalled"].(float64) > 0:
				recalled++
			case c == http.StatusOK, c == http.StatusTooManyRequests:
			default:
				t.Errorf("recall answered %d %v", c, outs[i])
			}
		}
		if recalled != 1 {
			t.Errorf("%d recalls recalled cards (codes %v); want one", recalled, countCodes(codes))
		}
		got := fake.Recalled()[before:]
		uniq := slices.Compact(slices.Sorted(slices.Values(got)))
		if len(got) != batches || len(uniq) != batches {
			t.Errorf("WeCom was asked to recall %v; want each of the %d cards (notice and reminder) once", got, batches)
		}
	})
}
