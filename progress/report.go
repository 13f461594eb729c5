package progress

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/access"
)

// estimateWindow is how far back the read rate is measured: long enough to
// smooth out bursts, short enough to follow a notice as it slows down.
const estimateWindow = 5 * time.Minute

// maxCurvePoints bounds the curve sent to the page: older messages get
// their minutes merged into wider buckets.
const maxCurvePoints = 720

// maxCacheEntries bounds each cache (corps, messages).
const maxCacheEntries = 4096

// ETA is an estimated time to reach a share of the recipients.
type ETA struct {
	Seconds float64   `json:"seconds"`
	At      time.Time `json:"at"`
}

// CurvePoint is the reads of one bucket of minutes.
type CurvePoint struct {
	At    time.Time `json:"at"`
	Reads int64     `json:"reads"`
	// BySignal splits Reads by the signal that made each read count.
	BySignal yidu.SignalCounts `json:"by_signal"`
}

// Report is a notice's progress within a View: its counts, its curve and
// the estimates (GET /api/v1/messages/{msgid}/progress, the live stream).
type Report struct {
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
	ETA90         *ETA     `json:"eta_90"`
	ETA100        *ETA     `json:"eta_100"`
	// BucketMinutes is the width of each curve point (1 unless merged).
	BucketMinutes int          `json:"bucket_minutes"`
	Curve         []CurvePoint `json:"curve"`
}

// CurveTotal is the reads of a report's curve.
func (r Report) CurveTotal() int64 {
	var n int64
	for _, p := range r.Curve {
		n += p.Reads
	}
	return n
}

// Moved reports whether r is news to a live view that was last sent
// last: its counts, each signal's or its flushed minutes differ. The
// ETAs' drift with the clock alone is not worth an event.
func (r Report) Moved(last Report) bool {
	return r.Recipients != last.Recipients || r.Read != last.Read || r.BySignal != last.BySignal || r.CurveTotal() != last.CurveTotal()
}

// Percent is read/recipients in percent, one decimal, rounded down so
// 99.96% never shows as 100 before everyone has read.
func Percent(read, recipients int64) float64 {
	if recipients <= 0 {
		return 0
	}
	return math.Floor(float64(read)*1000/float64(recipients)) / 10
}

// Report returns m's progress within v: counts, curve and ETA.
func (p *Progress) Report(ctx context.Context, m yidu.Message, v access.View) (Report, error) {
	c, err := p.Counts(ctx, m, v)
	if err != nil {
		return Report{}, err
	}
	rec, read := c.Recipients, c.Read
	curve, err := p.ScopedCurve(ctx, m, v)
	if err != nil {
		return Report{}, err
	}
	now := p.now()
	r := Report{MsgID: m.MsgID, SentAt: m.SentAt.UTC(), AsOf: now.UTC(),
		Recipients: rec, Read: read, Unread: rec - read, Percent: Percent(read, rec), BySignal: c.BySignal}
	r.RatePerMinute, r.ETA90, r.ETA100 = estimate(now, m.SentAt, rec, read, curve)
	r.Curve, r.BucketMinutes = bucketCurve(curve, m.SentAt)
	return r, nil
}

// ScopedCurve is m's reads per minute within v: the whole notice's
// cached curve for everyone; from the read times of the View's readers
// (MySQL, Curve) otherwise. A scoped curve is cached like the whole one
// (5 s, per notice and View.Key), so a leader's live stream, which asks
// every second, reads MySQL once per 5 s however many of the scope watch.
func (p *Progress) ScopedCurve(ctx context.Context, m yidu.Message, v access.View) ([]yidu.MinuteCount, error) {
	if v.All() {
		return p.curves.get(ctx, m.CorpID+"\x00"+m.MsgID)
	}
	if k := v.Key(); k != "" {
		// The loader finds the notice and the View in ctx (the cache's
		// load keeps its values); one Key is one set of people.
		return p.scopedCurves.get(context.WithValue(ctx, curveKey{}, curveReq{m, v}), m.CorpID+"\x00"+m.MsgID+"\x00"+k)
	}
	return p.Curve(ctx, m, v)
}

type curveKey struct{}

type curveReq struct {
	m yidu.Message
	v access.View
}

// newCurveCaches keeps each message's per-minute curve for ttl, so a page
// polling every second (or many SSE streams) costs MySQL one GROUP BY per
// ttl per message. Keys are corp + "\x00" + msgid.
//
// An expired curve is answered while one reload runs in the background:
// the count comes from Redis and must not wait for the archive. At
// 1,000,000 recipients in the storm the GROUP BY took seconds on a busy
// MySQL, and the progress request that met the expiry waited for it, so
// the page stood still for as long (docs/benchmarks.md, issue 16).
func (p *Progress) newCurveCaches(ttl time.Duration) {
	p.curves = newCache(p.now, ttl, maxCacheEntries, func(ctx context.Context, key string) ([]yidu.MinuteCount, error) {
		if p.history == nil {
			return nil, nil
		}
		corp, msgID, _ := strings.Cut(key, "\x00")
		curve, err := p.history.ReadsPerMinute(ctx, corp, msgID)
		if err != nil {
			return nil, fmt.Errorf("progress: reads per minute: %w", err)
		}
		return curve, nil
	})
	p.curves.stale = true
	p.scopedCurves = newCache(p.now, ttl, maxCacheEntries, func(ctx context.Context, _ string) ([]yidu.MinuteCount, error) {
		r, ok := ctx.Value(curveKey{}).(curveReq)
		if !ok {
			return nil, errors.New("progress: scoped curve without its message")
		}
		return p.Curve(ctx, r.m, r.v)
	})
	p.scopedCurves.stale = true
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
func estimate(now, sentAt time.Time, recipients, read int64, curve []yidu.MinuteCount) (rate *float64, eta90, eta100 *ETA) {
	reached := func(target int64) *ETA {
		if read >= target {
			return &ETA{Seconds: 0, At: now.UTC()}
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
	at := func(target int64, done *ETA) *ETA {
		if done != nil || perSecond <= 0 {
			return done
		}
		secs := math.Ceil(float64(target-read) / perSecond)
		return &ETA{Seconds: secs, At: now.Add(time.Duration(secs) * time.Second).UTC()}
	}
	return rate, at(target90, eta90), at(recipients, eta100)
}

// bucketCurve merges minutes into buckets so at most maxCurvePoints remain.
func bucketCurve(curve []yidu.MinuteCount, sentAt time.Time) ([]CurvePoint, int) {
	out := []CurvePoint{}
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
		out = append(out, CurvePoint{At: at, Reads: c.Reads, BySignal: c.BySignal})
	}
	return out, width
}
