package bitmap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
)

// record marks that uid gave signal sig on msgIDs and publishes the new
// signals; it returns how many of them count as read. ErrInFlight is
// returned when another attempt holds a signal's lease until the caller's
// deadline: that attempt may have died before Kafka acknowledged the
// delta, so answering 200 could lose the signal. The receiver answers 503
// and WeCom's retry, after the lease, re-emits it.
var ErrInFlight = errors.New("bitmap: read in flight in another attempt")

// inFlightPoll is how often record looks again at a read another attempt
// holds, until that attempt acks it (duplicate) or its lease expires (new).
const inFlightPoll = 50 * time.Millisecond

// record also returns kept: how many of msgIDs now hold the signal (new
// or repeated; all of them when published unmarked), the rest naming no
// message of the app or no recipient.
func (r *Recorder) record(ctx context.Context, sig yidu.Signal, corpID string, agentID int64, uid uint32, msgIDs []string, at time.Time, page delta.Page) (reads, kept int, err error) {
	counted := r.counted(corpID, agentID, sig)
	for waiting := false; ; waiting = true {
		n, k, inFlight, err := r.recordOnce(ctx, sig, counted, corpID, agentID, uid, msgIDs, at, page)
		if waiting && err != nil && ctx.Err() != nil {
			// The deadline came while looking again at a read in flight.
			return reads, kept, fmt.Errorf("%w: %s (%w)", ErrInFlight, strings.Join(msgIDs, ","), err)
		}
		if errors.Is(err, errRedisDown) && sig != yidu.SignalEnterAgent && ctx.Err() == nil {
			u, err := r.unmarked(ctx, sig, counted, corpID, uid, msgIDs, at, page, err)
			if err != nil {
				return reads + n + u, kept, err
			}
			return reads + n + u, kept + len(msgIDs), nil
		}
		reads += n
		kept += k
		if err != nil || len(inFlight) == 0 {
			return reads, kept, err
		}
		// Never answer 200 for a read whose delta only another attempt
		// may publish: wait for it to settle, within the deadline.
		msgIDs = inFlight
		t := time.NewTimer(inFlightPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return reads, kept, fmt.Errorf("%w: %s", ErrInFlight, strings.Join(inFlight, ","))
		case <-t.C:
		}
	}
}

