package wecomsim

import (
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
)

// The official test app of WeCom's sample libraries (doc path 91144).
var testApp = App{CorpID: "wx5823bf96d3bd56c7", AgentID: 218, Token: "QDG6eK", EncodingAESKey: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"}

type envelope struct {
	ToUserName string `xml:"ToUserName"`
	Encrypt    string `xml:"Encrypt"`
	AgentID    string `xml:"AgentID"`
}

// receiver is a callback endpoint that checks each request as yidu's
// receiver must: signature over Encrypt, decryption, ReceiveId.
type receiver struct {
	t       *testing.T
	crypter *wxcrypt.Crypter
	// status answers the n-th attempt (1-based) of a callback (by nonce).
	status func(n int) int
	delay  time.Duration
	// reply, if set, is the body of a 200 answer to the event ev.
	reply func(ev eventXML) []byte

	mu       sync.Mutex
	attempts map[string]int
	events   []eventXML
	inFlight atomic.Int64
	maxIn    atomic.Int64
}

func newReceiver(t *testing.T, status func(int) int) (*receiver, *httptest.Server) {
	c, err := wxcrypt.New(testApp.Token, testApp.EncodingAESKey, testApp.CorpID)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{t: t, crypter: c, status: status, attempts: map[string]int{}}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for {
		m := r.maxIn.Load()
		if n <= m || r.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(r.delay)
	q := req.URL.Query()
	body, _ := io.ReadAll(req.Body)
	var env envelope
	if req.Method != http.MethodPost || xml.Unmarshal(body, &env) != nil {
		r.t.Errorf("bad request %s %q", req.Method, body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if err := r.crypter.Verify(q.Get("msg_signature"), q.Get("timestamp"), q.Get("nonce"), env.Encrypt); err != nil {
		r.t.Errorf("Verify: %v", err)
		w.WriteHeader(http.StatusForbidden)
		return
	}
	msg, err := r.crypter.Decrypt(env.Encrypt)
	if err != nil {
		r.t.Errorf("Decrypt: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var ev eventXML
	if err := xml.Unmarshal(msg, &ev); err != nil {
		r.t.Errorf("event xml: %v", err)
	}
	if env.ToUserName != testApp.CorpID || env.AgentID != "218" || q.Get("tenant") != "t1" {
		r.t.Errorf("envelope %+v, query %v", env, q)
	}
	r.mu.Lock()
	r.attempts[q.Get("nonce")]++
	a := r.attempts[q.Get("nonce")]
	r.events = append(r.events, ev)
	r.mu.Unlock()
	code := r.status(a)
	w.WriteHeader(code)
	if code == http.StatusOK && r.reply != nil {
		w.Write(r.reply(ev))
	}
}

func newPusher(t *testing.T, url string, concurrency int) *Pusher {
	t.Helper()
	p, err := NewPusher(Options{Target: url + "/callback?tenant=t1", App: testApp, Concurrency: concurrency, Backoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPushRetriesLikeWeCom(t *testing.T) {
	tests := []struct {
		name   string
		status func(n int) int
		want   Stats
	}{
		{"200", func(int) int { return 200 }, Stats{Callbacks: 1, Attempts: 1, OK: 1}},
		{"503 twice then 200", func(n int) int {
			if n <= 2 {
				return 503
			}
			return 200
		}, Stats{Callbacks: 1, Attempts: 3, OK: 1, Retries: 2}},
		{"always 500", func(int) int { return 500 }, Stats{Callbacks: 1, Attempts: 3, Retries: 2, Failures: 1}},
		{"204 is not 200", func(int) int { return 204 }, Stats{Callbacks: 1, Attempts: 3, Retries: 2, Failures: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, srv := newReceiver(t, tt.status)
			p := newPusher(t, srv.URL, 1)
			at := time.Unix(1700000000, 0)
			reqs, err := p.Build([]Event{{Kind: KindCard, UserID: "zhangsan", CreateTime: at, TaskID: "m1@0", EventKey: "read"}})
			if err != nil {
				t.Fatal(err)
			}
			got := p.Push(context.Background(), reqs)
			got.P50, got.P90, got.P99, got.Max, got.Elapsed = 0, 0, 0, 0, 0
			if got != tt.want {
				t.Errorf("Push = %+v; want %+v", got, tt.want)
			}
			if len(r.attempts) != 1 {
				t.Errorf("distinct callbacks received = %d; want 1 (retries repeat the same message)", len(r.attempts))
			}
			ev := r.events[0]
			if ev.Event.V != "template_card_event" || ev.FromUserName.V != "zhangsan" || ev.TaskID.V != "m1@0" ||
				ev.EventKey.V != "read" || ev.CreateTime != at.Unix() || ev.AgentID != 218 {
				t.Errorf("decrypted event = %+v", ev)
			}
		})
	}
}

// TestPushReplies: the simulator checks a passive reply as WeCom would
// (doc path 90241) and counts the usable ones apart from the rest.
func TestPushReplies(t *testing.T) {
	c, err := wxcrypt.New(testApp.Token, testApp.EncodingAESKey, testApp.CorpID)
	if err != nil {
		t.Fatal(err)
	}
	other, err := wxcrypt.New("other-token", testApp.EncodingAESKey, testApp.CorpID)
	if err != nil {
		t.Fatal(err)
	}
	updateButton := func(to string) []byte {
		return []byte("<xml><ToUserName><![CDATA[" + to + "]]></ToUserName><FromUserName><![CDATA[" + testApp.CorpID +
			"]]></FromUserName><CreateTime>1700000001</CreateTime><MsgType><![CDATA[update_button]]></MsgType>" +
			"<Button><ReplaceName><![CDATA[已读]]></ReplaceName></Button></xml>")
	}
	sealed := func(c *wxcrypt.Crypter, msg []byte) []byte {
		b, err := c.Reply(msg, "1700000001", "42")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name            string
		reply           func(ev eventXML) []byte
		replies, badRep int64
	}{
		{"empty 200", nil, 0, 0},
		{"update_button to the presser", func(ev eventXML) []byte { return sealed(c, updateButton(ev.FromUserName.V)) }, 1, 0},
		{"to another member", func(eventXML) []byte { return sealed(c, updateButton("lisi")) }, 0, 1},
		{"signed with another token", func(ev eventXML) []byte { return sealed(other, updateButton(ev.FromUserName.V)) }, 0, 1},
		{"plaintext", func(ev eventXML) []byte { return updateButton(ev.FromUserName.V) }, 0, 1},
		{"not xml", func(eventXML) []byte { return []byte("success") }, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, srv := newReceiver(t, func(int) int { return 200 })
			r.reply = tt.reply
			p := newPusher(t, srv.URL, 1)
			reqs, err := p.Build([]Event{{Kind: KindCard, UserID: "zhangsan", CreateTime: time.Unix(1700000000, 0), TaskID: "m1@0", EventKey: "read"}})
			if err != nil {
				t.Fatal(err)
			}
			if s := p.Push(context.Background(), reqs); s.OK != 1 || s.Replies != tt.replies || s.BadReplies != tt.badRep {
				t.Errorf("Push = %v; want ok 1, replies %d, bad replies %d", s, tt.replies, tt.badRep)
			}
		})
	}
}

func TestPushConcurrencyBound(t *testing.T) {
	r, srv := newReceiver(t, func(int) int { return 200 })
	r.delay = 20 * time.Millisecond
	p := newPusher(t, srv.URL, 4)
	users := make([]string, 40)
	for i := range users {
		users[i] = UserID(i)
	}
	reqs, err := p.Build(CardReads(users, "m1", "read", time.Unix(1700000000, 0), time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s := p.Push(context.Background(), reqs)
	if s.OK != 40 || s.Failures != 0 {
		t.Errorf("Push = %v; want 40 ok", s)
	}
	if m := r.maxIn.Load(); m > 4 || m < 2 {
		t.Errorf("most callbacks in flight = %d; want 2..4 (concurrency 4)", m)
	}
	if s.P50 < r.delay || s.Max < s.P99 || s.P99 < s.P50 {
		t.Errorf("latencies p50=%v p99=%v max=%v; want ordered and >= %v", s.P50, s.P99, s.Max, r.delay)
	}
}

func TestPushRate(t *testing.T) {
	_, srv := newReceiver(t, func(int) int { return 200 })
	p, err := NewPusher(Options{Target: srv.URL + "/?tenant=t1", App: testApp, Concurrency: 8, Rate: 100, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := p.Build(CardReads([]string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, "m", "", time.Unix(1700000000, 0), 0))
	if err != nil {
		t.Fatal(err)
	}
	// 11 callbacks at 100/s with burst 1 take at least 100 ms.
	if s := p.Push(context.Background(), reqs); s.OK != 11 || s.Elapsed < 95*time.Millisecond {
		t.Errorf("Push = %v; want 11 ok in >= 100ms", s)
	}
}

func TestPushStopsWithContext(t *testing.T) {
	r, srv := newReceiver(t, func(int) int { return 503 })
	_ = r
	p, err := NewPusher(Options{Target: srv.URL + "/?tenant=t1", App: testApp, Backoff: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	reqs, _ := p.Build(CardReads([]string{"a", "b"}, "m", "", time.Unix(1700000000, 0), 0))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if s := p.Push(ctx, reqs); s.Failures != 2 || s.OK != 0 {
		t.Errorf("Push cut by context = %v; want 2 failures", s)
	}
}

func TestNewPusherRejects(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"no target", Options{App: testApp}},
		{"ftp target", Options{Target: "ftp://x", App: testApp}},
		{"bad key", Options{Target: "http://x", App: App{CorpID: "c", Token: "t", EncodingAESKey: "short"}}},
	}
	for _, tt := range tests {
		if _, err := NewPusher(tt.opts); err == nil {
			t.Errorf("NewPusher(%s) = nil error; want one", tt.name)
		}
	}
}
