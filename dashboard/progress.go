package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/yidu-io/yidu/campaign/loops"
	"github.com/yidu-io/yidu/progress"

	"github.com/yidu-io/yidu"
)

// progress is m's progress within ctx's View (progress.Report).
func (s *Server) progress(ctx context.Context, m yidu.Message) (progress.Report, error) {
	return s.prog.Report(ctx, m, viewFrom(ctx))
}

func (s *Server) handleProgress(w http.ResponseWriter, r *http.Request, m yidu.Message) {
	p, err := s.progress(r.Context(), m)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := struct {
		progress.Report
		// A standing notice's progress adds each cycle's (issue 51).
		ByCycle []loops.Cycle `json:"by_cycle,omitzero"`
		// A notice read under read_rule acknowledged adds how many are in
		// each of the reading page's states (issue 49): the remind
		// choice's numbers. Not on the live stream: it decodes bitmaps.
		ByState map[yidu.ReadState]uint64 `json:"by_state,omitempty"`
	}{Report: p, ByCycle: s.byCycle(r, m)}
	if m.ReadRule.Acknowledging() {
		if out.ByState, err = s.prog.StateCounts(r.Context(), m, viewFrom(r.Context())); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
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
		releaseScoped := acquireStream(w, s.scopedStreams)
		if releaseScoped == nil {
			return
		}
		defer releaseScoped()
	}
	releaseAll := acquireStream(w, s.streams)
	if releaseAll == nil {
		return
	}
	defer releaseAll()
	s.met.streams.Inc()
	defer s.met.streams.Dec()

	ctx := r.Context()
	send, err := s.openStream(w)
	if err != nil {
		return
	}

	tick := time.NewTicker(s.sseInterval)
	defer tick.Stop()
	// progress decides what is news (Report.Moved).
	var last progress.Report
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
			if !sent || p.Moved(last) {
				sent, last = true, p
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

// openStream answers 200 with an event stream's headers and returns its
// send: send writes and flushes within streamWrite (a stream outlives the
// request's write deadline, but no single event may stall).
func (s *Server) openStream(w http.ResponseWriter) (send func(format string, args ...any) error, err error) {
	rc := http.NewResponseController(w)
	send = func(format string, args ...any) error {
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
	return send, rc.Flush()
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
