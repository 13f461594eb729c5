package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestPollQueriesOnlyWhenItMust: during the load poll reads the arm's own
// counter and leaves MySQL alone until that counter reaches want; after the
// load it queries every interval; without a counter it queries throughout.
// It returns when the query, not the counter, first says want.
func TestPollQueriesOnlyWhenItMust(t *testing.T) {
	const want = 10
	for _, c := range []struct {
		name string
		// counter is the arm's own count; nil: the arm has none.
		counter func(calls int64) int64
		// endLoad is when the load ends (0: after the test's deadline).
		endLoad time.Duration
		// query is what MySQL answers on its n-th call (from 1).
		query func(n int64) int64
		// minQueries and maxQueries bound the calls to the query; found:
		// poll saw want.
		minQueries, maxQueries int64
		found                  bool
	}{
		{
			name:       "counter below want during the load: no query",
			counter:    func(int64) int64 { return 3 },
			query:      func(int64) int64 { return 3 }, // the load never ends within the test
			minQueries: 0, maxQueries: 0, found: false,
		},
		{
			name:       "counter reaches want during the load: the query confirms",
			counter:    func(int64) int64 { return want },
			query:      func(int64) int64 { return want },
			minQueries: 1, maxQueries: 1, found: true,
		},
		{
			name:    "counter ahead of MySQL: keeps asking MySQL",
			counter: func(int64) int64 { return want },
			query: func(n int64) int64 {
				if n < 4 {
					return want - 1
				}
				return want
			},
			minQueries: 4, maxQueries: 4, found: true,
		},
		{
			name:       "no counter: queries during the load",
			query:      func(n int64) int64 { return n },
			minQueries: want, maxQueries: want, found: true,
		},
		{
			name:       "after the load: queries every interval",
			counter:    func(int64) int64 { return 0 },
			endLoad:    20 * time.Millisecond,
			query:      func(int64) int64 { return want },
			minQueries: 1, maxQueries: 1, found: true,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			loaded := make(chan struct{})
			if c.endLoad > 0 {
				time.AfterFunc(c.endLoad, func() { close(loaded) })
			}
			var queries, counts atomic.Int64
			f := func(context.Context) (int64, error) { return c.query(queries.Add(1)), nil }
			var during func() int64
			if c.counter != nil {
				during = func() int64 { return c.counter(counts.Add(1)) }
			}
			var last atomic.Int64
			at := poll(ctx, time.Millisecond, 5*time.Millisecond, loaded, want, &last, f, during)
			if q := queries.Load(); q < c.minQueries || q > c.maxQueries {
				t.Errorf("%d queries; want %d to %d", q, c.minQueries, c.maxQueries)
			}
			if found := !at.IsZero(); found != c.found {
				t.Errorf("found = %v; want %v", found, c.found)
			}
			if c.found && last.Load() != want {
				t.Errorf("last = %d; want %d", last.Load(), want)
			}
		})
	}
}
