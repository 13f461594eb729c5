package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/kafkatest"
	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/rig/rigtest"
	"github.com/yidu-io/yidu/internal/testenv"
)

// TestBenchEndsExact runs a small storm through all three arms and checks
// that naive and yidu end with exactly R reads, that the generator saw
// every callback answered, and that the report carries the figures.
func TestBenchEndsExact(t *testing.T) {
	// The bench makes its own database on the servers.
	servers := rigtest.Servers(t)
	const R = 2000
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Servers:    servers,
		Recipients: R, Conns: 8, Extra: 0.05, FlushInterval: 200 * time.Millisecond,
		Arms: defaultArms, ArmTimeout: time.Minute, Progress: &progress,
	})
	if err != nil {
		var details []string
		if rep != nil {
			for _, a := range rep.Arms {
				details = append(details, a.Arm+": "+a.ExactDetail)
			}
		}
		t.Fatalf("Run: %v %q\n%s", err, details, progress.String())
	}
	if len(rep.Arms) != 3 {
		t.Fatalf("report has %d arms; want 3", len(rep.Arms))
	}
	wantRequests := R + R*5/100
	for _, r := range rep.Arms {
		t.Run(r.Arm, func(t *testing.T) {
			if r.Requests != wantRequests || r.Accepted != wantRequests || r.Failed != 0 {
				t.Errorf("requests %d, accepted %d, failed %d; want %d accepted, 0 failed (status %v)",
					r.Requests, r.Accepted, r.Failed, wantRequests, r.Status)
			}
			if r.PerSecond <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.P999ms < r.P99ms {
				t.Errorf("rate %.0f/s, p50 %.2f, p99 %.2f, p999 %.2f ms: not a measurement", r.PerSecond, r.P50ms, r.P99ms, r.P999ms)
			}
			if r.Arm == armCeiling {
				if r.Exact != nil {
					t.Errorf("ceiling has an exactness verdict")
				}
				return
			}
			if r.Exact == nil || !*r.Exact {
				t.Errorf("not exact: %s", r.ExactDetail)
			}
			if r.DashboardExactMs == nil || r.MySQLExactMs == nil {
				t.Errorf("dashboard exact %v, MySQL exact %v; want both seen", r.DashboardExactMs, r.MySQLExactMs)
			}
			if r.MySQLUpdates <= 0 {
				t.Errorf("MySQL UPDATEs = %d; want > 0", r.MySQLUpdates)
			}
		})
	}
	naive, yidu := rep.Arms[1], rep.Arms[2]
	// The naive design runs one UPDATE per callback plus one per new read;
	// yidu one per flushed batch.
	if want := int64(wantRequests + R); naive.MySQLUpdates != want {
		t.Errorf("naive UPDATEs = %d; want %d", naive.MySQLUpdates, want)
	}
	if yidu.MySQLUpdates > 50 {
		t.Errorf("yidu UPDATEs = %d; want a few batches", yidu.MySQLUpdates)
	}
	// Read signals keep no dedup keys: the bitmap itself is their dedup.
	if yidu.RedisMsgBytes <= 0 || yidu.RedisDedupKeys != 0 {
		t.Errorf("redis: message %d bytes, %d dedup keys; want > 0 and 0 (reads are deduplicated by the bitmap)",
			yidu.RedisMsgBytes, yidu.RedisDedupKeys)
	}
	var table bytes.Buffer
	writeTable(&table, rep)
	for _, want := range []string{"| ceiling |", "| naive |", "| yidu |", "yidu/naive"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	if !strings.Contains(progress.String(), "dropped database") {
		t.Errorf("the bench database was not dropped:\n%s", progress.String())
	}
}