// recordOnce marks, publishes and acks once; it returns the number of new
// counted reads, how many msgIDs hold the signal now (new or duplicate)
// and the msgIDs whose signal another attempt holds in flight.
func (r *Recorder) recordOnce(ctx context.Context, sig yidu.Signal, counted bool, corpID string, agentID int64, uid uint32, msgIDs []string, at time.Time, page delta.Page) (int, int, []string, error) {
	src := delta.SourceOf(sig)
	targets := make([]Target, len(msgIDs))
	for i, id := range msgIDs {
		targets[i] = Target{CorpID: corpID, MsgID: id, AgentID: agentID, Signal: sig, Counted: counted, UIDs: []uint32{uid}}
	}
	outs, err := r.mark(ctx, targets)
	if err != nil {
		return 0, 0, nil, err
	}
	var retry []int
	for i, o := range outs {
		if o[0] == OutcomeMissing {
			found, err := r.restore(ctx, corpID, msgIDs[i])
			if err != nil {
				return 0, 0, nil, err
			}
			if found {
				retry = append(retry, i)
			}
		}
	}
	if len(retry) > 0 {
		again := make([]Target, len(retry))
		for j, i := range retry {
			again[j] = targets[i]
		}
		outs2, err := r.mark(ctx, again)
		if err != nil {
			return 0, 0, nil, err
		}
		for j, i := range retry {
			if outs2[j][0] == OutcomeMissing {
				return 0, 0, nil, fmt.Errorf("bitmap: %s/%s missing right after restore (Redis evicting?)", corpID, msgIDs[i])
			}
			outs[i] = outs2[j]
		}
	}
	var fresh []Target
	var ds []delta.Delta
	var inFlight []string
	reads, dups := 0, 0
	for i, o := range outs {
		switch o[0] {
		case OutcomeNew, OutcomeNewUncounted:
			// The outcome, not counted, says whether the signal counts: a
			// re-emission carries what the attempt that set the bit decided.
			fresh = append(fresh, targets[i])
			ds = append(ds, delta.Delta{CorpID: corpID, MsgID: msgIDs[i], UID: uid, ReadTime: at.Unix(), Source: src, Counted: o[0] == OutcomeNew, Page: page})
			if o[0] == OutcomeNew {
				reads++
			}
		case OutcomeDuplicate:
			r.count(src, outcomeLabelDuplicate, 1)
			if page.Version != 0 {
				// The member gave the signal before, perhaps on another
				// version: the archive keeps each version's event
				// (page_signals), so the event travels without a lease;
				// flushd keeps the first of each version. It never counts:
				// the mark that set the bit decided whether the signal
				// made a read (the notice's rule, in Redis).
				ds = append(ds, delta.Delta{CorpID: corpID, MsgID: msgIDs[i], UID: uid, ReadTime: at.Unix(), Source: src, Page: page})
				continue
			}
			dups++
		case OutcomeInFlight:
			r.count(src, outcomeLabelInFlight, 1)
			inFlight = append(inFlight, msgIDs[i])
		case OutcomeNotRecipient:
			r.count(src, outcomeLabelNotRecipient, 1)
		case OutcomeMissing, OutcomeOtherApp:
			r.count(src, outcomeLabelUnknownMsgID, 1)
		}
	}
	if len(ds) == 0 {
		return 0, dups, inFlight, nil
	}
	start := time.Now()
	err = r.pub.Publish(ctx, ds)
	r.m.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		r.m.publishErrors.Inc()
		// Release must run even when ctx is done: it only makes a
		// retry's re-emit come sooner, and is bounded itself.
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.AckTimeout)
		defer cancel()
		if rerr := r.store.Release(bg, fresh); rerr != nil {
			r.log.Warn("release leases", "err", rerr)
		}
		return 0, 0, nil, err
	}
	r.count(src, outcomeLabelNew, reads)
	r.count(src, outcomeLabelUncounted, len(fresh)-reads)
	// The deltas are durable: the ack only tidies the leases up, so the
	// 200 does not wait for it (Store.AckAsync).
	if err := r.store.AckAsync(fresh, r.ackFailed); err != nil {
		r.ackFailed(err)
	}
	return reads, dups + len(ds), inFlight, nil
}

// ackFailed counts an ack that did not reach Redis: the deltas are
// durable, the leases only cause one harmless re-emit later.
func (r *Recorder) ackFailed(err error) {
	r.m.ackErrors.Inc()
	r.log.Warn("ack pending reads", "err", err)
}

// Outcomes of signals taken while a store was down.
const (
	// outcomeLabelUnmarked counts signals published without Redis.
	outcomeLabelUnmarked = "unmarked"
	// outcomeLabelByUserID counts signals published by UserID: MySQL
	// could not map it and the member was not in the idmap cache.
	outcomeLabelByUserID = "by_userid"
)

