package main

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/yidu-io/yidu/internal/rig/rigtest"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestSoakShort runs the whole soak for 20 s at a low rate: the real yidu
// binary, MariaDB, Redis, yidu-kfake. Every verdict check must pass, the
// counts must be exact, and the run must leave no database or Redis key
// behind.
func TestSoakShort(t *testing.T) {
	// The soak makes its own database on the servers; ~30 s.
	servers := rigtest.Servers(t)
	const rate, secs, recipients = 100, 20, 500
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Servers:  servers,
		Duration: secs * time.Second, MaxRate: 2 * rate, Rate: rate, Recipients: recipients, Conns: 32,
		FlushInterval: time.Second, Sample: 2 * time.Second, Warmup: 6 * time.Second, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	var out bytes.Buffer
	rep.WriteMarkdown(&out)
	if !rep.Passed() {
		t.Errorf("verdict FAIL\n%s\n%s", out.String(), progress.String())
	}
	const total = rate * secs
	if rep.Messages != 4 || rep.Callbacks != total {
		t.Errorf("%d notices, %d callbacks; want 4 (%d callbacks / %d recipients), %d", rep.Messages, rep.Callbacks, total, recipients, total)
	}
	if rep.Push.OK != total || rep.MySQLFinal != total || rep.RowsChecked != total || rep.DashboardRead != total {
		t.Errorf("200s %d, MySQL %d, rows checked %d, dashboard %d; want %d each", rep.Push.OK, rep.MySQLFinal, rep.RowsChecked, rep.DashboardRead, total)
	}
	if rep.ExitCode != 0 {
		t.Errorf("yidu exit %d after SIGTERM; want 0", rep.ExitCode)
	}
	load := 0
	for _, s := range rep.Samples {
		if !s.Draining {
			load++
		}
		if s.RSSMB <= 0 || s.ProcRSSMB <= 0 || s.HeapMB <= 0 || s.Goroutines <= 0 {
			t.Errorf("sample at %s: RSS %.1f / %.1f MB, heap %.1f MB, %d goroutines: not a measurement", s.At, s.RSSMB, s.ProcRSSMB, s.HeapMB, s.Goroutines)
		}
	}
	if load < secs/2-1 {
		t.Errorf("%d samples during %d s at a 2 s period; want ≥ %d", load, secs, secs/2-1)
	}
	for _, want := range []string{"| t | RSS MB |", "Verdict: **PASS**", "- memory flat (RSS): pass", "- zero lost: pass"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, out.String())
		}
	}

	// Nothing left behind.
	admin, err := sql.Open("mysql", servers.MySQLDSN)
	testenv.Check(t, "open mysql", err)
	defer admin.Close()
	var n int
	testenv.Check(t, "schemata", admin.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", rep.Database).Scan(&n))
	if n != 0 || rep.Database == "" {
		t.Errorf("database %q still exists after the run", rep.Database)
	}
	rdb := redis.NewClient(&redis.Options{Addr: servers.RedisAddr})
	defer rdb.Close()
	keys, _, err := rdb.Scan(ctx, 0, rep.RedisPrefix+"*", 1000).Result()
	testenv.Check(t, "scan", err)
	if len(keys) != 0 || rep.RedisPrefix == "" {
		t.Errorf("%d keys under %q after the run", len(keys), rep.RedisPrefix)
	}
}

// TestRunRefusesRepeatedReads: each callback must be a first read, so an
// audience smaller than the run is refused before anything starts.
func TestRunRefusesRepeatedReads(t *testing.T) {
	_, err := Run(context.Background(), Config{Rate: 100, Duration: 10 * time.Second, Recipients: 100, Messages: 5,
		Conns: 1, FlushInterval: time.Second, Sample: time.Second})
	if err == nil || !strings.Contains(err.Error(), "first read") {
		t.Errorf("Run(5 × 100 recipients for 1000 callbacks) = %v; want a refusal", err)
	}
}

func TestSchedule(t *testing.T) {
	tests := []struct {
		name               string
		msgs, users, total int
		rate               float64
		wantStrideNotOne   bool
	}{
		{"one user", 1, 1, 1, 10, false},
		{"two users", 3, 2, 6, 10, false},
		{"even users", 4, 1000, 4000, 100, true},
		{"prime users", 2, 997, 1500, 7, true},
		{"run shorter than audience", 5, 100, 333, 50, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := make([]string, tt.msgs)
			for i := range msgs {
				msgs[i] = "m" + string(rune('a'+i))
			}
			s := newSchedule(msgs, tt.users, tt.total, tt.rate)
			s.start = time.Unix(1_800_000_000, 0)
			if tt.wantStrideNotOne && s.stride == 1 {
				t.Errorf("stride 1: recipients come in order")
			}
			seen := map[[2]int]bool{}
			firstRound := map[int]bool{}
			var last time.Time
			for k := range tt.total {
				m, u, at := s.at(k)
				if k < tt.users {
					firstRound[u] = true
				}
				if seen[[2]int{m, u}] {
					t.Fatalf("callback %d repeats notice %d recipient %d", k, m, u)
				}
				seen[[2]int{m, u}] = true
				if got, sent := s.index(m, u); got != k || !sent {
					t.Fatalf("index(%d, %d) = %d, %v; want %d, true", m, u, got, sent, k)
				}
				if at.Before(last) {
					t.Fatalf("callback %d due %v before callback %d's %v", k, at, k-1, last)
				}
				last = at
			}
			if want := min(tt.users, tt.total); len(firstRound) != want {
				t.Errorf("%d recipients in the first round; want all %d", len(firstRound), want)
			}
			if want := s.start.Add(time.Duration(float64(tt.total-1) / tt.rate * float64(time.Second))); !last.Equal(want) {
				t.Errorf("last due %v; want %v", last, want)
			}
			// A pair the run does not reach is not sent.
			if tt.total < tt.msgs*tt.users {
				unsent := 0
				for m := range tt.msgs {
					for u := range tt.users {
						if _, sent := s.index(m, u); !sent {
							unsent++
						}
					}
				}
				if unsent != tt.msgs*tt.users-tt.total {
					t.Errorf("%d pairs not sent; want %d", unsent, tt.msgs*tt.users-tt.total)
				}
			}
		})
	}
}

func TestModInverse(t *testing.T) {
	tests := []struct {
		a, m, want int
		ok         bool
	}{
		{3, 7, 5, true},
		{626, 1000, 0, false},
		{627, 1000, 563, true},
		{5, 1, 0, true},
	}
	for _, tt := range tests {
		got, ok := modInverse(tt.a, tt.m)
		if got != tt.want || ok != tt.ok {
			t.Errorf("modInverse(%d, %d) = %d, %v; want %d, %v", tt.a, tt.m, got, ok, tt.want, tt.ok)
		}
	}
}
