package callback

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/callback/wxcrypt"
)

// The official test vector (shared/wecom-protocol.md) is app "hr".
const (
	vecToken  = "QDG6eK"
	vecCorpID = "wx5823bf96d3bd56c7"
	vecAESKey = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
	vecAgent  = 218
	// opsKey is a second app's key, for ReadButtonKey and isolation tests.
	opsKey = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG"
)

var testApps = []App{
	{App: yidu.App{Name: "hr", CorpID: vecCorpID, AgentID: vecAgent}, Token: vecToken, EncodingAESKey: vecAESKey},
	{App: yidu.App{Name: "ops", CorpID: "wwcorp2", AgentID: 1000002, ReadButtonKey: "read"}, Token: "opstoken", EncodingAESKey: opsKey},
}

type cardCall struct {
	CorpID  string
	AgentID int64
	UserID  string
	TaskID  string
	At      time.Time
}

// fakeReads records calls; err fails them, hang blocks until ctx is done.
type fakeReads struct {
	mu     sync.Mutex
	cards  []cardCall
	enters []cardCall
	links  []cardCall // TaskID holds the msgid
	err    error
	hang   bool
}

func (f *fakeReads) wait(ctx context.Context) error {
	f.mu.Lock()
	hang, err := f.hang, f.err
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (f *fakeReads) CardPress(ctx context.Context, corpID string, agentID int64, userID, taskID string, at time.Time) (int, bool, error) {
	if err := f.wait(ctx); err != nil {
		return 0, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cards = append(f.cards, cardCall{corpID, agentID, userID, taskID, at})
	return 1, true, nil
}

func (f *fakeReads) EnterAgent(ctx context.Context, corpID string, agentID int64, userID string, at time.Time) (int, error) {
	if err := f.wait(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enters = append(f.enters, cardCall{corpID, agentID, userID, "", at})
	return 3, nil
}

func (f *fakeReads) LinkRead(ctx context.Context, corpID string, agentID int64, userID, msgID string, at time.Time) (int, error) {
	if err := f.wait(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.links {
		if c.UserID == userID && c.TaskID == msgID {
			f.links = append(f.links, cardCall{corpID, agentID, userID, msgID, at})
			return 0, nil // opened before: no new read
		}
	}
	f.links = append(f.links, cardCall{corpID, agentID, userID, msgID, at})
	return 1, nil
}

func (f *fakeReads) linkCalls() []cardCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cardCall(nil), f.links...)
}

func (f *fakeReads) set(err error, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err, f.hang = err, hang
}

func (f *fakeReads) calls() (cards, enters []cardCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]cardCall(nil), f.cards...), append([]cardCall(nil), f.enters...)
}

type contactCall struct {
	CorpID, ChangeType, UserID, NewUserID string
	Departments                           []int64
}

type fakeContacts struct {
	calls callLog[contactCall]
}

func (f *fakeContacts) ContactChanged(ctx context.Context, corpID, changeType, userID, newUserID string, departments []int64) error {
	f.calls.add(contactCall{corpID, changeType, userID, newUserID, departments})
	return nil
}

// callLog is what a fake was called with, safe for the handler's
// goroutines.
type callLog[T any] struct {
	mu    sync.Mutex
	calls []T
}

func (l *callLog[T]) add(c T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// all returns the calls so far.
func (l *callLog[T]) all() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// fakeDedup is an in-memory Deduper.
type fakeDedup struct {
	mu          sync.Mutex
	keys        map[string]time.Duration
	seenErr     error
	rememberErr error
}

func (f *fakeDedup) Seen(ctx context.Context, key string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seenErr != nil {
		return false, f.seenErr
	}
	_, ok := f.keys[key]
	return ok, nil
}

func (f *fakeDedup) Remember(ctx context.Context, key string, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rememberErr != nil {
		return f.rememberErr
	}
	f.keys[key] = ttl
	return nil
}

func (f *fakeDedup) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.keys)
}

// harness is a Receiver with fakes behind its router.
type harness struct {
	rc       *Receiver
	h        http.Handler
	reads    *fakeReads
	contacts *fakeContacts
	dedup    *fakeDedup
	reg      *prometheus.Registry
	now      time.Time
}

func newHarness(tb testing.TB, mod func(*Options)) *harness {
	tb.Helper()
	return newHarnessReads(tb, nil, mod)
}

