package faulttest

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/yidu-io/yidu/internal/rig"
	"github.com/yidu-io/yidu/internal/testenv"
)

// bins builds the binaries; yiduBin is cmd/yidu, built once by TestMain.
var (
	bins    rig.Binaries
	yiduBin string
)

// TestMain builds cmd/yidu before any test: the scenarios run and kill it
// as real OS processes, so it must be the real binary, not Run called
// in-process.
func TestMain(m *testing.M) {
	if os.Getenv(testenv.LongEnv) != "1" {
		// Every scenario here takes minutes: they run in CI (.ci/run sets
		// YIDU_TEST_LONG=1), not in the README's go test ./..., and
		// skip themselves without the binary.
		os.Exit(m.Run())
	}
	var err error
	if yiduBin, err = bins.Path(context.Background(), "yidu"); err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	code := m.Run()
	printReports()
	_ = bins.Close()
	os.Exit(code)
}

// report is one scenario's line in docs/reliability.md.
type report struct {
	Scenario string
	// Reads is the number of distinct reads WeCom delivered; Tries the
	// HTTP attempts, Retries the attempts after the first.
	Reads, Tries, Retries int
	// OK is the reads answered 200; GaveUp those WeCom stopped retrying
	// after 3 non-200 answers.
	OK, GaveUp int
	// Lost is reads answered 200 missing from Redis or MySQL (or with
	// another read_time); Dupes rows counted twice in MySQL. Both must be 0.
	Lost, Dupes int
	// Landed is reads in MySQL after the repair; Repaired those of them
	// never answered 200 whose row reconcile wrote (read_time = repair time).
	Landed, Repaired int
	Elapsed          time.Duration
	Faults           string
}

var (
	reportsMu sync.Mutex
	reports   []report
)

func addReport(r report) {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	reports = append(reports, r)
}

// printReports writes the results as the markdown table of
// docs/reliability.md.
func printReports() {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	if len(reports) == 0 {
		return
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].Scenario < reports[j].Scenario })
	var b strings.Builder
	b.WriteString("\n| scenario | reads sent | tries | retries | 200s | gave up | lost | duplicates | in MySQL | repaired by reconcile | time | faults |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range reports {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %.1f s | %s |\n",
			r.Scenario, r.Reads, r.Tries, r.Retries, r.OK, r.GaveUp, r.Lost, r.Dupes, r.Landed, r.Repaired,
			r.Elapsed.Seconds(), r.Faults)
	}
	fmt.Print(b.String())
}
