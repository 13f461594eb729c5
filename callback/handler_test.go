package callback

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/yidu-io/yidu/callback/wxcrypt"
)

// The official vector's requests (shared/wecom-protocol.md).
const (
	vecGetTarget  = "/wecom/callback/hr?msg_signature=5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3&timestamp=1409659589&nonce=263014780&echostr=P9nAzCzyDtyTWESHep1vC5X9xho%2FqYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp%2B4RPcs8TgAE7OaBO%2BFZXvnaqQ%3D%3D"
	vecPostTarget = "/wecom/callback/hr?msg_signature=477715d11cdb4164915debcba66cb864d751f3e6&timestamp=1409659813&nonce=1372623149"
	vecPostBody   = `<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName><Encrypt><![CDATA[RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q==]]></Encrypt><AgentID><![CDATA[218]]></AgentID></xml>`
)

func TestOfficialVector(t *testing.T) {
	h := newHarness(t, nil)
	h.now = time.Unix(1409659589, 0)
	w := h.do(t, http.MethodGet, vecGetTarget, "")
	if w.Code != http.StatusOK || w.Body.String() != "1616140317555161061" {
		t.Errorf("GET vector = %d %q; want 200 %q", w.Code, w.Body, "1616140317555161061")
	}

	h.now = time.Unix(1409659813, 0)
	w = h.do(t, http.MethodPost, vecPostTarget, vecPostBody)
	if w.Code != http.StatusOK || w.Body.Len() != 0 {
		t.Errorf("POST vector = %d %q; want 200 and an empty body", w.Code, w.Body)
	}
	if got := h.counter(t, "yidu_callback_ignored_total", "app", "hr", "reason", ignoreMessage); got != 1 {
		t.Errorf("ignored message = %v; want 1", got)
	}
	if got := h.counter(t, "yidu_callback_events_total", "app", "hr", "type", "message"); got != 1 {
		t.Errorf("events{message} = %v; want 1", got)
	}
}

