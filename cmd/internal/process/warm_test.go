package process

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// lookupsByResult reads yidu_idmap_lookups_total{result} from m's registry.
func lookupsByResult(tb testing.TB, m *Main, result string) float64 {
	tb.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		tb.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "yidu_idmap_lookups_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	tb.Fatalf("no yidu_idmap_lookups_total{result=%q}", result)
	return 0
}

// TestReceiverStartsWarm: a receiver started over a synced directory
// answers every member's first callback from its idmap cache, alone and
// beside the other roles (its own pool and idmap), and WarmReceiver
// (which the demo calls after its sync) fills it again; without it each
// member's first press was a MySQL lookup inside the recorder's 1 s,
// which a busy server missed (the demo's "callback failed" ERROR lines).
func TestReceiverStartsWarm(t *testing.T) {
	first := mustRunMainWith(t, nil) // seeds testMembers after its start
	if first.ReceiverMapper == nil || first.ReceiverMapper == first.Mapper {
		t.Fatalf("yidu serve: ReceiverMapper = %p, Mapper %p; want the receiver's own idmap", first.ReceiverMapper, first.Mapper)
	}
	ctx := context.Background()
	first.WarmReceiver(ctx)
	before := lookupsByResult(t, first, "hit")
	for _, u := range testMembers {
		if _, ok, err := first.ReceiverMapper.Lookup(ctx, testCorp, u); err != nil || !ok {
			t.Fatalf("Lookup(%q) after WarmReceiver = %v, %v; want found", u, ok, err)
		}
	}
	if got := lookupsByResult(t, first, "hit") - before; got != float64(len(testMembers)) {
		t.Errorf("after WarmReceiver: %v cache hits of %d lookups; want all", got, len(testMembers))
	}

	for _, tc := range []struct {
		name  string
		roles Roles
	}{
		{"receiver alone", Roles{Receiver: true}},
		{"serve", All},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMain(first.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
			t.Cleanup(func() { m.Close() })
			if err := m.Run(ctx, tc.roles); err != nil {
				t.Fatalf("Run: %v", err)
			}
			for _, u := range testMembers {
				if _, ok, err := m.ReceiverMapper.Lookup(ctx, testCorp, u); err != nil || !ok {
					t.Fatalf("Lookup(%q) = %v, %v; want found", u, ok, err)
				}
			}
			if hit, miss := lookupsByResult(t, m, "hit"), lookupsByResult(t, m, "miss"); hit != float64(len(testMembers)) || miss != 0 {
				t.Errorf("first lookups of a started receiver: %v hits, %v misses; want %d hits, 0 misses", hit, miss, len(testMembers))
			}
		})
	}
}
