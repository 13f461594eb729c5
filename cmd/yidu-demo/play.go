package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/yidu-io/yidu/internal/fakewecom"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

// The arrival curve at speed 1. Reads of a notice come in a burst after the
// send and tail off: exponential delays with a mean of 40 s (slow
// departments twice as long), none later than three minutes (a demo's
// patience, not WeCom's), and some people never read.
const (
	meanRead   = 40 * time.Second
	slowFactor = 2
	maxDelay   = 3 * time.Minute
	// neverRead is the share of employees who never read.
	neverRead = 0.08
	// enterOnly is the share of readers who open the app (enter_agent, the
	// card on screen) rather than press the card's button; alsoEnter the
	// share of card readers who open the app later as well.
	enterOnly = 0.06
	alsoEnter = 0.10
	// duplicateShare of callbacks WeCom delivers twice; lostShare have their
	// first answer lost on the way back, so WeCom retries them (doc path
	// 90238: any answer but 200 within 5 s is retried).
	duplicateShare = 0.02
	lostShare      = 0.01
)

// slowDept marks about one department in seven as slow to read.
func slowDept(id int) bool { return id%7 == 3 }

// item is one delivery of a callback, at a time after the play starts.
type item struct {
	at time.Duration
	// id names the callback; a duplicate repeats its original's id and is
	// sent as the very same request.
	id  int
	ev  wecomsim.Event
	dup bool
	// lost: the callback's first answer never reaches WeCom.
	lost bool
}

// plan is what the demo's WeCom will do, decided before it starts.
type plan struct {
	items     []item // by at
	callbacks int    // distinct callbacks (ids 0..callbacks-1)
	employees int
	// readers is the number of distinct employees who read: what the
	// dashboard and MySQL must end up with.
	readers    int
	enterOnly  int
	duplicates int
	flaky      int
}

// makePlan decides who reads when and how, from seed.
func makePlan(users []fakewecom.User, cards map[string]card, departments int, speed float64, seed uint64) plan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	delay := func(mean time.Duration) time.Duration {
		for {
			if d := time.Duration(rng.ExpFloat64() * float64(mean)); d <= maxDelay {
				return d
			}
		}
	}
	p := plan{employees: len(users)}
	for _, u := range users {
		if rng.Float64() < neverRead {
			continue
		}
		p.readers++
		mean := meanRead
		if len(u.Departments) > 0 && slowDept(u.Departments[0]) {
			mean = time.Duration(float64(mean) * slowFactor)
		}
		d := delay(mean)
		if rng.Float64() < enterOnly {
			p.enterOnly++
			p.items = append(p.items, item{at: d, ev: wecomsim.Event{Kind: wecomsim.KindEnterAgent, UserID: u.UserID}})
			continue
		}
		c := cards[u.UserID]
		p.items = append(p.items, item{at: d, ev: wecomsim.Event{Kind: wecomsim.KindCard, UserID: u.UserID, TaskID: c.TaskID, EventKey: c.Key}})
		if rng.Float64() < alsoEnter {
			p.items = append(p.items, item{at: min(d+delay(meanRead), maxDelay), ev: wecomsim.Event{Kind: wecomsim.KindEnterAgent, UserID: u.UserID}})
		}
	}
	p.callbacks = len(p.items)
	for i := range p.items {
		p.items[i].id = i
	}
	if n := p.callbacks; n > 0 {
		// At least one of each, so a small run shows them too.
		for _, i := range rng.Perm(n)[:max(1, int(math.Round(lostShare*float64(n))))] {
			p.items[i].lost = true
			p.flaky++
		}
		for _, i := range rng.Perm(n)[:max(1, int(math.Round(duplicateShare*float64(n))))] {
			dup := p.items[i]
			dup.dup, dup.lost = true, false
			dup.at += 500*time.Millisecond + time.Duration(rng.Float64()*float64(5*time.Second))
			p.items = append(p.items, dup)
			p.duplicates++
		}
	}
	for i := range p.items {
		p.items[i].at = time.Duration(float64(p.items[i].at) / speed)
	}
	slices.SortStableFunc(p.items, func(a, b item) int { return int(a.at - b.at) })
	return p
}

