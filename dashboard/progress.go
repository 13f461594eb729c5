package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
)

// estimateWindow is how far back the read rate is measured: long enough to
// smooth out bursts, short enough to follow a notice as it slows down.
const estimateWindow = 5 * time.Minute

// maxCurvePoints bounds the curve sent to the page: older messages get
// their minutes merged into wider buckets.
const maxCurvePoints = 720

// eta is an estimated time to reach a share of the recipients.
type eta struct {
	Seconds float64   `json:"seconds"`
	At      time.Time `json:"at"`
}

type curvePoint struct {
	At    time.Time `json:"at"`
	Reads int64     `json:"reads"`
	// BySignal splits Reads by the signal that made each read count.
	BySignal yidu.SignalCounts `json:"by_signal"`
}

type progressJSON struct {
	MsgID      string    `json:"msgid"`
	SentAt     time.Time `json:"sent_at"`
	AsOf       time.Time `json:"as_of"`
	Recipients int64     `json:"recipients"`
	Read       int64     `json:"read"`
	Unread     int64     `json:"unread"`
	Percent    float64   `json:"percent"`
	// BySignal counts the recipients who gave each signal, counted as
	// read or not.
	BySignal yidu.SignalCounts `json:"by_signal"`
	// RatePerMinute is the read rate over the last estimateWindow; null
	// when it cannot be estimated.
	RatePerMinute *float64 `json:"rate_per_minute"`
	ETA90         *eta     `json:"eta_90"`
	ETA100        *eta     `json:"eta_100"`
	// BucketMinutes is the width of each curve point (1 unless merged).
	BucketMinutes int          `json:"bucket_minutes"`
	Curve         []curvePoint `json:"curve"`
}

// estimate derives the read rate and the times to 90% and 100%.
//
// The rate is (reads now − reads at the window start) / window, where the
// window is the last 5 minutes (or the time since sending, if shorter; under
// a minute is too little to say anything). "Reads now" is the exact live
// BITCOUNT; "reads at the window start" sums the per-minute curve (MySQL,
// flushed reads) over the minutes that ended before the window began —
// flushd writes every interval (1 minute by default), well inside the
// window, so those minutes are complete. A rate of zero gives null ETAs
// unless the target is already reached (ETA 0).
func estimate(now, sentAt time.Time, recipients, read int64, curve []yidu.MinuteCount) (rate *float64, eta90, eta100 *eta) {
	reached := func(target int64) *eta {
		if read >= target {
			return &eta{Seconds: 0, At: now.UTC()}
		}
		return nil
	}
	target90 := int64(math.Ceil(0.9 * float64(recipients)))
	eta90, eta100 = reached(target90), reached(recipients)
	window := min(estimateWindow, now.Sub(sentAt))
	if window < time.Minute || recipients <= 0 {
		return nil, eta90, eta100
	}
	start := now.Add(-window)
	var before int64
	for _, c := range curve {
		if !c.Minute.Add(time.Minute).After(start) {
			before += c.Reads
		}
	}
	perSecond := float64(read-before) / window.Seconds()
	if perSecond < 0 {
		perSecond = 0
	}
	perMinute := perSecond * 60
	rate = &perMinute
	at := func(target int64, done *eta) *eta {
		if done != nil || perSecond <= 0 {
			return done
		}
		secs := math.Ceil(float64(target-read) / perSecond)
		return &eta{Seconds: secs, At: now.Add(time.Duration(secs) * time.Second).UTC()}
	}
	return rate, at(target90, eta90), at(recipients, eta100)
}

// bucketCurve merges minutes into buckets so at most maxCurvePoints remain.
func bucketCurve(curve []yidu.MinuteCount, sentAt time.Time) ([]curvePoint, int) {
	out := []curvePoint{}
	if len(curve) == 0 {
		return out, 1
	}
	first := sentAt.Truncate(time.Minute)
	if curve[0].Minute.Before(first) {
		first = curve[0].Minute
	}
	span := int(curve[len(curve)-1].Minute.Sub(first)/time.Minute) + 1
	width := max(1, (span+maxCurvePoints-1)/maxCurvePoints)
	bucket := time.Duration(width) * time.Minute
	for _, c := range curve {
		at := first.Add(c.Minute.Sub(first) / bucket * bucket).UTC()
		if n := len(out); n > 0 && out[n-1].At.Equal(at) {
			p := &out[n-1]
			p.Reads += c.Reads
			p.BySignal.Button += c.BySignal.Button
			p.BySignal.Link += c.BySignal.Link
			p.BySignal.EnterAgent += c.BySignal.EnterAgent
			continue
		}
		out = append(out, curvePoint{At: at, Reads: c.Reads, BySignal: c.BySignal})
	}
	return out, width
}

// maxCacheEntries bounds each cache (corps, messages).
const maxCacheEntries = 4096

// newCurveCache keeps each message's per-minute curve for ttl, so a page
// polling every second (or many SSE streams) costs MySQL one GROUP BY per
// ttl per message. Keys are corp + "\x00" + msgid.
//
// An expired curve is answered while one reload runs in the background:
// the count comes from Redis and must not wait for the archive. At
// 1,000,000 recipients in the storm the GROUP BY took seconds on a busy
// MySQL, and the progress request that met the expiry waited for it, so
// the page stood still for as long (docs/benchmarks.md, issue 16).
func newCurveCache(src ReadHistory, now func() time.Time, ttl time.Duration) *cache[[]yidu.MinuteCount] {
	c := newCache(now, ttl, maxCacheEntries, func(ctx context.Context, key string) ([]yidu.MinuteCount, error) {
		corp, msgID, _ := strings.Cut(key, "\x00")
		curve, err := src.ReadsPerMinute(ctx, corp, msgID)
		if err != nil {
			return nil, fmt.Errorf("dashboard: reads per minute: %w", err)
		}
		return curve, nil
	})
	c.stale = true
	return c
}

