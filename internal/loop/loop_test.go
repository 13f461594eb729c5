package loop

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestPoisonedItemBackedOffOthersRun: a panicking item is recovered,
// counted and retried only after a capped, growing backoff, while the
// other items run on every turn.
func TestPoisonedItemBackedOffOthersRun(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := &clock{t: time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}
	g, err := New("rounds", Options{Registerer: reg, Now: c.Now, MinBackoff: time.Second, MaxBackoff: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// A second loop of the process shares the families.
	if _, err := New("runner", Options{Registerer: reg}); err != nil {
		t.Fatalf("second loop on one registry: %v", err)
	}
	if got := testutil.ToFloat64(g.m.panics); got != 0 {
		t.Fatalf("panics preset = %v", got)
	}
	ctx := context.Background()
	var poisonRuns, goodRuns int
	var poisonAt []time.Duration
	start := c.Now()
	for turn := 0; turn < 20; turn++ { // one turn a second
		ran, err := g.Do(ctx, "poison", func(context.Context) error {
			poisonRuns++
			poisonAt = append(poisonAt, c.Now().Sub(start))
			panic("poisoned item")
		})
		var pe *PanicError
		if ran && !errors.As(err, &pe) {
			t.Fatalf("turn %d: Do = %v; want a *PanicError", turn, err)
		}
		if _, err := g.Do(ctx, "good", func(context.Context) error { goodRuns++; return nil }); err != nil {
			t.Fatal(err)
		}
		c.add(time.Second)
	}
	if goodRuns != 20 {
		t.Errorf("the good item ran %d times in 20 turns; want 20", goodRuns)
	}
	// Backoff 1 s, 2 s, 4 s, then capped at 4 s: runs at 0, 1, 3, 7, 11, 15, 19.
	want := []time.Duration{0, 1, 3, 7, 11, 15, 19}
	if len(poisonAt) != len(want) {
		t.Fatalf("poisoned item ran at %v; want %v", poisonAt, want)
	}
	for i := range want {
		if poisonAt[i] != want[i]*time.Second {
			t.Errorf("poisoned item ran at %v; want %v s", poisonAt, want)
			break
		}
	}
	if got := testutil.ToFloat64(g.m.panics); got != float64(poisonRuns) {
		t.Errorf("yidu_loop_panics_total{loop=rounds} = %v; want %d", got, poisonRuns)
	}
	if got := testutil.ToFloat64(g.m.backedOff); got != 1 {
		t.Errorf("backed off = %v; want 1", got)
	}
	// Healed: one success clears it.
	c.add(5 * time.Second)
	if ran, err := g.Do(ctx, "poison", func(context.Context) error { return nil }); !ran || err != nil {
		t.Errorf("healed item: ran %v err %v", ran, err)
	}
	if g.BackedOff("poison") || testutil.ToFloat64(g.m.backedOff) != 0 {
		t.Errorf("a success left the item backed off")
	}
}

func TestFailureBacksOffShutdownDoesNot(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	g, _ := New("x", Options{Now: c.Now})
	boom := errors.New("boom")
	if _, err := g.Do(context.Background(), "a", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Do = %v", err)
	}
	if !g.BackedOff("a") {
		t.Error("a failed item is not backed off")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := g.Do(ctx, "b", func(ctx context.Context) error { return ctx.Err() }); err == nil {
		t.Fatal("Do hid ctx's error")
	}
	if g.BackedOff("b") {
		t.Error("an item cut by shutdown was backed off")
	}
	if err := g.Run(context.Background(), "chore", func(context.Context) error { panic("x") }); err == nil {
		t.Error("Run hid a panic")
	}
}
