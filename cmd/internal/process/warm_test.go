package process

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// lookupsByResult reads yidu_idmap_lookups_total{result} from m's registry.
func lookupsByResult(tb testing.TB, m *Main, result string) float64 {
	tb.Helper()
	return counterOf(tb, m, "yidu_idmap_lookups_total", "result", result)
}

// counterOf reads the counter name{label=value} from m's registry.
func counterOf(tb testing.TB, m *Main, name, label, value string) float64 {
	tb.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		tb.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return mt.GetCounter().GetValue()
				}
			}
		}
	}
	tb.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// TestWarmReceiver: WarmReceiver (which the demo calls after its directory
// sync) fills the receiver's own idmap (yidu serve: its own pool), so the
// first callback of each member is a cache hit; without it each member's
// first press was a MySQL lookup inside the recorder's 1 s, which the busy
// embedded MySQL missed (the demo's "callback failed" ERROR lines). With
// the receiver alone its idmap is the process's.
func TestWarmReceiver(t *testing.T) {
	ctx := context.Background()
	first := mustRunMainWith(t, nil) // seeds testMembers after its start: a cold receiver cache
	if first.ReceiverMapper == nil || first.ReceiverMapper == first.Mapper {
		t.Fatalf("yidu serve: ReceiverMapper = %p, Mapper %p; want the receiver's own idmap", first.ReceiverMapper, first.Mapper)
	}
	alone := NewMain(first.Config, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { alone.Close() })
	if err := alone.Run(ctx, Roles{Receiver: true}); err != nil {
		t.Fatalf("Run(receiver): %v", err)
	}
	if alone.ReceiverMapper != alone.Mapper {
		t.Errorf("receiver alone: ReceiverMapper = %p; want Mapper %p", alone.ReceiverMapper, alone.Mapper)
	}
	for _, tc := range []struct {
		name string
		m    *Main
	}{{"serve", first}, {"receiver alone", alone}} {
		t.Run(tc.name, func(t *testing.T) {
			tc.m.WarmReceiver(ctx)
			hits, misses := lookupsByResult(t, tc.m, "hit"), lookupsByResult(t, tc.m, "miss")
			for _, u := range testMembers {
				if _, ok, err := tc.m.ReceiverMapper.Lookup(ctx, testCorp, u); err != nil || !ok {
					t.Fatalf("Lookup(%q) = %v, %v; want found", u, ok, err)
				}
			}
			hits, misses = lookupsByResult(t, tc.m, "hit")-hits, lookupsByResult(t, tc.m, "miss")-misses
			if hits != float64(len(testMembers)) || misses != 0 {
				t.Errorf("lookups after WarmReceiver: %v hits, %v misses; want %d hits, 0 misses", hits, misses, len(testMembers))
			}
		})
	}
}

// TestReceiverWarmsAtStart: a receiver started with the members in MySQL
// (receiver.warm, the default) meets its first callbacks with their uids
// cached; with receiver.warm false each member's first lookup goes to
// MySQL.
func TestReceiverWarmsAtStart(t *testing.T) {
	ctx := context.Background()
	seeded := mustRunMainWith(t, nil) // its start seeds testMembers into MySQL
	for _, tc := range []struct {
		warm               bool
		wantHits, wantMiss int
	}{
		{true, len(testMembers), 0},
		{false, 0, len(testMembers)},
	} {
		cfg := seeded.Config
		cfg.Receiver.Warm = tc.warm
		m := NewMain(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		t.Cleanup(func() { m.Close() })
		if err := m.Run(ctx, Roles{Receiver: true}); err != nil {
			t.Fatalf("Run(receiver, warm %v): %v", tc.warm, err)
		}
		select { // the warm-up runs in the background once the receiver listens
		case <-m.WarmDone():
		case <-time.After(10 * time.Second):
			t.Fatalf("warm %v: the warm-up did not finish within 10 s", tc.warm)
		}
		for _, u := range testMembers {
			if _, ok, err := m.ReceiverMapper.Lookup(ctx, testCorp, u); err != nil || !ok {
				t.Fatalf("warm %v: Lookup(%q) = %v, %v; want found", tc.warm, u, ok, err)
			}
		}
		if hits, misses := lookupsByResult(t, m, "hit"), lookupsByResult(t, m, "miss"); hits != float64(tc.wantHits) || misses != float64(tc.wantMiss) {
			t.Errorf("receiver.warm %v: first lookups %v hits, %v misses; want %d, %d", tc.warm, hits, misses, tc.wantHits, tc.wantMiss)
		}
	}
}