// TestStatus covers every outcome of the table through the router.
func TestStatus(t *testing.T) {
	now := time.Unix(1409659813, 0)
	goodCard := card("zhangsan", now.Unix(), "task1", "read")
	hr := crypterFor(t, "hr")
	ops := crypterFor(t, "ops")
	const rid = vecCorpID
	// plain builds random(16)+len+msg+rid and pads it to 32 bytes.
	plain := func(msgLen uint32, msg, receiveID string) []byte {
		b := binary.BigEndian.AppendUint32(make([]byte, 16), msgLen)
		b = append(append(b, msg...), receiveID...)
		pad := 32 - len(b)%32
		return append(b, bytes.Repeat([]byte{byte(pad)}, pad)...)
	}
	signed := func(encrypt, agent string) func(t *testing.T) (string, string) {
		return func(t *testing.T) (string, string) {
			q, body := envelope(t, encrypt, agent, now)
			return "/wecom/callback/hr?" + q.Encode(), body
		}
	}
	encOf := func(c *wxcrypt.Crypter, msg string) string {
		s, err := c.Encrypt([]byte(msg), nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	post := func(app, plaintext string, at time.Time) func(t *testing.T) (string, string) {
		return func(t *testing.T) (string, string) {
			q, body := signedPost(t, app, plaintext, at)
			return "/wecom/callback/" + app + "?" + q.Encode(), string(body)
		}
	}
	otherRID, err := wxcrypt.New(vecToken, vecAESKey, "wxOTHERCORP")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		method  string
		req     func(t *testing.T) (target, body string)
		status  int
		outcome outcome
		app     string
	}{
		{"card ok", "POST", post("hr", goodCard, now), 200, outOK, "hr"},
		{"unknown app", "POST", func(*testing.T) (string, string) { return "/wecom/callback/nope?timestamp=1", "<xml/>" }, 404, outUnknownApp, unknownApp},
		{"unknown app GET", "GET", func(*testing.T) (string, string) { return "/wecom/callback/nope", "" }, 404, outUnknownApp, unknownApp},
		{"missing signature", "POST", func(t *testing.T) (string, string) {
			q, body := signedPost(t, "hr", goodCard, now)
			q.Del("msg_signature")
			return "/wecom/callback/hr?" + q.Encode(), string(body)
		}, 401, outBadSignature, "hr"},
		{"bad signature", "POST", func(t *testing.T) (string, string) {
			q, body := signedPost(t, "hr", goodCard, now)
			q.Set("msg_signature", strings.Repeat("0", 40))
			return "/wecom/callback/hr?" + q.Encode(), string(body)
		}, 401, outBadSignature, "hr"},
		{"other app's signature", "POST", func(t *testing.T) (string, string) {
			q, body := signedPost(t, "ops", goodCard, now)
			return "/wecom/callback/hr?" + q.Encode(), string(body)
		}, 401, outBadSignature, "hr"},
		{"GET bad signature", "GET", func(t *testing.T) (string, string) {
			q, _ := hr.Echo([]byte("123"), fmt.Sprint(now.Unix()), "n")
			q.Set("nonce", "m")
			return "/wecom/callback/hr?" + q.Encode(), ""
		}, 401, outBadSignature, "hr"},
		{"timestamp too old", "POST", post("hr", goodCard, now.Add(-11*time.Minute)), 401, outStaleTimestamp, "hr"},
		{"timestamp in the future", "POST", post("hr", goodCard, now.Add(11*time.Minute)), 401, outStaleTimestamp, "hr"},
		{"GET timestamp too old", "GET", func(t *testing.T) (string, string) {
			ts := fmt.Sprint(now.Add(-time.Hour).Unix())
			q, _ := hr.Echo([]byte("123"), ts, "n")
			return "/wecom/callback/hr?" + q.Encode(), ""
		}, 401, outStaleTimestamp, "hr"},
		{"ReceiveId mismatch", "POST", signed(encOf(otherRID, goodCard), "218"), 400, outReceiveID, "hr"},
		{"message AgentID mismatch", "POST", signed(encOf(hr, strings.Replace(goodCard, "<AgentID>218<", "<AgentID>219<", 1)), "218"), 400, outAgentID, "hr"},
		{"envelope AgentID mismatch", "POST", signed(encOf(hr, goodCard), "219"), 400, outAgentID, "hr"},
		{"bad base64", "POST", signed("not*base64", "218"), 400, outBadBase64, "hr"},
		{"bad padding", "POST", signed(sealRaw(t, append(plain(uint32(len(goodCard)), goodCard, rid)[:len(plain(uint32(len(goodCard)), goodCard, rid))-1], 0)), "218"), 400, outBadPadding, "hr"},
		{"not whole blocks", "POST", signed(sealRaw(t, make([]byte, 48)), "218"), 400, outBadPadding, "hr"},
		{"bad length", "POST", signed(sealRaw(t, plain(uint32(len(goodCard)+100), goodCard, rid)), "218"), 400, outBadLength, "hr"},
		{"bad XML inside", "POST", post("hr", "<xml><MsgType>event</xml>", now), 400, outBadXML, "hr"},
		{"DOCTYPE inside", "POST", post("hr", `<!DOCTYPE x [<!ENTITY a "b">]><xml><MsgType>&a;</MsgType></xml>`, now), 400, outBadXML, "hr"},
		{"invalid UTF-8 inside", "POST", post("hr", "<xml><MsgType>te\xc3xt</MsgType></xml>", now), 400, outBadXML, "hr"},
		{"bad envelope", "POST", func(*testing.T) (string, string) { return "/wecom/callback/hr?timestamp=1", "<xml><Encrypt>" }, 400, outBadXML, "hr"},
		{"envelope without Encrypt", "POST", func(*testing.T) (string, string) {
			return "/wecom/callback/hr", "<xml><ToUserName>x</ToUserName></xml>"
		}, 400, outBadXML, "hr"},
		{"body too large", "POST", func(*testing.T) (string, string) {
			return "/wecom/callback/hr", "<xml><Encrypt>" + strings.Repeat("A", DefaultMaxBody) + "</Encrypt></xml>"
		}, 413, outTooLarge, "hr"},
		{"ops other button", "POST", post("ops", strings.Replace(card("u1", now.Unix(), "t1", "later"), "<AgentID>218<", "<AgentID>1000002<", 1), now), 200, outIgnored, "ops"},
		{"ops read button", "POST", post("ops", strings.Replace(card("u1", now.Unix(), "t1", "read"), "<AgentID>218<", "<AgentID>1000002<", 1), now), 200, outOK, "ops"},
		{"view", "POST", post("hr", viewXML, now), 200, outIgnored, "hr"},
		{"click", "POST", post("hr", clickXML, now), 200, outIgnored, "hr"},
		{"unknown event", "POST", post("hr", `<xml><MsgType>event</MsgType><Event>LOCATION</Event><CreateTime>1</CreateTime></xml>`, now), 200, outIgnored, "hr"},
		{"party change", "POST", post("hr", strings.Replace(contactXML, "update_user", "create_party", 1), now), 200, outIgnored, "hr"},
		{"GET verified", "GET", func(t *testing.T) (string, string) {
			q, _ := ops.Echo([]byte("42"), fmt.Sprint(now.Unix()), "n")
			return "/wecom/callback/ops?" + q.Encode(), ""
		}, 200, outVerified, "ops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.now = now
			target, body := tt.req(t)
			w := h.do(t, tt.method, target, body)
			if w.Code != tt.status {
				t.Errorf("%s %s = %d %q; want %d", tt.method, tt.name, w.Code, w.Body, tt.status)
			}
			if got := h.requests(t, tt.app, tt.outcome); got != 1 {
				t.Errorf("requests_total{app=%s,outcome=%s} = %v; want 1", tt.app, outcomes[tt.outcome].label, got)
			}
			if tt.status != 200 {
				// A rejected callback writes nothing.
				if cards, enters := h.reads.calls(); len(cards)+len(enters) != 0 || h.dedup.len() != 0 {
					t.Errorf("rejected callback had effects: cards %v enters %v dedup %d", cards, enters, h.dedup.len())
				}
				// The outcome and its code, nothing of the error's text.
				if want := fmt.Sprintf("%s (%d)\n", outcomes[tt.outcome].label, outcomes[tt.outcome].code); w.Body.String() != want {
					t.Errorf("body %q; want exactly %q", w.Body, want)
				}
			}
		})
	}
}

