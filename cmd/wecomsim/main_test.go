package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
)

const (
	token  = "QDG6eK"
	aesKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	corp   = "wx5823bf96d3bd56c7"
)

func TestRunPushesAndServesAPI(t *testing.T) {
	c, err := wxcrypt.New(token, aesKey, corp)
	if err != nil {
		t.Fatal(err)
	}
	var good atomic.Int64
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct{ Encrypt string }
		b, _ := io.ReadAll(r.Body)
		q := r.URL.Query()
		if xml.Unmarshal(b, &env) != nil || c.Verify(q.Get("msg_signature"), q.Get("timestamp"), q.Get("nonce"), env.Encrypt) != nil {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		if msg, err := c.Decrypt(env.Encrypt); err == nil && bytes.Contains(msg, []byte("<TaskId><![CDATA[n1@0]]></TaskId>")) {
			good.Add(1)
		}
	}))
	defer recv.Close()

	m := NewMain()
	var out bytes.Buffer
	m.Stdout, m.Logger = &out, slog.New(slog.DiscardHandler)
	err = m.ParseFlags([]string{"-target", recv.URL, "-corp", corp, "-token", token, "-aes-key", aesKey,
		"-users", "50", "-msgid", "n1", "-rate", "0", "-concurrency", "4", "-api-listen", "127.0.0.1:0", "-api-secret", "s3"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := m.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	resp, err := http.Get("http://" + m.APIAddr() + "/cgi-bin/gettoken?corpid=" + corp + "&corpsecret=s3")
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		ErrCode     int    `json:"errcode"`
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if tok.ErrCode != 0 || tok.AccessToken == "" {
		t.Errorf("gettoken on the fake API = %+v; want a token", tok)
	}

	start := time.Now()
	m.Wait(ctx)
	if time.Since(start) > 3*time.Second {
		t.Errorf("Wait did not end with the context")
	}
	if m.Stats.OK != 50 || m.Stats.Failures != 0 || good.Load() != 50 {
		t.Errorf("stats %v, verified card events %d; want 50 ok", m.Stats, good.Load())
	}
	if !strings.Contains(out.String(), "callbacks=50") {
		t.Errorf("output %q lacks the stats line", out.String())
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		ok   bool
	}{
		{"api only", []string{"-api-listen", "127.0.0.1:0", "-api-secret", "s3"}, true},
		{"api with the contacts-sync secret", []string{"-api-listen", "127.0.0.1:0", "-api-secret", "s3", "-contacts-secret", "c3"}, true},
		{"api without a secret", []string{"-api-listen", "127.0.0.1:0"}, false},
		{"contacts secret equal to the app's", []string{"-api-listen", ":0", "-api-secret", "s3", "-contacts-secret", "s3"}, false},
		{"nothing to do", nil, false},
		{"stray argument", []string{"-api-listen", ":0", "-api-secret", "s3", "x"}, false},
		{"zero duration", []string{"-api-listen", ":0", "-api-secret", "s3", "-duration", "0s"}, false},
	}
	for _, tt := range tests {
		err := NewMain().ParseFlags(tt.args)
		if (err == nil) != tt.ok {
			t.Errorf("ParseFlags(%s) = %v; want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestRunRejectsUnknownEvents(t *testing.T) {
	m := NewMain()
	m.Logger = slog.New(slog.DiscardHandler)
	if err := m.ParseFlags([]string{"-target", "http://127.0.0.1:1/", "-corp", corp, "-token", token, "-aes-key", aesKey, "-events", "bogus"}); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("Run with -events bogus = %v; want an error naming it", err)
	}
}