func (s *Server) progress(ctx context.Context, m yidu.Message) (progressJSON, error) {
	// Within the caller's View (scope.go): counts, curve and ETA.
	c, err := s.scopedCounts(ctx, m)
	if err != nil {
		return progressJSON{}, err
	}
	rec, read := c.recipients, c.read
	curve, err := s.scopedCurve(ctx, m)
	if err != nil {
		return progressJSON{}, err
	}
	now := s.now()
	p := progressJSON{MsgID: m.MsgID, SentAt: m.SentAt.UTC(), AsOf: now.UTC(),
		Recipients: rec, Read: read, Unread: rec - read, Percent: percent(read, rec), BySignal: c.bySignal}
	p.RatePerMinute, p.ETA90, p.ETA100 = estimate(now, m.SentAt, rec, read, curve)
	p.Curve, p.BucketMinutes = bucketCurve(curve, m.SentAt)
	return p, nil
}

func (s *Server) handleProgress(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	p, err := s.progress(r.Context(), m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// keepAlive is how often an idle stream sends a comment, so proxies and
// browsers do not time it out.
const keepAlive = 15 * time.Second

// handleEvents streams progress as Server-Sent Events: one "progress" event
// at once, then at most one per sseInterval while the numbers change. The
// streams are bounded per principal (429 beyond) and in all (503 beyond);
// each write has streamWrite to reach the client, so one that stops
// reading is dropped and frees its slots. A stream ends when the client
// goes away or the Server is closed.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	release := s.userStreams.acquireOwn(w, r, "too many live streams of yours; close one")
	if release == nil {
		return
	}
	defer release()
	if scoped(r.Context()) {
		// Scoped callers (leaders, viewers) together hold at most half
		// the slots: 32 leaders at their 8 each cannot fill them all and
		// leave HR without a live view (issue 38).
		select {
		case s.scopedStreams <- struct{}{}:
			defer func() { <-s.scopedStreams }()
		default:
			w.Header().Set("Retry-After", "10")
			writeError(w, http.StatusServiceUnavailable, "too many live streams")
			return
		}
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "too many live streams")
		return
	}
	s.met.streams.Inc()
	defer s.met.streams.Dec()

	ctx := r.Context()
	rc := http.NewResponseController(w)
	// send writes and flushes within streamWrite: a stream outlives the
	// request's write deadline, but no single event may stall.
	send := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(s.streamWrite))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return err
		}
		return rc.Flush()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	_ = rc.SetWriteDeadline(time.Now().Add(s.streamWrite))
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}

	tick := time.NewTicker(s.sseInterval)
	defer tick.Stop()
	// changed is what makes a new event: the counts, each signal's, and
	// the flushed minutes; the ETAs' drift with the clock alone is not
	// worth one.
	type changed struct {
		recipients, read, curve int64
		bySignal                yidu.SignalCounts
	}
	var last changed
	sent := false
	idle := time.Duration(0)
	// The session and the scope are checked again every streamRecheck
	// (issue 38): a stream ends when its caller signed out, left the
	// company, or no longer sees the notice, and frees its slots.
	recheck := time.NewTicker(s.streamRecheck)
	defer recheck.Stop()
	for {
		p, err := s.progress(ctx, m)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "events: progress", "msgid", m.MsgID, "err", err)
			}
		} else {
			key := changed{p.Recipients, p.Read, curveTotal(p.Curve), p.BySignal}
			if !sent || key != last {
				sent, last = true, key
				b, _ := json.Marshal(p)
				if err := send("event: progress\ndata: %s\n\n", b); err != nil {
					return
				}
				idle = 0
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-recheck.C:
			rr, ok, err := s.recheck(r)
			if err != nil && ctx.Err() == nil {
				s.log.WarnContext(ctx, "events: recheck", "msgid", m.MsgID, "err", err)
			}
			if !ok {
				_ = send("event: end\ndata: {}\n\n")
				return
			}
			ctx = rr.Context()
			continue
		case <-tick.C:
		}
		if idle += s.sseInterval; idle >= keepAlive {
			idle = 0
			if err := send(": keep-alive\n\n"); err != nil {
				return
			}
		}
	}
}

// recheck resolves the stream's caller again (its session, which for a
// WeCom member checks the directory) and its View of the route's notice:
// ok false when either is gone. An error (a store down) keeps the stream
// (ok true) until the next check; the request returned carries the View
// of now.
func (s *Server) recheck(r *http.Request) (*http.Request, bool, error) {
	p := principalFrom(r.Context())
	if p == nil {
		return r, false, nil
	}
	if signInFrom(r.Context()) != nil {
		_, sess, ok, err := s.sessionFrom(r)
		if err != nil {
			return r, true, err
		}
		if !ok {
			return r, false, nil
		}
		r = r.WithContext(withCaller(r.Context(), sess.Principal, sess))
	}
	_, rr, err := s.gate(r)
	switch {
	case errors.Is(err, errNotFound):
		return r, false, nil
	case err != nil:
		return r, true, err
	}
	return rr, true, nil
}

func curveTotal(c []curvePoint) int64 {
	var n int64
	for _, p := range c {
		n += p.Reads
	}
	return n
}
