package process

import (
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