// newHarnessReads is newHarness recording through reads (nil: the fake).
func newHarnessReads(tb testing.TB, reads ReadRecorder, mod func(*Options)) *harness {
	tb.Helper()
	h := &harness{
		reads:    &fakeReads{},
		contacts: &fakeContacts{},
		dedup:    &fakeDedup{keys: map[string]time.Duration{}},
		reg:      prometheus.NewRegistry(),
		now:      time.Unix(1409659813, 0),
	}
	opts := Options{
		Apps:       testApps,
		Contacts:   h.contacts,
		Dedup:      h.dedup,
		Registerer: h.reg,
		Now:        func() time.Time { return h.now },
		Timeout:    time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	if reads == nil {
		reads = h.reads
	}
	rc, err := New(reads, opts)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	h.rc, h.h = rc, rc.Routes()
	return h
}

func crypterFor(tb testing.TB, app string) *wxcrypt.Crypter {
	tb.Helper()
	for _, a := range testApps {
		if a.Name == app {
			c, err := wxcrypt.New(a.Token, a.EncodingAESKey, a.CorpID)
			if err != nil {
				tb.Fatal(err)
			}
			return c
		}
	}
	tb.Fatalf("no app %q", app)
	return nil
}

func (h *harness) do(tb testing.TB, method, target string, body string) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	w := httptest.NewRecorder()
	h.h.ServeHTTP(w, req)
	return w
}

// post sends plaintext as a signed callback of app at the harness's now.
func (h *harness) post(tb testing.TB, app, plaintext string) *httptest.ResponseRecorder {
	tb.Helper()
	q, body := signedPost(tb, app, plaintext, h.now)
	return h.do(tb, http.MethodPost, "/wecom/callback/"+app+"?"+q.Encode(), string(body))
}

func signedPost(tb testing.TB, app, plaintext string, at time.Time) (url.Values, []byte) {
	tb.Helper()
	c := crypterFor(tb, app)
	agent := int64(0)
	for _, a := range testApps {
		if a.Name == app {
			agent = a.AgentID
		}
	}
	q, body, err := c.Post([]byte(plaintext), agent, fmt.Sprint(at.Unix()), "nonce1")
	if err != nil {
		tb.Fatal(err)
	}
	return q, body
}

// envelope signs an arbitrary Encrypt value for app "hr" and wraps it.
func envelope(tb testing.TB, encrypt string, agentID string, at time.Time) (url.Values, string) {
	tb.Helper()
	c := crypterFor(tb, "hr")
	ts := fmt.Sprint(at.Unix())
	q := url.Values{"msg_signature": {c.Signature(ts, "n", encrypt)}, "timestamp": {ts}, "nonce": {"n"}}
	return q, "<xml><ToUserName><![CDATA[" + vecCorpID + "]]></ToUserName><Encrypt><![CDATA[" + encrypt + "]]></Encrypt><AgentID><![CDATA[" + agentID + "]]></AgentID></xml>"
}

// sealRaw CBC-encrypts pt (whole 16-byte blocks) with app hr's key, to
// build ciphertexts wxcrypt would never produce.
func sealRaw(tb testing.TB, pt []byte) string {
	tb.Helper()
	key, err := base64.StdEncoding.DecodeString(vecAESKey + "=")
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := aes.NewCipher(key)
	ct := append([]byte(nil), pt...)
	cipher.NewCBCEncrypter(b, key[:16]).CryptBlocks(ct, ct)
	return base64.StdEncoding.EncodeToString(ct)
}

// requests returns yidu_callback_requests_total for app and outcome label.
func (h *harness) requests(tb testing.TB, app string, o outcome) float64 {
	tb.Helper()
	return h.counter(tb, "yidu_callback_requests_total", "app", app, "outcome", outcomes[o].label, "code", fmt.Sprint(outcomes[o].code))
}

// counter returns the value of the counter name with the label pairs kv,
// failing when the registry has no such series (series are pre-set to 0).
func (h *harness) counter(tb testing.TB, name string, kv ...string) float64 {
	tb.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(kv); i += 2 {
				if labels[kv[i]] != kv[i+1] {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	tb.Fatalf("no series %s%q", name, kv)
	return 0
}

func card(user string, ct int64, task, key string) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[%s]]></EventKey><TaskId><![CDATA[%s]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc1]]></ResponseCode><AgentID>%d</AgentID></xml>`,
		vecCorpID, user, ct, key, task, vecAgent)
}

func enter(user string, ct int64) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[enter_agent]]></Event><EventKey><![CDATA[]]></EventKey><AgentID>%d</AgentID></xml>`,
		vecCorpID, user, ct, vecAgent)
}

// dupRegistry returns a registry that already holds the receiver's
// metrics, so a second New must fail (never panic).
func dupRegistry(tb testing.TB) *prometheus.Registry {
	tb.Helper()
	reg := prometheus.NewRegistry()
	if _, err := New(&fakeReads{}, Options{Apps: testApps, Registerer: reg}); err != nil {
		tb.Fatalf("first New: %v", err)
	}
	return reg
}
