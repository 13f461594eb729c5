package bitmap

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/yidu-io/yidu"
	"github.com/yidu-io/yidu/delta"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestPageSignal: the reading page's signals set their own bitmaps, and
// every event travels with its version, IP and User-Agent, also when the
// member gave the signal before on another version (the archive keeps
// each version's); a non-recipient's event writes nothing; an app that
// counts acknowledged makes the ack a read.
func TestPageSignal(t *testing.T) {
	s, _ := mustStore(t, Options{})
	pub := &capturePublisher{}
	ackApp := yidu.App{Name: "hr", CorpID: testCorp, AgentID: 7, ReadSignals: []yidu.Signal{yidu.SignalAcknowledged}}
	rec, err := NewRecorder(s, fakeIDs{}, pub, newFakeLoader(), RecorderOptions{Apps: []yidu.App{ackApp}, Registerer: prometheus.NewRegistry()})
	testenv.Check(t, "NewRecorder", err)
	ctx := context.Background()
	at := time.Now().Truncate(time.Second)
	const msg = "notice-p"
	testenv.Check(t, "PutMessage", s.PutMessage(ctx, testMessage(msg, 7, at.Add(-time.Minute)), uids(1, 2)))
	ev := func(v int) PageEvent {
		return PageEvent{Version: v, IP: "203.0.113.5", UserAgent: "Mozilla/5.0 wxwork/4.1 " + strings.Repeat("x", 300)}
	}
	steps := []struct {
		sig      yidu.Signal
		user     string
		agent    int64
		v        int
		reads    int
		recorded bool
	}{
		{yidu.SignalLink, "u1", 7, 1, 0, true},
		{yidu.SignalReadToEnd, "u1", 7, 1, 0, true},
		{yidu.SignalAcknowledged, "u1", 7, 1, 1, true},
		{yidu.SignalAcknowledged, "u1", 7, 2, 0, true},  // v2's ack: a delta, no new read
		{yidu.SignalAcknowledged, "u9", 7, 1, 0, false}, // not a recipient
		{yidu.SignalReadToEnd, "u2", 8, 1, 0, false},    // under another app (issue 46): not on record
	}
	for _, st := range steps {
		n, recorded, err := rec.PageSignal(ctx, st.sig, testCorp, st.agent, st.user, msg, at, ev(st.v))
		if err != nil || n != st.reads || recorded != st.recorded {
			t.Fatalf("PageSignal(%v, %s, agent %d, v%d) = %d, %v, %v; want %d, %v, nil", st.sig, st.user, st.agent, st.v, n, recorded, err, st.reads, st.recorded)
		}
	}
	_, rd, by, found, err := s.CountsBySignal(ctx, testCorp, msg)
	if err != nil || !found || rd != 1 || by.Link != 1 || by.ReadToEnd != 1 || by.Acknowledged != 1 {
		t.Errorf("CountsBySignal = read %d %+v, %v, %v; want 1 read, one of each page signal", rd, by, found, err)
	}
	pub.mu.Lock()
	got := append([]delta.Delta(nil), pub.ds...)
	pub.mu.Unlock()
	if len(got) != 4 {
		t.Fatalf("published %d deltas; want 4 (link, read_to_end, ack v1, ack v2): %+v", len(got), got)
	}
	for i, want := range []struct {
		src     delta.Source
		v       uint32
		counted bool
	}{{delta.SourceLink, 1, false}, {delta.SourceReadToEnd, 1, false}, {delta.SourceAck, 1, true}, {delta.SourceAck, 2, false}} {
		d := got[i]
		if d.Source != want.src || d.Page.Version != want.v || d.Counted != want.counted || d.UID != 1 || d.Page.IP != "203.0.113.5" || len(d.Page.UserAgent) != delta.MaxField {
			t.Errorf("delta %d = %+v; want source %v version %d counted %v, the IP and a User-Agent cut to %d bytes", i, d, want.src, want.v, want.counted, delta.MaxField)
		}
		if _, err := delta.Unmarshal(delta.Marshal(d)); err != nil {
			t.Errorf("delta %d does not round-trip: %v", i, err)
		}
	}
	if _, _, err := rec.PageSignal(ctx, yidu.SignalButton, testCorp, 7, "u1", msg, at, ev(1)); err == nil {
		t.Errorf("PageSignal(button) = nil error; want an error (not a page signal)")
	}
	if _, _, err := rec.PageSignal(ctx, yidu.SignalAcknowledged, testCorp, 7, "u1", msg, at, ev(0)); err == nil {
		t.Errorf("PageSignal(version 0) = nil error; want an error")
	}
}

// TestReadRule: a message whose read rule is acknowledged is read only by
// an acknowledgement: a card press, the page opened and read to its end
// are recorded but do not count, whatever the app counts; the rule
// survives a restore from MySQL.
func TestReadRule(t *testing.T) {
	e := newRecEnv(t, Options{})
	ctx := context.Background()
	at := time.Now().Truncate(time.Second)
	const msg = "notice-r"
	m := testMessage(msg, 7, at.Add(-time.Minute))
	m.ReadRule = yidu.ReadRuleAcknowledged
	e.register(t, m, uids(1, 2))
	ev := PageEvent{Version: 1}
	if n, err := e.rec.CardRead(ctx, testCorp, 7, "u1", msg+"@0", at); n != 0 || err != nil {
		t.Errorf("CardRead under the acknowledged rule = %d, %v; want 0 (recorded, not read)", n, err)
	}
	for _, sig := range []yidu.Signal{yidu.SignalLink, yidu.SignalReadToEnd} {
		if n, _, err := e.rec.PageSignal(ctx, sig, testCorp, 7, "u1", msg, at, ev); n != 0 || err != nil {
			t.Errorf("PageSignal(%v) = %d, %v; want 0", sig, n, err)
		}
	}
	if _, rd, by, _, err := e.s.CountsBySignal(ctx, testCorp, msg); err != nil || rd != 0 || by.Button != 1 || by.Link != 1 || by.ReadToEnd != 1 {
		t.Errorf("before the ack: read %d, %+v, %v; want 0 read, each signal once", rd, by, err)
	}
	// Redis loses the message; the restore brings the rule back.
	wipe(t, e.rdb, e.s)
	if n, _, err := e.rec.PageSignal(ctx, yidu.SignalAcknowledged, testCorp, 7, "u2", msg, at, ev); n != 1 || err != nil {
		t.Errorf("ack after a restore = %d, %v; want 1", n, err)
	}
	if n, err := e.rec.CardRead(ctx, testCorp, 7, "u1", msg+"@0", at); n != 0 || err != nil {
		t.Errorf("CardRead after a restore = %d, %v; want 0", n, err)
	}
	if _, rd, _, _, err := e.s.CountsBySignal(ctx, testCorp, msg); err != nil || rd != 1 {
		t.Errorf("read = %d, %v; want 1 (the acknowledgement)", rd, err)
	}
}