func TestReadSignals(t *testing.T) {
	h := newHarness(t, nil)
	ct := h.now.Unix() - 5
	if w := h.post(t, "hr", card("zhangsan", ct, "task-1", "any")); w.Code != 200 {
		t.Fatalf("card = %d %q", w.Code, w.Body)
	}
	if w := h.post(t, "hr", enter("lisi", ct)); w.Code != 200 {
		t.Fatalf("enter_agent = %d %q", w.Code, w.Body)
	}
	cards, enters := h.reads.calls()
	wantCard := []cardCall{{vecCorpID, vecAgent, "zhangsan", "task-1", time.Unix(ct, 0)}}
	wantEnter := []cardCall{{vecCorpID, vecAgent, "lisi", "", time.Unix(ct, 0)}}
	if !reflect.DeepEqual(cards, wantCard) || !reflect.DeepEqual(enters, wantEnter) {
		t.Errorf("calls = %+v, %+v; want %+v, %+v", cards, enters, wantCard, wantEnter)
	}
	if got := h.counter(t, "yidu_callback_new_reads_total", "app", "hr", "signal", "enter_agent"); got != 3 {
		t.Errorf("new_reads{enter_agent} = %v; want 3", got)
	}

	if w := h.post(t, "hr", contactXML); w.Code != 200 {
		t.Fatalf("change_contact = %d %q", w.Code, w.Body)
	}
	want := []contactCall{{vecCorpID, "update_user", "zhangsan", "zhangsan2", []int64{1, 2, 3}}}
	if got := h.contacts.calls.all(); !reflect.DeepEqual(got, want) {
		t.Errorf("ContactChanged calls = %+v; want %+v", got, want)
	}
}

