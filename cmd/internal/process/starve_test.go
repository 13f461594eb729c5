package process

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/cmd/internal/config"
)

// TestServeSearchFloodSparesCallbacks (issue 13 item 5): in yidu serve
// (every role in one process, one MySQL pool, here of 8 connections) a
// flood of concurrent recipient searches by one token gets 429s with
// Retry-After, never a 5xx, while every WeCom callback delivered meanwhile
// is answered 200 and a second token's searches are served.
func TestServeSearchFloodSparesCallbacks(t *testing.T) {
	const (
		members   = 2000
		floodSize = 200
		callbacks = 200
		second    = "second-principal-token-0123"
	)
	m := mustRunMainWith(t, func(c *config.Config) {
		c.MySQL.MaxOpenConns = 8
		c.Dashboard.MaxQueries = 4
		c.Dashboard.MaxQueriesPerPrincipal = 2
		c.Dashboard.Tokens = append(c.Dashboard.Tokens, config.Token{Name: "second", Token: second, Corps: []string{testCorp}})
	})
	ids := make([]string, members)
	for i := range ids {
		ids[i] = fmt.Sprintf("member%04d", i)
	}
	seedMembers(t, m, testCorp, ids...)
	reg := map[string]any{"msgid": "notice-flood", "app": "hr", "title": "t", "audience": map[string]any{"all": true}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: floodSize}}
	search := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+m.DashboardAddr+"/api/v1/messages/notice-flood/recipients?q=member1&limit=500", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}

	var (
		mu          sync.Mutex
		floodCodes  = map[int]int{}
		noRetry     int
		cbCodes     = map[int]int{}
		secondCodes = map[int]int{}
		wg          sync.WaitGroup
	)
	start := make(chan struct{})
	for range floodSize {
		wg.Go(func() {
			<-start
			code, ra := search(apiToken)
			mu.Lock()
			defer mu.Unlock()
			floodCodes[code]++
			if code == http.StatusTooManyRequests && ra == "" {
				noRetry++
			}
		})
	}
	for i := range callbacks {
		wg.Go(func() {
			<-start
			code := deliver(t, m, cardEvent(ids[i], "notice-flood@0", time.Now().Unix()))
			mu.Lock()
			defer mu.Unlock()
			cbCodes[code]++
		})
	}
	wg.Go(func() {
		<-start
		for range 5 {
			code, _ := search(second)
			mu.Lock()
			secondCodes[code]++
			mu.Unlock()
		}
	})
	close(start)
	wg.Wait()

	if cbCodes[http.StatusOK] != callbacks {
		t.Errorf("callbacks during the flood: %v; want all %d answered 200", cbCodes, callbacks)
	}
	if floodCodes[http.StatusTooManyRequests] == 0 || floodCodes[http.StatusOK] == 0 || floodCodes[http.StatusOK]+floodCodes[http.StatusTooManyRequests] != floodSize {
		t.Errorf("flooding searches: %v; want 200s and 429s only", floodCodes)
	}
	if noRetry > 0 {
		t.Errorf("%d 429s without Retry-After", noRetry)
	}
	if secondCodes[http.StatusOK] != 5 {
		t.Errorf("second token's searches during the flood: %v; want 5 × 200", secondCodes)
	}
	t.Logf("flood %v, callbacks %v, second token %v", floodCodes, cbCodes, secondCodes)
}

// TestServeReceiverOwnPool (issue 13 item 5): in yidu serve the receiver
// has its own MySQL pool, so a callback that needs MySQL (a member its
// idmap has not cached) is answered 200 while every connection of the
// main pool — the dashboard's and flushd's — is taken.
func TestServeReceiverOwnPool(t *testing.T) {
	m := mustRunMainWith(t, func(c *config.Config) {
		c.MySQL.MaxOpenConns, c.MySQL.ReceiverConns = 4, 3
		c.Dashboard.MaxQueries, c.Dashboard.MaxQueriesPerPrincipal = 2, 1
	})
	if m.ReceiverDB == nil || m.ReceiverDB == m.DB {
		t.Fatal("serve: the receiver has no pool of its own")
	}
	if got := m.ReceiverDB.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("receiver pool of %d; want mysql.receiver_conns 3", got)
	}
	if got := m.DB.Stats().MaxOpenConnections; got != 4 {
		t.Errorf("main pool of %d; want mysql.max_open_conns 4", got)
	}
	reg := map[string]any{"msgid": "notice-own-pool", "app": "hr", "title": "t", "audience": map[string]any{"userids": []string{"zhangsan", "lisi"}}}
	if code := api(t, m, "POST", "/messages", reg, nil); code != http.StatusCreated {
		t.Fatalf("register = %d; want 201", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held []*sql.Conn
	for range 4 {
		c, err := m.DB.Conn(ctx)
		if err != nil {
			t.Fatalf("take a main-pool connection: %v", err)
		}
		held = append(held, c)
	}
	// A contact change writes MySQL whatever the caches hold; a press
	// needs it for a member the receiver's idmap has not cached.
	contact := fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[sys]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[change_contact]]></Event><ChangeType>update_user</ChangeType><UserID><![CDATA[wangwu]]></UserID><Department><![CDATA[1,2]]></Department><AgentID>%d</AgentID></xml>`,
		testCorp, time.Now().Unix(), testAgent)
	codes := map[string]int{}
	for name, xml := range map[string]string{"contact change": contact, "press": cardEvent("lisi", "notice-own-pool@0", time.Now().Unix())} {
		codes[name], _ = deliverReply(t, m, xml)
	}
	for _, c := range held {
		c.Close()
	}
	for name, code := range codes {
		if code != http.StatusOK {
			t.Errorf("%s while the main pool is taken = %d; want 200", name, code)
		}
	}
	var p progressJSON
	if code := api(t, m, "GET", "/messages/notice-own-pool/progress", nil, &p); code != http.StatusOK || p.Read != 1 {
		t.Errorf("progress = %d %+v; want 1 read", code, p)
	}
}