// byUserID publishes signal sig of userID on msgID by UserID (uid 0,
// delta.Delta UserID) when the uid lookup failed (MySQL down and the
// member not in the cache): flushd maps the UserID once MySQL answers,
// writes the recipient row (a non-member or non-recipient changes none)
// and sets the bits (flushd.LiveView). Nothing is marked in Redis: the
// uid is not known here. It returns how many count as read.
func (r *Recorder) byUserID(ctx context.Context, sig yidu.Signal, corpID string, agentID int64, userID, msgID string, at time.Time, page delta.Page, cause error) (int, error) {
	src := delta.SourceOf(sig)
	if !yidu.UserID(userID).Valid() {
		return 0, cause
	}
	counted := r.counted(corpID, agentID, sig)
	d := delta.Delta{CorpID: corpID, MsgID: msgID, UserID: userID, ReadTime: at.Unix(), Source: src, Counted: counted, Page: page}
	start := time.Now()
	err := r.pub.Publish(ctx, []delta.Delta{d})
	r.m.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		r.m.publishErrors.Inc()
		return 0, fmt.Errorf("bitmap: %s: uid lookup failed (%w) and publish: %w", src, cause, err)
	}
	r.count(src, outcomeLabelByUserID, 1)
	r.logUnmarked.Do(func() {
		r.log.Warn("uid lookup failed: signal published by UserID, flushd maps it once MySQL answers (logged at most every 10s)", "err", cause)
	})
	if !counted {
		return 0, nil
	}
	return 1, nil
}

// errRedisDown marks a mark that failed in Redis (an error or no answer
// within MarkTimeout): record publishes the signal unmarked instead.
var errRedisDown = errors.New("bitmap: redis unavailable")

// mark is Store.Mark bounded by MarkTimeout; a failure other than a full
// queue (overload: 503, never more load on Kafka) is errRedisDown.
func (r *Recorder) mark(ctx context.Context, targets []Target) ([][]Outcome, error) {
	outs, err := r.store.MarkWithin(ctx, targets, r.opts.MarkTimeout)
	if err != nil && !errors.Is(err, ErrQueueFull) && !errors.Is(err, ErrClosed) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %w", errRedisDown, err)
	}
	return outs, err
}

// unmarked publishes signal sig of uid on msgIDs without Redis (see
// Recorder) and returns how many count as read, once Kafka (or the spool)
// has the deltas.
func (r *Recorder) unmarked(ctx context.Context, sig yidu.Signal, counted bool, corpID string, uid uint32, msgIDs []string, at time.Time, page delta.Page, cause error) (int, error) {
	src := delta.SourceOf(sig)
	ds := make([]delta.Delta, len(msgIDs))
	for i, id := range msgIDs {
		ds[i] = delta.Delta{CorpID: corpID, MsgID: id, UID: uid, ReadTime: at.Unix(), Source: src, Counted: counted, Page: page}
	}
	start := time.Now()
	err := r.pub.Publish(ctx, ds)
	r.m.publish.Observe(time.Since(start).Seconds())
	if err != nil {
		r.m.publishErrors.Inc()
		return 0, fmt.Errorf("bitmap: %s: redis down (%w) and publish: %w", src, cause, err)
	}
	r.count(src, outcomeLabelUnmarked, len(ds))
	r.logUnmarked.Do(func() {
		r.log.Warn("redis unavailable: signals published unmarked, flushd sets their bits once Redis answers (logged at most every 10s)", "err", cause)
	})
	if !counted {
		return 0, nil
	}
	return len(ds), nil
}

// restore loads a message Redis lacks from MySQL; found=false: unknown.
func (r *Recorder) restore(ctx context.Context, corpID, msgID string) (bool, error) {
	found, err := r.store.Restore(ctx, r.loader, corpID, msgID)
	switch {
	case err != nil:
		r.m.restores.WithLabelValues("error").Inc()
	case !found:
		r.m.restores.WithLabelValues("not_found").Inc()
	default:
		r.m.restores.WithLabelValues("restored").Inc()
	}
	return found, err
}

// count adds n to reads{source=src, outcome}. Nothing to add is skipped
// (every label pair is preset to 0).
func (r *Recorder) count(src delta.Source, outcome string, n int) {
	switch {
	case n == 0:
	case outcome == outcomeLabelNew && int(src) < len(r.m.newReads) && r.m.newReads[src] != nil:
		r.m.newReads[src].Add(float64(n))
	default:
		r.m.reads.WithLabelValues(src.String(), outcome).Add(float64(n))
	}
}
