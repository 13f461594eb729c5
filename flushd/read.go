package flushd

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
)

// Read is what flushd writes for recipient UID of a message: its first
// read that counts, if any, and the first time of each signal. Times are
// unix seconds.
type Read struct {
	UID uint32
	// At and Source are the first read that counts (is_read, read_time,
	// source); Source 0: no counted read, only signal times.
	At     int64
	Source delta.Source
	// Button, Link and EnterAgent are the first time of each signal,
	// counted or not (button_at, link_at, enter_at); 0: not seen.
	Button, Link, EnterAgent int64
	// ReadToEnd and Acknowledged are the first time of the reading page's
	// signals (issue 39), of any version; 0: not seen. message_read_record
	// has no column for them: their facts are Pages, in page_signals.
	ReadToEnd, Acknowledged int64
	// Pages are the reading page's events behind the read (delta version
	// 4), one per signal and version, the earliest of each kept.
	Pages []PageEvent
}

// signal returns r's field for signal sig.
func (r *Read) signal(sig yidu.Signal) *int64 {
	switch sig {
	case yidu.SignalButton:
		return &r.Button
	case yidu.SignalLink:
		return &r.Link
	case yidu.SignalEnterAgent:
		return &r.EnterAgent
	case yidu.SignalReadToEnd:
		return &r.ReadToEnd
	case yidu.SignalAcknowledged:
		return &r.Acknowledged
	}
	panic(fmt.Sprintf("flushd: invalid signal %d", sig))
}

// readOf returns what delta d asks to write: a counted read if it counts,
// and its signal's time (a reconcile delta has none).
func readOf(d delta.Delta) Read {
	r := Read{UID: d.UID}
	if d.Counted {
		r.At, r.Source = d.ReadTime, d.Source
	}
	if sig, ok := d.Source.Signal(); ok && !d.Page.ArchiveOnly {
		*r.signal(sig) = d.ReadTime
	}
	if d.Page.Version != 0 {
		r.Pages = []PageEvent{{Source: d.Source, Version: d.Page.Version, At: d.ReadTime, IP: d.Page.IP, UserAgent: d.Page.UserAgent}}
	}
	return r
}

// merge folds o (of the same uid) into r, keeping the earliest counted read
// and the earliest time of each signal.
func (r *Read) merge(o Read) {
	if o.Source != 0 && (r.Source == 0 || o.At < r.At) {
		r.At, r.Source = o.At, o.Source
	}
	for _, sig := range yidu.Signals() {
		if t := *o.signal(sig); t != 0 {
			if p := r.signal(sig); *p == 0 || t < *p {
				*p = t
			}
		}
	}
	for _, e := range o.Pages {
		i := slices.IndexFunc(r.Pages, func(p PageEvent) bool { return p.Source == e.Source && p.Version == e.Version })
		switch {
		case i < 0:
			r.Pages = append(r.Pages, e)
		case e.At < r.Pages[i].At:
			r.Pages[i] = e
		}
	}
}

// onRecord reports whether r has something for its message_read_record
// row: a counted read or a time of a signal with a column there.
func (r Read) onRecord() bool {
	return r.Source != 0 || r.Button != 0 || r.Link != 0 || r.EnterAgent != 0
}

// check reports whether r can be stored: a counted read of a known source
// or a signal time, every time within DATETIME's years.
func (r Read) check() error {
	empty := r.Source == 0
	if r.Source != 0 {
		if r.Source > delta.SourceAck {
			return fmt.Errorf("%w: uid %d: source %d", ErrInvalid, r.UID, r.Source)
		}
		if err := checkTime(r.UID, "read_time", r.At); err != nil {
			return err
		}
	}
	for _, sig := range yidu.Signals() {
		if t := *r.signal(sig); t != 0 {
			empty = false
			if err := checkTime(r.UID, sig.String(), t); err != nil {
				return err
			}
		}
	}
	for _, p := range r.Pages {
		empty = false
		if !p.Source.Page() || p.Version == 0 || len(p.IP) > 64 || len(p.UserAgent) > delta.MaxField {
			return fmt.Errorf("%w: uid %d: page event %d of version %d", ErrInvalid, r.UID, p.Source, p.Version)
		}
		if err := checkTime(r.UID, "page event", p.At); err != nil {
			return err
		}
	}
	if empty {
		return fmt.Errorf("%w: uid %d: nothing to write", ErrInvalid, r.UID)
	}
	return nil
}

func checkTime(uid uint32, what string, t int64) error {
	if t < minReadTime || t > maxReadTime {
		return fmt.Errorf("%w: uid %d: %s %d out of range", ErrInvalid, uid, what, t)
	}
	return nil
}

// firstReads returns reads sorted by uid with one Read per uid, merged
// (Read.merge). Sorted uids walk the primary key in order. The Flusher's
// batches are already sorted and unique, so they are not copied.
func firstReads(reads []Read) []Read {
	sorted := true
	for i := 1; i < len(reads); i++ {
		if reads[i-1].UID >= reads[i].UID {
			sorted = false
			break
		}
	}
	if sorted {
		return reads
	}
	reads = slices.Clone(reads)
	slices.SortStableFunc(reads, func(a, b Read) int { return cmp.Compare(a.UID, b.UID) })
	out := reads[:0]
	for _, r := range reads {
		if n := len(out); n > 0 && out[n-1].UID == r.UID {
			out[n-1].merge(r)
			continue
		}
		out = append(out, r)
	}
	return out
}