func TestDedup(t *testing.T) {
	t.Run("second delivery has no second effect", func(t *testing.T) {
		h := newHarness(t, nil)
		for i := range 2 {
			if w := h.post(t, "hr", contactXML); w.Code != 200 {
				t.Fatalf("delivery %d = %d", i, w.Code)
			}
		}
		if n := len(h.contacts.calls.all()); n != 1 {
			t.Errorf("ContactChanged calls = %d; want 1", n)
		}
		if got := h.counter(t, "yidu_callback_dedup_hits_total", "app", "hr"); got != 1 {
			t.Errorf("dedup hits = %v; want 1", got)
		}
		if got := h.requests(t, "hr", outDuplicate); got != 1 {
			t.Errorf("duplicate outcomes = %v; want 1", got)
		}
		for k, ttl := range h.dedup.keys {
			if want := "hr|sys|1409659813|change_contact||update_user|zhangsan|"; k != want || ttl != DefaultDedupTTL {
				t.Errorf("dedup key %q ttl %v; want %q %v", k, ttl, want, DefaultDedupTTL)
			}
		}
	})
	t.Run("read redelivery goes to the idempotent read path", func(t *testing.T) {
		// The read path is the dedup for reads (a read already set is a
		// duplicate and emits nothing), so the receiver spends no Redis
		// round trips on Seen/Remember for them.
		h := newHarness(t, nil)
		msg := card("zhangsan", h.now.Unix(), "task-1", "k")
		for i := range 2 {
			if w := h.post(t, "hr", msg); w.Code != 200 {
				t.Fatalf("delivery %d = %d", i, w.Code)
			}
		}
		if cards, _ := h.reads.calls(); len(cards) != 2 {
			t.Errorf("CardRead calls = %d; want 2 (the recorder dedups)", len(cards))
		}
		if n := h.dedup.len(); n != 0 {
			t.Errorf("dedup keys = %d; want none for read signals", n)
		}
	})
	t.Run("failed attempt is retried for real", func(t *testing.T) {
		h := newHarness(t, nil)
		msg := enter("lisi", h.now.Unix())
		h.reads.set(errors.New("redis down"), false)
		if w := h.post(t, "hr", msg); w.Code != http.StatusServiceUnavailable {
			t.Fatalf("failing downstream = %d; want 503", w.Code)
		}
		if strings.Contains(h.post(t, "hr", msg).Body.String(), "redis down") {
			t.Error("503 body leaks the downstream error")
		}
		h.reads.set(nil, false)
		if w := h.post(t, "hr", msg); w.Code != 200 {
			t.Fatalf("retry = %d; want 200", w.Code)
		}
		if _, enters := h.reads.calls(); len(enters) != 1 {
			t.Errorf("EnterAgent calls = %d; want 1", len(enters))
		}
		if got := h.requests(t, "hr", outDownstream); got != 2 {
			t.Errorf("downstream outcomes = %v; want 2", got)
		}
	})
	// A failing Deduper costs the dedup, never the event.
	for _, op := range []string{"seen", "remember"} {
		t.Run(op+" error still applies", func(t *testing.T) {
			h := newHarness(t, nil)
			if op == "seen" {
				h.dedup.seenErr = errors.New("redis down")
			} else {
				h.dedup.rememberErr = errors.New("redis down")
			}
			if w := h.post(t, "hr", contactXML); w.Code != 200 {
				t.Fatalf("= %d; want 200", w.Code)
			}
			if n := len(h.contacts.calls.all()); n != 1 {
				t.Errorf("ContactChanged calls = %d; want 1", n)
			}
			if got := h.counter(t, "yidu_callback_dedup_errors_total", "app", "hr", "op", op); got != 1 {
				t.Errorf("dedup errors{op=%s} = %v; want 1", op, got)
			}
		})
	}
	t.Run("without a Deduper", func(t *testing.T) {
		h := newHarness(t, func(o *Options) { o.Dedup = nil })
		for range 2 {
			h.post(t, "hr", enter("lisi", h.now.Unix()))
		}
		if _, enters := h.reads.calls(); len(enters) != 2 {
			t.Errorf("EnterAgent calls = %d; want 2", len(enters))
		}
	})
}

func TestDownstreamHang(t *testing.T) {
	const timeout = 100 * time.Millisecond
	h := newHarness(t, func(o *Options) { o.Timeout = timeout })
	h.reads.set(nil, true)
	start := time.Now()
	w := h.post(t, "hr", card("zhangsan", h.now.Unix(), "t", "k"))
	took := time.Since(start)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("hanging downstream = %d; want 503", w.Code)
	}
	// Never before the timeout; the upper bound only tells "answered at
	// the timeout" from "hung", with room for a loaded 2-core CI machine.
	if took < timeout || took > timeout+30*time.Second {
		t.Errorf("answered after %v; want at the %v timeout, not hung", took, timeout)
	}
	if got := h.requests(t, "hr", outTimeout); got != 1 {
		t.Errorf("timeout outcomes = %v; want 1", got)
	}
	if h.dedup.len() != 0 {
		t.Error("a timed-out callback was remembered")
	}
}

// gatedReads is a ReadRecorder whose CardPress waits for release and
// then reports what its context said.
type gatedReads struct {
	nopReads
	started, release chan struct{}
	err              chan error // the context's Err once released
	deadline         chan time.Duration
}

func (g *gatedReads) CardPress(ctx context.Context, _ string, _ int64, _, _ string, _ time.Time) (int, bool, error) {
	close(g.started)
	<-g.release
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Time{}
	}
	g.deadline <- time.Until(d)
	g.err <- ctx.Err()
	return 1, true, ctx.Err()
}

