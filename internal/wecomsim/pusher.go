package wecomsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/xml"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/yidu-io/yidu/callback/wxcrypt"
	"github.com/yidu-io/yidu/internal/jitter"
)

// WeCom's delivery rules (doc path 90238): it waits 5 seconds for an answer
// and tries three times in all.
const (
	DefaultTimeout = 5 * time.Second
	DefaultTries   = 3
)

// App is the WeCom app whose callbacks are simulated.
type App struct {
	CorpID         string
	AgentID        int64
	Token          string
	EncodingAESKey string
}

// Options configures a Pusher.
type Options struct {
	// Target is the receiver's callback URL; the signed query is added to it.
	Target string
	App    App
	// Rate limits first attempts per second (0: unlimited); Burst is the
	// limiter's burst (default 1).
	Rate  float64
	Burst int
	// Concurrency is the most callbacks in flight (default 1).
	Concurrency int
	// Timeout bounds one attempt (default DefaultTimeout).
	Timeout time.Duration
	// Tries is attempts per callback in all (default DefaultTries).
	Tries int
	// Backoff is the pause before a retry (default 500 ms; WeCom does not
	// publish its own).
	Backoff time.Duration
	// Client sends the requests (default: a client with a pool sized to
	// Concurrency).
	Client *http.Client
	Logger *slog.Logger
}

// Pusher pushes signed, encrypted callbacks at a receiver.
type Pusher struct {
	opts    Options
	target  *url.URL
	crypter *wxcrypt.Crypter
	logger  *slog.Logger
}

// NewPusher checks opts and returns a Pusher.
func NewPusher(opts Options) (*Pusher, error) {
	target, err := url.Parse(opts.Target)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") {
		return nil, fmt.Errorf("wecomsim: target %q is not an http(s) URL", opts.Target)
	}
	c, err := wxcrypt.New(opts.App.Token, opts.App.EncodingAESKey, opts.App.CorpID)
	if err != nil {
		return nil, fmt.Errorf("wecomsim: app: %w", err)
	}
	opts.Concurrency = max(opts.Concurrency, 1)
	opts.Burst = max(opts.Burst, 1)
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Tries <= 0 {
		opts.Tries = DefaultTries
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 500 * time.Millisecond
	}
	if opts.Client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = opts.Concurrency
		opts.Client = &http.Client{Transport: tr}
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Pusher{opts: opts, target: target, crypter: c, logger: logger.With("component", "wecomsim")}, nil
}

// Request is one callback, encrypted and signed, ready to send (and resend
// unchanged: a WeCom retry repeats the same message).
type Request struct {
	URL  string
	Body []byte
	// Event is what the callback carries.
	Event Event
}

// Build encrypts and signs events, so a benchmark can time the pushing alone.
// The query's timestamp is the event's CreateTime and the nonce is random.
func (p *Pusher) Build(events []Event) ([]Request, error) {
	reqs := make([]Request, len(events))
	for i, e := range events {
		msg, err := e.XML(p.opts.App.CorpID, p.opts.App.AgentID)
		if err != nil {
			return nil, err
		}
		n, err := rand.Int(rand.Reader, big.NewInt(1e10))
		if err != nil {
			return nil, fmt.Errorf("wecomsim: nonce: %w", err)
		}
		q, body, err := p.crypter.Post(msg, p.opts.App.AgentID, strconv.FormatInt(e.CreateTime.Unix(), 10), n.String())
		if err != nil {
			return nil, fmt.Errorf("wecomsim: encrypt: %w", err)
		}
		u := *p.target
		all := u.Query()
		for k, v := range q {
			all[k] = v
		}
		u.RawQuery = all.Encode()
		reqs[i] = Request{URL: u.String(), Body: body, Event: e}
	}
	return reqs, nil
}

// Stats summarizes a Push.
type Stats struct {
	// Callbacks is how many callbacks were pushed (not counting retries).
	Callbacks int64
	// Attempts is HTTP requests made; OK of them were answered 200.
	Attempts, OK int64
	// Retries is attempts after a callback's first.
	Retries int64
	// Failures is callbacks never answered 200 within Tries, or cut short
	// by the context.
	Failures int64
	// Replies is 200 answers that carried a passive reply WeCom would show
	// the member (doc path 90241): signed, decrypting to a message for the
	// member who pressed, e.g. update_button on a card press. BadReplies is
	// 200 answers with a body WeCom could not use (a bad signature or
	// ciphertext, or addressed to someone else): the member's card would not
	// change.
	Replies, BadReplies int64
	// Latency percentiles of the attempts (answered or not).
	P50, P90, P99, Max time.Duration
	Elapsed            time.Duration
}

// String returns a one-line summary.
func (s Stats) String() string {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Callbacks) / s.Elapsed.Seconds()
	}
	return fmt.Sprintf("callbacks=%d attempts=%d ok=%d retries=%d failures=%d replies=%d bad_replies=%d p50=%v p90=%v p99=%v max=%v elapsed=%v (%.0f/s)",
		s.Callbacks, s.Attempts, s.OK, s.Retries, s.Failures, s.Replies, s.BadReplies, s.P50, s.P90, s.P99, s.Max, s.Elapsed.Round(time.Millisecond), rate)
}