// counts are what the player did so far.
type counts struct {
	// Sent counts deliveries handed to WeCom's pusher (duplicates too).
	Sent, Duplicates int64
	// Attempts, OK, Retries and Failures sum wecomsim.Stats. Replies are
	// 200s whose passive reply WeCom would show (the pressed card's button
	// turns to "read", doc path 90241); BadReplies are bodies WeCom could
	// not use.
	Attempts, OK, Retries, Failures int64
	Replies, BadReplies             int64
	Finished                        bool
}

// player plays WeCom: each item at its time, through a bounded pool of
// workers that retry like WeCom (wecomsim.Pusher).
type player struct {
	pusher *wecomsim.Pusher
	front  *front
	log    *slog.Logger

	sent, dups, attempts, ok, retries, failures atomic.Int64
	replies, badReplies                         atomic.Int64
	finished                                    atomic.Bool
}

func (p *player) counts() counts {
	return counts{
		Sent: p.sent.Load(), Duplicates: p.dups.Load(), Attempts: p.attempts.Load(), OK: p.ok.Load(),
		Retries: p.retries.Load(), Failures: p.failures.Load(), Finished: p.finished.Load(),
		Replies: p.replies.Load(), BadReplies: p.badReplies.Load(),
	}
}

// run plays pl until done or ctx ends. The work channel is bounded: when the
// receiver is slower than the curve, the schedule waits (backpressure)
// rather than piling up goroutines.
func (p *player) run(ctx context.Context, pl plan, workers int) {
	defer p.finished.Store(true)
	work := make(chan wecomsim.Request, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				s := p.pusher.Push(ctx, []wecomsim.Request{r})
				p.attempts.Add(s.Attempts)
				p.ok.Add(s.OK)
				p.retries.Add(s.Retries)
				p.failures.Add(s.Failures)
				p.replies.Add(s.Replies)
				p.badReplies.Add(s.BadReplies)
			}
		}()
	}
	defer wg.Wait()
	defer close(work)

	built := make([]*wecomsim.Request, pl.callbacks)
	start := time.Now()
	for _, it := range pl.items {
		if !sleepUntil(ctx, start.Add(it.at)) {
			return
		}
		r := built[it.id]
		if r == nil {
			// Built when due: the signed timestamp and CreateTime are now.
			ev := it.ev
			ev.CreateTime = time.Now()
			reqs, err := p.pusher.Build([]wecomsim.Event{ev})
			if err != nil {
				p.log.Error("build callback", "err", err)
				p.failures.Add(1)
				continue
			}
			r = &reqs[0]
			built[it.id] = r
			if it.lost {
				p.front.loseFirstAnswer(r.URL)
			}
		}
		select {
		case work <- *r:
			p.sent.Add(1)
			if it.dup {
				p.dups.Add(1)
			}
		case <-ctx.Done():
			return
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// front stands between the simulated WeCom and the receiver, as the
// internet does: it passes callbacks through, except that it loses the
// first answer to the callbacks marked with loseFirstAnswer, alternately
// before the receiver saw the callback and after it processed it, so WeCom
// retries both kinds.
type front struct {
	srv   *http.Server
	addr  string
	proxy *httputil.ReverseProxy
	lose  sync.Map // request URI → struct{}
	lost  atomic.Int64
}

func startFront(receiverAddr string, conns int, log *slog.Logger) (*front, error) {
	target := &url.URL{Scheme: "http", Host: receiverAddr}
	proxy := httputil.NewSingleHostReverseProxy(target)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns
	proxy.Transport = tr
	proxy.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("wecom front: %w", err)
	}
	f := &front{addr: ln.Addr().String(), proxy: proxy}
	f.srv = &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("wecom front stopped", "err", err)
		}
	}()
	return f, nil
}

// loseFirstAnswer marks the callback at rawURL (as the pusher sends it).
func (f *front) loseFirstAnswer(rawURL string) {
	if u, err := url.Parse(rawURL); err == nil {
		f.lose.Store(u.RequestURI(), struct{}{})
	}
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := f.lose.LoadAndDelete(r.URL.RequestURI()); ok {
		if f.lost.Add(1)%2 == 1 {
			http.Error(w, "demo: answer lost before the receiver", http.StatusBadGateway)
			return
		}
		f.proxy.ServeHTTP(discard{h: http.Header{}}, r)
		http.Error(w, "demo: answer lost after the receiver", http.StatusGatewayTimeout)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

func (f *front) close(ctx context.Context) error { return f.srv.Shutdown(ctx) }

// discard is a ResponseWriter that drops the receiver's answer.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
