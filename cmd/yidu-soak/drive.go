package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/wecomsim"
)

// chunkSeconds is how much of the schedule is encrypted and signed at a
// time: the soak holds at most two chunks (the one being pushed and the
// next), so its memory does not grow with -duration.
const chunkSeconds = 10

// schedule is which read callback k (0 ≤ k < total) carries and when it
// is due. The run goes in rounds of one read per recipient: in round r the
// recipient at position p (scattered: p × stride mod users, stride coprime
// with users, a bijection) reads notice (r + p) mod M. So every recipient
// has been seen after the first round (the warm-up covers it: caches keyed
// by member are full before memory is compared), every notice gets reads
// for the whole run, and every callback is a member's first read of that
// notice. Callback k's CreateTime is its due time, start + k/rate, so
// MySQL's read_time of every row is known without keeping a list.
type schedule struct {
	msgs   []string
	users  int
	total  int
	rate   float64
	stride int
	inv    int // stride⁻¹ mod users
	start  time.Time
}

func newSchedule(msgs []string, users, total int, rate float64) schedule {
	s := schedule{msgs: msgs, users: users, total: total, rate: rate, stride: 1, inv: 1}
	for st := users*5/8 + 1; st < 2*users && users > 2; st++ {
		if inv, ok := modInverse(st%users, users); ok {
			s.stride, s.inv = st%users, inv
			break
		}
	}
	return s
}

// modInverse returns a⁻¹ mod m when gcd(a, m) = 1 (extended Euclid).
func modInverse(a, m int) (int, bool) {
	if m == 1 {
		return 0, true
	}
	t, newT, r, newR := 0, 1, m, a
	for newR != 0 {
		q := r / newR
		t, newT = newT, t-q*newT
		r, newR = newR, r-q*newR
	}
	if r != 1 {
		return 0, false
	}
	if t < 0 {
		t += m
	}
	return t, true
}

// at returns callback k's notice index, recipient index and CreateTime.
func (s schedule) at(k int) (msg, user int, created time.Time) {
	r, p := k/s.users, k%s.users
	return (r + p) % len(s.msgs), int(int64(p) * int64(s.stride) % int64(s.users)), s.due(k)
}

// due is when callback k is sent; to the second it is its CreateTime.
func (s schedule) due(k int) time.Time {
	return s.start.Add(time.Duration(float64(k) / s.rate * float64(time.Second)))
}

// index is at's inverse: the callback that carries recipient user's read
// of notice msg, and whether the schedule sends it.
func (s schedule) index(msg, user int) (int, bool) {
	m := len(s.msgs)
	p := int(int64(user) * int64(s.inv) % int64(s.users))
	r := ((msg-p)%m + m) % m
	k := r*s.users + p
	return k, k < s.total
}

// event is callback k's template_card_event.
func (s schedule) event(k int) wecomsim.Event {
	m, u, created := s.at(k)
	return wecomsim.Event{Kind: wecomsim.KindCard, UserID: userIDs.ID(u), CreateTime: created,
		TaskID: wecomsim.TaskID(s.msgs[m], u), EventKey: app.ReadButtonKey}
}

// recorder is the Pusher's transport: it times every attempt and counts
// the answers, so the sampler can report each window's rate and p99
// while the Pusher works through a chunk.
type recorder struct {
	next http.RoundTripper

	mu      sync.Mutex
	lat     []time.Duration
	ok, bad int
	okTotal int64
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	t0 := time.Now()
	resp, err := r.next.RoundTrip(req)
	d := time.Since(t0)
	r.mu.Lock()
	r.lat = append(r.lat, d)
	if err == nil && resp.StatusCode == http.StatusOK {
		r.ok++
		r.okTotal++
	} else {
		r.bad++
	}
	r.mu.Unlock()
	return resp, err
}

// window returns the attempts answered 200 and otherwise since the last
// call, their p99 latency, and the 200s since the start.
func (r *recorder) window() (ok, bad int, p99 time.Duration, okTotal int64) {
	r.mu.Lock()
	lat := r.lat
	ok, bad, okTotal = r.ok, r.bad, r.okTotal
	r.lat, r.ok, r.bad = make([]time.Duration, 0, cap(lat)), 0, 0
	r.mu.Unlock()
	slices.Sort(lat)
	return ok, bad, rig.Percentile(lat, 0.99), okTotal
}

// pushTotals adds up the Pusher's chunks.
type pushTotals struct {
	Callbacks, Attempts, OK, Retries, Failures int64
	Elapsed                                    time.Duration
}

// drive sends the schedule to the receiver at s.cfg.Rate through rec. A
// builder encrypts and signs the next chunk while the Pusher sends the
// current one; chunks are sent one after the other.
func (s *soak) drive(ctx context.Context, rec *recorder) (pushTotals, error) {
	p, err := wecomsim.NewPusher(wecomsim.Options{
		Target:      "http://" + s.receiver + "/wecom/callback/" + app.Name,
		App:         appConfig(),
		Rate:        s.cfg.Rate,
		Burst:       max(1, int(s.cfg.Rate/50)), // 20 ms worth: smooth, yet no stall on a late tick
		Concurrency: s.cfg.Conns,
		Client:      &http.Client{Transport: rec},
	})
	if err != nil {
		return pushTotals{}, err
	}
	chunk := max(1, min(s.sched.total, int(s.cfg.Rate*chunkSeconds)))
	type built struct {
		reqs []wecomsim.Request
		err  error
	}
	ch := make(chan built, 1)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(ch)
		for from := 0; from < s.sched.total; from += chunk {
			evs := make([]wecomsim.Event, 0, chunk)
			for k := from; k < min(from+chunk, s.sched.total); k++ {
				evs = append(evs, s.sched.event(k))
			}
			reqs, err := p.Build(evs)
			select {
			case ch <- built{reqs, err}:
			case <-bctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var t pushTotals
	start := time.Now()
	for b := range ch {
		if b.err != nil {
			return t, fmt.Errorf("build callbacks: %w", b.err)
		}
		st := p.Push(ctx, b.reqs)
		t.Callbacks += st.Callbacks
		t.Attempts += st.Attempts
		t.OK += st.OK
		t.Retries += st.Retries
		t.Failures += st.Failures
		if ctx.Err() != nil {
			break
		}
	}
	t.Elapsed = time.Since(start)
	if unsent := int64(s.sched.total) - t.Callbacks; unsent > 0 {
		t.Failures += unsent // cut short: never sent, never answered
	}
	return t, ctx.Err()
}