// TestCallbackOutlivesConnection: a callback whose connection WeCom
// closes (its request context is canceled) while the read is being
// recorded is recorded all the same, within the receiver's timeout.
func TestCallbackOutlivesConnection(t *testing.T) {
	const timeout = 5 * time.Second
	g := &gatedReads{started: make(chan struct{}), release: make(chan struct{}), err: make(chan error, 1), deadline: make(chan time.Duration, 1)}
	h := newHarnessReads(t, g, func(o *Options) { o.Timeout = timeout; o.Dedup = nil })
	q, body := signedPost(t, "hr", card("zhangsan", h.now.Unix(), "t", "k"), h.now)
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/wecom/callback/hr?"+q.Encode(), strings.NewReader(string(body)))
	w := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.h.ServeHTTP(w, req)
	}()
	<-g.started
	cancel() // WeCom went away
	close(g.release)
	<-done
	if err := <-g.err; err != nil {
		t.Errorf("the recorder's context after the connection went: %v; want live", err)
	}
	if d := <-g.deadline; d <= 0 || d > timeout {
		t.Errorf("the recorder's deadline is %v away; want within the %v timeout", d, timeout)
	}
	if w.Code != http.StatusOK {
		t.Errorf("status %d; want 200 (the read is recorded)", w.Code)
	}
	if got := h.requests(t, "hr", outOK); got != 1 {
		t.Errorf("ok outcomes = %v; want 1", got)
	}
}

func TestRateLimit(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MemberRate, o.MemberBurst = 0.001, 2 })
	for i := range 3 {
		w := h.post(t, "hr", enter("lisi", h.now.Unix()+int64(i)))
		if w.Code != 200 {
			t.Fatalf("delivery %d = %d; want 200", i, w.Code)
		}
	}
	h.post(t, "hr", enter("wangwu", h.now.Unix()))
	_, enters := h.reads.calls()
	if len(enters) != 3 || enters[2].UserID != "wangwu" {
		t.Errorf("EnterAgent calls = %+v; want lisi twice then wangwu", enters)
	}
	if got := h.counter(t, "yidu_callback_rate_limited_total", "app", "hr"); got != 1 {
		t.Errorf("rate limited = %v; want 1", got)
	}
	if got := h.requests(t, "hr", outRateLimited); got != 1 {
		t.Errorf("rate_limited outcomes = %v; want 1", got)
	}
}

func TestLimiterBounded(t *testing.T) {
	l := newLimiter(1, 1, 3)
	now := time.Unix(0, 0)
	for _, u := range []string{"a", "b", "c", "d"} {
		if !l.allow("corp", u, now) {
			t.Errorf("first event of %s limited", u)
		}
	}
	if l.len() != 3 {
		t.Errorf("members = %d; want 3", l.len())
	}
	if l.allow("corp", "d", now) {
		t.Error("second event of d within the same instant allowed")
	}
	if !l.allow("corp", "a", now) { // a was forgotten: a fresh bucket
		t.Error("forgotten member a limited")
	}
	if !l.allow("corp", "d", now.Add(time.Second)) {
		t.Error("d limited after its bucket refilled")
	}
}

