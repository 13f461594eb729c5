package faulttest

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A flushd killed with SIGKILL stays a member of the consumer group until
// its session times out: kafka.session_timeout, 10 s by default
// (flushd.DefaultSessionTimeout; kgo's own default is 45 s). Until then
// the group cannot finish a rebalance, so a restarted or second flushd
// writes nothing. The helpers below fast-forward that expiry: they learn
// each flushd's member id when it joins, and after a kill -9 send a
// LeaveGroup for the dead id, which is what the coordinator does itself
// once the session times out.

// admin returns a Kafka client for the scenario's cluster.
func (e *env) admin() *kgo.Client {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kcl == nil {
		cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...))
		if err != nil {
			e.t.Fatal(err)
		}
		e.kcl = cl
		e.t.Cleanup(cl.Close)
	}
	return e.kcl
}

// groupMembers returns the member ids of flushd's group and its state.
func (e *env) groupMembers(ctx context.Context) (map[string]bool, string, error) {
	gs, err := kadm.NewClient(e.admin()).DescribeGroups(ctx, group)
	if err != nil {
		return nil, "", err
	}
	g, ok := gs[group]
	if !ok {
		return nil, "", fmt.Errorf("group %s not described", group)
	}
	if g.Err != nil && g.State == "" {
		return nil, "", g.Err
	}
	ids := map[string]bool{}
	for _, m := range g.Members {
		ids[m.MemberID] = true
	}
	return ids, g.State, nil
}

// startMember starts a flushd and waits until it has joined the group and
// the group is stable again, recording its member id.
func (e *env) startMember(name, dsn string) *proc {
	e.t.Helper()
	ctx := context.Background()
	before, _, _ := e.groupMembers(ctx)
	p := e.startFlushd(name, dsn)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ids, state, err := e.groupMembers(ctx)
		if err == nil && state == "Stable" {
			for id := range ids {
				if !before[id] {
					p.member = id
					return p
				}
			}
		}
		if !p.Running() {
			e.t.Fatalf("%s exited: %v\n%s", name, p.Err(), p.Tail(20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("%s did not join group %s within 20 s", name, group)
	return nil
}

// expire removes a killed flushd's member from the group, as its session
// timeout would.
func (e *env) expire(p *proc) {
	e.t.Helper()
	if p.member == "" {
		e.t.Fatalf("%s: member id unknown", p.Name())
	}
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = group
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = p.member
	req.Members = append(req.Members, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, e.admin())
	if err != nil {
		e.t.Fatalf("leave group for %s: %v", p.Name(), err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		e.t.Fatalf("leave group for %s: %v", p.Name(), err)
	}
	for _, mr := range resp.Members {
		// Unknown: the session already expired, or the member had not
		// finished joining.
		if err := kerr.ErrorForCode(mr.ErrorCode); err != nil && err != kerr.UnknownMemberID {
			e.t.Fatalf("leave group for %s: %v", p.Name(), err)
		}
	}
}

// committed returns the sum of flushd's committed offsets: with one delta
// per read and no re-emits, the number of reads flushd has acknowledged.
func (e *env) committed() int64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(e.admin()).FetchOffsets(ctx, group)
	if err != nil {
		e.t.Fatalf("fetch offsets: %v", err)
	}
	var n int64
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At > 0 {
			n += o.At
		}
	})
	return n
}
