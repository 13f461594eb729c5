package faulttest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yidu-io/yidu/callback/wxcrypt"
)

// readEvent is one member pressing the read button of one message's card.
type readEvent struct {
	MsgID string
	User  string
	At    int64 // the callback's CreateTime
}

type readKey struct{ MsgID, User string }

func (r readEvent) key() readKey { return readKey{r.MsgID, r.User} }

// result is what WeCom saw for one read.
type result struct {
	OK    bool // some try was answered 200
	Tries int
	At    int64
	// During is a label the scenario gave the read when it was sent
	// ("outage", ...), for checks on a phase.
	During string
}

// wecom plays WeCom's callback sender: a template_card_event per read,
// signed and encrypted with the app's token and key, retried on a non-200
// answer or a connection error up to maxTries tries in all (WeCom: "if no
// answer within 5 s ... retried 3 times", doc path 90238). WeCom waits
// about 5 s between tries; the player waits backoff (200 ms) so a test
// stays short, which is harder on yidu: a restarting process has less
// time to come back before WeCom gives up.
type wecom struct {
	crypt    *wxcrypt.Crypter
	urls     []string
	client   *http.Client
	backoff  time.Duration
	maxTries int

	sent     atomic.Int64 // reads finished (answered or given up)
	tries    atomic.Int64
	answered atomic.Int64
	// replies and bare count the 200s with a passive reply (the card's
	// button turning into "已读 ✓", doc path 90241) and without one.
	replies, bare atomic.Int64

	mu       sync.Mutex
	results  map[readKey]result
	statuses map[string]int
	phase    string
}

func newWeCom(tb testing.TB, receivers ...string) *wecom {
	tb.Helper()
	c, err := wxcrypt.New(app.Token, app.EncodingAESKey, app.CorpID)
	if err != nil {
		tb.Fatal(err)
	}
	urls := make([]string, len(receivers))
	for i, a := range receivers {
		urls[i] = "http://" + a + "/wecom/callback/" + app.Name
	}
	return &wecom{
		crypt: c, urls: urls,
		// WeCom waits 5 s for an answer (doc path 90238).
		client:   &http.Client{Timeout: 5 * time.Second},
		backoff:  200 * time.Millisecond,
		maxTries: 3,
		results:  map[readKey]result{},
		statuses: map[string]int{},
	}
}

// setPhase labels the reads sent from now on.
func (w *wecom) setPhase(p string) {
	w.mu.Lock()
	w.phase = p
	w.mu.Unlock()
}

// play delivers reads with workers concurrent senders and returns when
// every read was answered 200 or given up.
func (w *wecom) play(ctx context.Context, reads []readEvent, workers int) {
	ch := make(chan readEvent)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for r := range ch {
				w.deliver(ctx, r)
			}
		})
	}
	for _, r := range reads {
		select {
		case ch <- r:
		case <-ctx.Done():
		}
	}
	close(ch)
	wg.Wait()
}

// goPlay runs play in the background; the returned channel closes when it
// is done.
func (w *wecom) goPlay(ctx context.Context, reads []readEvent, workers int) <-chan struct{} {
	return goDone(func() { w.play(ctx, reads, workers) })
}

// goDone runs f in the background; the returned channel closes when f
// returns.
func goDone(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

// deliver is one read as the harness retries it: up to maxTries, backoff
// apart, each to the next receiver from a random first one.
func (w *wecom) deliver(ctx context.Context, r readEvent) {
	first := mrand.IntN(len(w.urls))
	w.deliverTries(ctx, r, w.maxTries, func(try int) string {
		if try > 0 {
			time.Sleep(w.backoff)
		}
		return w.urls[(first+try)%len(w.urls)]
	})
}

// deliverTries sends r up to tries times, the first 200 ending it, and
// records the result; before returns the URL of each try after waiting
// for its turn.
func (w *wecom) deliverTries(ctx context.Context, r readEvent, tries int, before func(try int) string) {
	w.mu.Lock()
	phase := w.phase
	w.mu.Unlock()
	xml := []byte(cardEvent(r.User, r.MsgID+"@0", r.At))
	res := result{At: r.At, During: phase}
	for try := 0; try < tries && ctx.Err() == nil; try++ {
		url := before(try)
		res.Tries++
		w.tries.Add(1)
		status := w.post(ctx, url, xml)
		w.mu.Lock()
		w.statuses[status]++
		w.mu.Unlock()
		if status == "200" {
			res.OK = true
			w.answered.Add(1)
			break
		}
	}
	w.mu.Lock()
	w.results[r.key()] = res
	w.mu.Unlock()
	w.sent.Add(1)
}

// post sends one try and returns its HTTP status, or "conn" when no
// answer came (refused, reset, timed out).
func (w *wecom) post(ctx context.Context, url string, xml []byte) string {
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	q, body, err := w.crypt.Post(xml, app.AgentID, strconv.FormatInt(time.Now().Unix(), 10), hex.EncodeToString(nonce[:]))
	if err != nil {
		panic(err) // the test vector key is valid
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "text/xml")
	resp, err := w.client.Do(req)
	if err != nil {
		return "conn"
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if bytes.Contains(b, []byte("<Encrypt>")) {
			w.replies.Add(1)
		} else {
			w.bare.Add(1)
		}
	}
	return strconv.Itoa(resp.StatusCode)
}

// waitSent blocks until n reads are finished or done closes.
func (w *wecom) waitSent(n int64, done <-chan struct{}) {
	for w.sent.Load() < n {
		select {
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (w *wecom) snapshot() (map[readKey]result, map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := make(map[readKey]result, len(w.results))
	for k, v := range w.results {
		res[k] = v
	}
	st := make(map[string]int, len(w.statuses))
	for k, v := range w.statuses {
		st[k] = v
	}
	return res, st
}

// cardEvent is the decrypted XML of a template card button press
// (template_card_event, doc path 90240).
func cardEvent(user, taskID string, at int64) string {
	return fmt.Sprintf(`<xml><ToUserName><![CDATA[%s]]></ToUserName><FromUserName><![CDATA[%s]]></FromUserName><CreateTime>%d</CreateTime><MsgType><![CDATA[event]]></MsgType><Event><![CDATA[template_card_event]]></Event><EventKey><![CDATA[%s]]></EventKey><TaskId><![CDATA[%s]]></TaskId><CardType><![CDATA[button_interaction]]></CardType><ResponseCode><![CDATA[rc]]></ResponseCode><AgentID>%d</AgentID></xml>`,
		app.CorpID, user, at, app.ReadButtonKey, taskID, app.AgentID)
}

// readsOf returns one read per (message, member) in a shuffled order, each
// with its own CreateTime within a minute after the send.
func readsOf(msgs []message) []readEvent {
	var rs []readEvent
	for _, m := range msgs {
		for _, u := range m.Users {
			rs = append(rs, readEvent{MsgID: m.ID, User: u, At: m.SentAt.Unix() + 1 + mrand.Int64N(59)})
		}
	}
	mrand.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
	return rs
}