func TestMetrics(t *testing.T) {
	h := newHarness(t, nil)
	h.post(t, "hr", card("zhangsan", h.now.Unix(), "t", "k"))
	w := httptest.NewRecorder()
	promhttp.HandlerFor(h.reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := w.Body.String()
	for _, want := range []string{
		`yidu_callback_requests_total{app="hr",code="0",outcome="ok"} 1`,
		`yidu_callback_requests_total{app="ops",code="-40001",outcome="bad_signature"} 0`,
		`yidu_callback_events_total{app="hr",type="template_card_event"} 1`,
		`yidu_callback_new_reads_total{app="hr",signal="template_card_event"} 1`,
		`yidu_callback_duration_seconds_count{app="hr"} 1`,
		`yidu_callback_rate_limited_total{app="hr"} 0`,
		`yidu_callback_dedup_hits_total{app="hr"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if w := h.do(t, http.MethodPut, "/wecom/callback/hr", ""); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("PUT = %d; want 405", w.Code)
	}
}

func TestChunkedTooLarge(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.MaxBody = 100 })
	req := httptest.NewRequest(http.MethodPost, "/wecom/callback/hr", io.MultiReader(strings.NewReader(strings.Repeat("x", 60)), strings.NewReader(strings.Repeat("y", 60))))
	req.ContentLength = -1
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked 120 bytes with MaxBody 100 = %d; want 413", w.Code)
	}
}

func TestNewErrors(t *testing.T) {
	bad := testApps[0]
	bad.EncodingAESKey = "short"
	tests := []struct {
		name  string
		reads ReadRecorder
		opts  Options
	}{
		{"no reads", nil, Options{Apps: testApps}},
		{"no apps", &fakeReads{}, Options{}},
		{"bad key", &fakeReads{}, Options{Apps: []App{bad}}},
		{"duplicate app", &fakeReads{}, Options{Apps: []App{testApps[0], testApps[0]}}},
		{"negative rate", &fakeReads{}, Options{Apps: testApps, MemberRate: -1}},
		{"metrics registered twice", &fakeReads{}, Options{Apps: testApps, Registerer: dupRegistry(t)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.reads, tt.opts); err == nil {
				t.Errorf("New(%s) = nil error", tt.name)
			}
		})
	}
}

func TestOutcomeTable(t *testing.T) {
	for o := outBadSignature; o < outInternal; o++ {
		oc := outcomes[o]
		if got := errorOutcome(fmt.Errorf("wrapped: %w", oc.err)); got != o {
			t.Errorf("errorOutcome(%v) = %s; want %s", oc.err, outcomes[got].label, oc.label)
		}
		if c := wxcrypt.Code(oc.err); c != 0 && c != oc.code {
			t.Errorf("%s: table code %d, wxcrypt code %d", oc.label, oc.code, c)
		}
		if oc.status < 400 {
			t.Errorf("%s: error outcome with status %d", oc.label, oc.status)
		}
	}
	if errorOutcome(errors.New("surprise")) != outInternal {
		t.Error("unknown error not mapped to internal")
	}
}

func TestQueryValue(t *testing.T) {
	tests := []struct{ raw, key, want string }{
		{"a=1&b=2", "b", "2"},
		{"a=1&a=2", "a", "1"},
		{"a=1", "b", ""},
		{"echostr=P9n%2FqY%2BX%3D%3D", "echostr", "P9n/qY+X=="},
		{"x=a+b", "x", "a b"},
		{"e%63hostr=v", "echostr", "v"},
		{"x=%zz&x=ok", "x", ""},
		{"k", "k", ""},
		{"", "k", ""},
	}
	for _, tt := range tests {
		got := queryValue(tt.raw, tt.key)
		if got != tt.want {
			t.Errorf("queryValue(%q, %q) = %q; want %q", tt.raw, tt.key, got, tt.want)
		}
		q, _ := url.ParseQuery(tt.raw)
		if std := q.Get(tt.key); std != got && !strings.Contains(tt.raw, "%zz") {
			t.Errorf("queryValue(%q, %q) = %q; url.Values.Get = %q", tt.raw, tt.key, got, std)
		}
	}
}

// TestAbsurdEventTime: a signed callback whose CreateTime is in the
// future beyond the timestamp window, or before 2000, is read at the
// receive time, a time the archive can store, instead of year 5138 or
// 1970; an old but possible one is kept.
func TestAbsurdEventTime(t *testing.T) {
	tests := []struct {
		name string
		ct   func(now time.Time) int64
		want func(now time.Time) time.Time
	}{
		{"plausible", func(n time.Time) int64 { return n.Unix() - 30 }, func(n time.Time) time.Time { return time.Unix(n.Unix()-30, 0) }},
		{"far future", func(time.Time) int64 { return 99999999999999 }, func(n time.Time) time.Time { return n }},
		{"1970", func(time.Time) int64 { return 1 }, func(n time.Time) time.Time { return n }},
		{"a day old: WeCom may deliver late", func(n time.Time) int64 { return n.Unix() - 86400 }, func(n time.Time) time.Time { return time.Unix(n.Unix()-86400, 0) }},
		{"within the window ahead", func(n time.Time) int64 { return n.Unix() + 60 }, func(n time.Time) time.Time { return time.Unix(n.Unix()+60, 0) }},
		{"beyond the window ahead", func(n time.Time) int64 { return n.Unix() + 3600 }, func(n time.Time) time.Time { return n }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			if w := h.post(t, "hr", card("zhangsan", tt.ct(h.now), "task-1", "any")); w.Code != 200 {
				t.Fatalf("card = %d %q", w.Code, w.Body)
			}
			cards, _ := h.reads.calls()
			if len(cards) != 1 || !cards[0].At.Equal(tt.want(h.now)) {
				t.Errorf("read at %+v; want %v", cards, tt.want(h.now))
			}
		})
	}
}
