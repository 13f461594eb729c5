package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// attempts is how often a callback is delivered before it counts as
// failed: WeCom tries three times in all (doc path 90238). The generator
// retries at once rather than after WeCom's 5 s, so a failure costs the run
// little time; the failed attempts count as errors either way.
const attempts = 3

// loadResult is what one run of the generator saw.
type loadResult struct {
	Requests int // callbacks to deliver
	OK       int // answered 200
	Errors   int // attempts answered otherwise or failed in transport
	Failed   int // callbacks never answered 200
	Status   map[int]int
	Start    time.Time
	LastOK   time.Time     // the last 200 arrived
	Elapsed  time.Duration // Start to the last answer
	Lat      []time.Duration
}

// newClient returns a keep-alive client holding at most conns connections
// to one host.
func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

// warm opens the client's connections before timing starts.
func warm(ctx context.Context, client *http.Client, host string, conns int) error {
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	// Labelled: the transport's connection goroutines (readLoop,
	// writeLoop) inherit the label of the goroutine that dialled them, so
	// a profile can tell the generator from the server.
	for range conns {
		wg.Go(func() {
			pprof.Do(ctx, pprof.Labels("role", "generator"), func(ctx context.Context) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/healthz", nil)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// runLoad delivers reqs to host with conns workers. rate 0 is a closed
// loop (each worker sends its next callback when the last is answered);
// rate > 0 is an open loop: callback i is due at Start + i/rate and its
// latency counts from then, so a server falling behind is charged for the
// queue it causes (no coordinated omission).
func runLoad(ctx context.Context, client *http.Client, host, path string, reqs []request, conns int, rate float64) loadResult {
	res := loadResult{Requests: len(reqs), Status: map[int]int{}}
	hdr := http.Header{"Content-Type": {"text/xml"}}
	var next atomic.Int64
	type workerOut struct {
		lat              []time.Duration
		ok, errs, failed int
		status           map[int]int
		lastOK, last     time.Time
	}
	outs := make([]workerOut, conns)
	var wg sync.WaitGroup
	res.Start = time.Now()
	labels := pprof.Labels("role", "generator")
	for w := range conns {
		wg.Go(func() {
			pprof.Do(ctx, labels, func(ctx context.Context) {
				o := &outs[w]
				o.status = map[int]int{}
				o.lat = make([]time.Duration, 0, len(reqs)/conns+16)
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= len(reqs) {
						return
					}
					due := time.Now()
					if rate > 0 {
						due = res.Start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
						if d := time.Until(due); d > 0 {
							select {
							case <-time.After(d):
							case <-ctx.Done():
								return
							}
						}
					}
					r := reqs[i]
					u := &url.URL{Scheme: "http", Host: host, Path: path, RawQuery: r.rawQuery}
					ok := false
					for a := 0; a < attempts && !ok && ctx.Err() == nil; a++ {
						if a > 0 {
							due = time.Now()
						}
						req := (&http.Request{
							Method: http.MethodPost, URL: u, Header: hdr, Host: host,
							Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body)),
						}).WithContext(ctx)
						resp, err := client.Do(req)
						now := time.Now()
						o.last = now
						if err != nil {
							o.errs++
							o.status[0]++
							continue
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						o.lat = append(o.lat, now.Sub(due))
						o.status[resp.StatusCode]++
						if resp.StatusCode == http.StatusOK {
							ok = true
							o.ok++
							o.lastOK = now
						} else {
							o.errs++
						}
					}
					if !ok {
						o.failed++
					}
				}
			})
		})
	}
	wg.Wait()
	var last time.Time
	for _, o := range outs {
		res.OK += o.ok
		res.Errors += o.errs
		res.Failed += o.failed
		for k, v := range o.status {
			res.Status[k] += v
		}
		res.Lat = append(res.Lat, o.lat...)
		if o.lastOK.After(res.LastOK) {
			res.LastOK = o.lastOK
		}
		if o.last.After(last) {
			last = o.last
		}
	}
	// Callbacks never sent (cancelled) are failures too.
	if n := int(min(next.Load(), int64(len(reqs)))); n < len(reqs) {
		res.Failed += len(reqs) - n
	}
	res.Elapsed = last.Sub(res.Start)
	slices.Sort(res.Lat)
	return res
}