// Push sends reqs with at most Concurrency in flight and first attempts at
// most Rate a second, retrying like WeCom, and returns when every callback
// has succeeded or failed, or ctx ends (the rest count as failures).
func (p *Pusher) Push(ctx context.Context, reqs []Request) Stats {
	var limiter *rate.Limiter
	if p.opts.Rate > 0 {
		limiter = rate.NewLimiter(rate.Limit(p.opts.Rate), p.opts.Burst)
	}
	var (
		next                            atomic.Int64
		attempts, ok, retries, failures atomic.Int64
		replies, badReplies             atomic.Int64
		mu                              sync.Mutex
		latencies                       = make([]time.Duration, 0, len(reqs))
		wg                              sync.WaitGroup
	)
	start := time.Now()
	for range min(p.opts.Concurrency, len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			defer func() {
				mu.Lock()
				latencies = append(latencies, lat...)
				mu.Unlock()
			}()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(reqs)) {
					return
				}
				if limiter != nil && limiter.Wait(ctx) != nil {
					failures.Add(1)
					continue
				}
				delivered := false
				for try := range p.opts.Tries {
					if try > 0 {
						retries.Add(1)
						if jitter.Sleep(ctx, p.opts.Backoff) != nil {
							break
						}
					}
					t0 := time.Now()
					status, reply, err := p.send(ctx, reqs[i])
					lat = append(lat, time.Since(t0))
					attempts.Add(1)
					if err == nil && status == http.StatusOK {
						ok.Add(1)
						switch p.checkReply(reply, reqs[i].Event) {
						case replyOK:
							replies.Add(1)
						case replyBad:
							badReplies.Add(1)
						}
						delivered = true
						break
					}
					p.logger.Debug("callback attempt failed", "try", try+1, "status", status, "err", err)
				}
				if !delivered {
					failures.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	s := Stats{
		Callbacks: int64(len(reqs)), Attempts: attempts.Load(), OK: ok.Load(),
		Retries: retries.Load(), Failures: failures.Load(), Elapsed: time.Since(start),
		Replies: replies.Load(), BadReplies: badReplies.Load(),
	}
	slices.Sort(latencies)
	if n := len(latencies); n > 0 {
		pct := func(q float64) time.Duration { return latencies[min(n-1, int(q*float64(n)))] }
		s.P50, s.P90, s.P99, s.Max = pct(0.50), pct(0.90), pct(0.99), latencies[n-1]
	}
	return s
}

// maxReply bounds the answer body read: a passive reply is one small
// encrypted message.
const maxReply = 64 << 10

func (p *Pusher) send(ctx context.Context, r Request) (status int, reply []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return 0, nil, fmt.Errorf("wecomsim: request: %w", err)
	}
	req.Header.Set("Content-Type", "text/xml")
	resp, err := p.opts.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	reply, err = io.ReadAll(io.LimitReader(resp.Body, maxReply))
	// Drain the rest so the connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, reply, err
}

type replyKind int

const (
	replyNone replyKind = iota // an empty 200: nothing to show (doc path 90238)
	replyOK
	replyBad
)

// replyEnvelope is a passive reply as WeCom reads it (doc path 90241):
// the encrypted message with its own signature, timestamp and nonce.
type replyEnvelope struct {
	Encrypt      string `xml:"Encrypt"`
	MsgSignature string `xml:"MsgSignature"`
	TimeStamp    string `xml:"TimeStamp"`
	Nonce        string `xml:"Nonce"`
}

// replyMessage is the decrypted reply's addressing and type.
type replyMessage struct {
	ToUserName   string `xml:"ToUserName"`
	FromUserName string `xml:"FromUserName"`
	MsgType      string `xml:"MsgType"`
}

// checkReply does with a 200's body what WeCom does: an empty body is no
// reply; otherwise the signature must verify over Encrypt, the ciphertext
// must decrypt to this corp, and the message must go to the member whose
// event it answers, from the corp.
func (p *Pusher) checkReply(body []byte, e Event) replyKind {
	if len(bytes.TrimSpace(body)) == 0 {
		return replyNone
	}
	var env replyEnvelope
	if xml.Unmarshal(body, &env) != nil || env.Encrypt == "" {
		return replyBad
	}
	if p.crypter.Verify(env.MsgSignature, env.TimeStamp, env.Nonce, env.Encrypt) != nil {
		return replyBad
	}
	plain, err := p.crypter.Decrypt(env.Encrypt)
	if err != nil {
		return replyBad
	}
	var m replyMessage
	if xml.Unmarshal(plain, &m) != nil || m.MsgType == "" || m.ToUserName != e.UserID || m.FromUserName != p.opts.App.CorpID {
		return replyBad
	}
	return replyOK
}