func TestBuildWorkload(t *testing.T) {
	app := rig.App()
	sentAt := time.Now().Add(-time.Hour)
	tests := []struct {
		name       string
		users      int
		extra      float64
		retries    int
		duplicates int
	}{
		{"no extras", 10, 0, 0, 0},
		{"5%", 1000, 0.05, 25, 25},
		{"odd", 100, 0.03, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := buildWorkload(app, "m1", tt.users, tt.extra, sentAt, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(w.reqs) != tt.users+tt.retries+tt.duplicates || w.retries != tt.retries || w.duplicates != tt.duplicates {
				t.Fatalf("%d requests, %d retries, %d duplicates; want %d, %d, %d",
					len(w.reqs), w.retries, w.duplicates, tt.users+tt.retries+tt.duplicates, tt.retries, tt.duplicates)
			}
			// Retries are byte-identical re-deliveries: as many distinct
			// queries as originals plus duplicates.
			seen := map[string]int{}
			for _, r := range w.reqs {
				seen[r.rawQuery]++
			}
			if len(seen) != tt.users+tt.duplicates {
				t.Errorf("%d distinct deliveries; want %d", len(seen), tt.users+tt.duplicates)
			}
		})
	}
}

// TestBenchApacheKafka runs the yidu arm small on a three-node Apache
// Kafka cluster the bench starts itself (-kafka apache): exact, and the
// JVMs' CPU counted with the arm's.
func TestBenchApacheKafka(t *testing.T) {
	testenv.Long(t)
	servers := rigtest.Servers(t)
	const R = 2000
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		Servers: servers, ApacheKafka: true, KafkaLibs: os.Getenv(kafkatest.LibsEnv),
		Recipients: R, Conns: 8, Extra: 0.05, FlushInterval: 200 * time.Millisecond,
		Arms: []string{armYidu}, ArmTimeout: time.Minute, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	y := rep.Arms[0]
	if y.Exact == nil || !*y.Exact {
		t.Errorf("not exact: %s", y.ExactDetail)
	}
	if y.KafkaCPUPer1000 <= 0 || !strings.Contains(rep.Kafka, "Apache Kafka") {
		t.Errorf("Kafka %q, its CPU %.3f s/1k; want Apache Kafka's JVMs counted", rep.Kafka, y.KafkaCPUPer1000)
	}
}

// TestBenchPageArm runs a small page storm beside the ceiling arm: a
// fifth of the readers signs in (the others hold a session), every reader
// reaches the end and acknowledges, none is refused, and the arm ends
// exact (Redis's acknowledged bitmap, page_signals and the reads hold R)
// with the page's latencies and the CPU ratio against the ceiling.
func TestBenchPageArm(t *testing.T) {
	servers := rigtest.Servers(t)
	const R = 300
	var progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Servers:    servers,
		Recipients: R, Conns: 8, Extra: 0.05, FlushInterval: 200 * time.Millisecond, PageSignIn: 0.2,
		Arms: []string{armCeiling, armPage}, ArmTimeout: time.Minute, Progress: &progress,
	})
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, progress.String())
	}
	if len(rep.Arms) != 2 || rep.Arms[1].Page == nil {
		t.Fatalf("report arms %d, page figures %v; want ceiling and page", len(rep.Arms), len(rep.Arms) == 2 && rep.Arms[1].Page != nil)
	}
	r, p := rep.Arms[1], rep.Arms[1].Page
	if p.SignedIn != 60 || p.Refused != 0 {
		t.Errorf("page arm: %d signed in, %d refused; want 60 (a fifth), 0", p.SignedIn, p.Refused)
	}
	if r.Exact == nil || !*r.Exact || p.Acked != R || p.InRedis != R || p.PageSignals != R || p.Read != R {
		t.Errorf("page arm: exact %v (%s), acked %d, Redis %d, page_signals %d, read %d; want %d each", r.Exact != nil && *r.Exact, r.ExactDetail,
			p.Acked, p.InRedis, p.PageSignals, p.Read, R)
	}
	if p.PageP99ms <= 0 || p.AckP99ms <= 0 || p.SignInP99ms <= 0 || r.CPUPer1000 <= 0 || rep.Ratios[ratioPageCPU] <= 0 {
		t.Errorf("page p99 %.2f, ack p99 %.2f, sign-in p99 %.2f ms, CPU %.3f s/1k, ratio %.2f: not a measurement",
			p.PageP99ms, p.AckP99ms, p.SignInP99ms, r.CPUPer1000, rep.Ratios[ratioPageCPU])
	}
}
